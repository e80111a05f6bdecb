#!/usr/bin/env bash
# readme_tour.sh SOURCE_DIR BIN_DIR: runs every command block of the README marked
# `<!-- tour -->`, in order, as a reader would (from the source directory), with build/bin/
# meaning BIN_DIR, /tmp/tour a temporary directory, and a tenth of the steps (max_steps,
# checkpoint.every and step-NNNNNNNN divided by 10). Fails naming the first command that fails,
# or whose output lacks what the README shows for it (the lines in `shows` below, in the
# tenth's numbers), or whose numbers break the README's claims: the 4-rank run's losses follow
# the one-process run's within 0.1% (BF16), the resumed run starts after the checkpoint's step,
# the export evaluates, the plot is a PNG.
set -u
src=$1 bin=$2
dir=$(mktemp -d /tmp/shardtrain-tour-XXXXXX)
trap 'rm -rf "$dir"' EXIT
blocks=$(awk '
  /^<!-- tour -->$/ { armed = 1; next }
  armed && /^```sh$/ { inside = 1; armed = 0; next }
  inside && /^```$/ { inside = 0; next }
  inside { print }
' "$src/README.md")
[ -n "$blocks" ] || { echo "no <!-- tour --> blocks in $src/README.md"; exit 1; }
tenth() {  # the line with every step count divided by 10 (at least 1)
  perl -pe 's/(max_steps=|checkpoint\.every=)(\d+)/$1 . (int($2 \/ 10) || 1)/ge;
            s/step-(\d{8})/sprintf("step-%08d", int($1 \/ 10) || 1)/ge'
}
# What each tour command's output must hold (extended regular expressions, one a line), by
# the command's number in the tour (mkdir counts).
declare -A shows
shows[1]='^model: GPT L=4 C=256 H=4 T=256 V=256 \| 3290624 parameters
^step +5/5 \| loss [0-9.]+ \|
^validation loss: [0-9.]+$'
shows[3]='4 ranks \(mpirun\)
^step +5/5 \| loss [0-9.]+ \|
^checkpoint \| saved .*/ckpt/step-00000005
^validation loss: [0-9.]+$'
shows[4]='mesh: HSDP: 2 replicas x 2 shards
replica group .replica0. \(2 ranks on 2 nodes\)
^step +2/2 \| loss'
shows[5]='^checkpoint \| resumed from .*/ckpt/step-00000005 after step 5
^step +6/8 \| loss
^step +8/8 \| loss'
shows[6]='^exported .*/model.safetensors \(bf16\) and .*/config.json'
shows[7]='^eval: loss [0-9.]+ \| [0-9.]+ bits per byte'
shows[8]='^ +64 fsdp 64x1 
^ +256 ddp 1x256 '
loss_at() {  # loss_at STEP OUTPUT: the loss on the step line of STEP
  printf '%s\n' "$2" | sed -n "s/^step \+$1\/[0-9]* | loss \([0-9.]*\) .*/\1/p"
}
cd "$src" || exit 1
n=0
while IFS= read -r line; do
  [ -z "$line" ] && continue
  n=$((n + 1))
  cmd=$(printf '%s\n' "$line" | tenth | sed -e "s#/tmp/tour#$dir#g" -e "s#build/bin/#$bin/#g")
  echo "tour $n: $cmd"
  out=$(bash -c "$cmd" 2>&1)
  rc=$?
  printf '%s\n' "$out" | tail -3
  if [ $rc != 0 ]; then
    printf 'tour command %d exited %d: %s\n%s\n' "$n" "$rc" "$line" "$out" | tail -30
    exit 1
  fi
  if [ -n "${shows[$n]:-}" ]; then
    while IFS= read -r want; do
      printf '%s\n' "$out" | grep -Eq -- "$want" ||
        { printf 'tour command %d: no line matches /%s/:\n%s\n' "$n" "$want" "$out"; exit 1; }
    done <<< "${shows[$n]}"
  fi
  [ $n = 1 ] && one_rank=$(loss_at 5 "$out")
  if [ $n = 3 ]; then  # the README: within 0.1% of the one-process run's losses in BF16
    four=$(loss_at 5 "$out")
    awk -v a="$one_rank" -v b="$four" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-3) }' ||
      { echo "tour: the 4-rank loss at step 5 ($four) is not within 0.1% of one rank's ($one_rank)"; exit 1; }
  fi
done <<< "$blocks"
[ -s "$dir/runs.png" ] && [ "$(head -c 4 "$dir/runs.png" | tail -c 3)" = PNG ] ||
  { echo "tour: the plot $dir/runs.png is not a PNG"; exit 1; }
echo "the README's $n tour commands ran"
