#!/usr/bin/env bash
# old_checkpoint.sh SHARDRUN SHARDTRAIN FIXTURES: checkpoints an earlier shardtrain wrote
# (tests/data/old-checkpoints, GPT-2 and Llama, 2 ranks, after step 2) still load and resume.
# Loading is exact: their export is byte for byte the one that shardtrain wrote (the hashes in
# export.sha256). Resuming is exact: training on from one to step 4 in one run, or to step 3 and
# then on to 4 in a second, ends in the same bytes (masters, both moments, manifest). A resume
# at 1 rank (resharded) trains on.
set -u
shardrun=$1 st=$2
fixtures=$(cd "$3" && pwd) || exit 1
dir=$(mktemp -d /tmp/shardtrain-old-ckpt-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
gpt2=(model.n_layer=1 model.n_embd=16 model.n_head=2 model.block_size=16 training.seq_len=16
      precision.param_dtype=fp32)
llama=(--config llama-tiny model.n_layer=1 model.n_embd=16 model.n_head=2 model.n_kv_head=1
       model.ffn_hidden=32 model.block_size=16 training.seq_len=16 precision.param_dtype=fp32)
train() {  # train RANKS CHECKPOINT_DIR MAX_STEPS ARGS...
  local ranks=$1 ck=$2 steps=$3
  shift 3
  "$shardrun" -n "$ranks" "$st" train "$@" "checkpoint.dir=$ck" checkpoint.every=1 \
    "training.max_steps=$steps" > "$dir/train.log" 2>&1 \
    || fail "train at $ranks ranks to step $steps failed: $(cat "$dir/train.log")"
  grep -q "resumed from $ck/step-0000000[23]" "$dir/train.log" \
    || fail "train did not resume from $ck: $(cat "$dir/train.log")"
}
for family in gpt2 llama; do
  if [ $family = gpt2 ]; then args=("${gpt2[@]}"); else args=("${llama[@]}"); fi
  old="$fixtures/$family/step-00000002"
  [ -f "$old/COMPLETE" ] || fail "no fixture at $old"
  "$shardrun" -n 2 "$st" export --checkpoint "$old" --out "$dir/exports/$family/model.safetensors" \
    --dtype fp32 > "$dir/export.log" 2>&1 || fail "export of $old failed: $(cat "$dir/export.log")"
  for ck in one two three; do cp -r "$fixtures/$family" "$dir/$family-$ck"; done
  train 2 "$dir/$family-one" 4 "${args[@]}"
  train 2 "$dir/$family-two" 3 "${args[@]}"
  train 2 "$dir/$family-two" 4 "${args[@]}"
  for file in "$dir/$family-one/step-00000004"/*; do
    cmp "$file" "$dir/$family-two/step-00000004/${file##*/}" \
      || fail "$family: ${file##*/} differs between resuming to step 4 at once and in two runs"
  done
  train 1 "$dir/$family-three" 3 "${args[@]}"
  [ -f "$dir/$family-three/step-00000003/COMPLETE" ] || fail "$family: no step 3 after resharding to 1 rank"
done
(cd "$dir/exports" && sha256sum --quiet -c "$fixtures/export.sha256") \
  || fail "an export of an old checkpoint differs from the one its shardtrain wrote"
echo "old checkpoints load bitwise and resume exactly (gpt2, llama)"
