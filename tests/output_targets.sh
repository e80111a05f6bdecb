#!/usr/bin/env bash
# output_targets.sh CASE SHARDTRAIN: what a command does with the path it writes to, one class of
# target per CASE. Every case works in its own temporary directory and removes it.
#   device     an existing character device (/dev/null) is written through, never replaced
#   fifo       a FIFO nobody reads is refused at once (exit 2); one being read gets the bytes
#   refused    a directory, or a device for an output several ranks fill at offsets: exit 2
#   symlink    a symlink to a regular file keeps pointing at it; the file gets the output
#   stdout     a failed write of standard output is exit 1 with a message, never exit 0
#   together   when one output of a command fails, none appears (no temporaries either)
#   file_limit a file-size limit (ulimit -f) fails export, plot and metrics.trace by name,
#              leaving nothing behind
#   existing   one rule for every output: missing parent folders are created (checkpoint.dir,
#              metrics.file, metrics.trace, export, tokenize); an existing export (file or
#              folder) is refused unless --overwrite, which replaces it whole
set -u
case_name=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-outputs-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf '%s\n' "$*"; exit 1; }
# run CODE CMD...: runs CMD, which must exit with CODE; its output is in $out. (A command that
# does not end fails by the test's CTest timeout.)
run() {
  local want=$1
  shift
  out=$("$@" 2>&1)
  local got=$?
  [ "$got" = "$want" ] || fail "expected exit $want, got $got from: $* => $out"
}
only_inputs() {  # the directory holds exactly the listed names (nothing half-written)
  local name want=""
  for name in "$@"; do want+="$name"$'\n'; done
  [ "$(ls -A | sort)" = "$(printf '%s' "$want" | sort)" ] || fail "left behind: $(ls -lA)"
}
printf 'hello, sharded world\n' > t.txt
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16 training.seq_len=16
      precision.param_dtype=fp32 training.max_steps=2)

case "$case_name" in
device)
  run 0 "$st" tokenize --in t.txt --out /dev/null
  [ -c /dev/null ] || fail "/dev/null is no longer a character device"
  run 0 "$st" train "${tiny[@]}" metrics.trace=/dev/null metrics.file=/dev/null
  [ -c /dev/null ] || fail "/dev/null is no longer a character device after train"
  ;;
fifo)
  mkfifo f
  run 2 "$st" tokenize --in t.txt --out f
  printf '%s' "$out" | grep -q "tokenize --out: 'f' is a FIFO that nobody reads" || fail "$out"
  run 2 "$st" train "${tiny[@]}" "metrics.file=$dir/f"
  printf '%s' "$out" | grep -q "metrics.file: '$dir/f' is a FIFO that nobody reads" || fail "$out"
  # The reader is there before the writer starts: this shell holds the FIFO open (read and
  # write, so the open does not wait), and a reader takes the bytes expected from it: llm.c's
  # 1024-byte header, then 2 bytes per token (one token per byte of t.txt).
  exec 3<> f
  want=$((1024 + 2 * $(stat -c %s t.txt)))
  head -c "$want" <&3 > got &
  reader=$!
  run 0 "$st" tokenize --in t.txt --out f
  wait $reader
  exec 3<&-
  [ "$(stat -c %s got)" = "$want" ] || fail "the reader got $(stat -c %s got) bytes"
  [ -p f ] || fail "the FIFO was replaced"
  ;;
refused)
  mkdir d
  run 2 "$st" tokenize --in t.txt --out d
  printf '%s' "$out" | grep -q "tokenize --out: 'd' is a directory" || fail "$out"
  # A real metrics file, so the refusal is of the output (a directory named like a plot), not
  # of the input.
  run 0 "$st" train "${tiny[@]}" "metrics.file=$dir/m.jsonl"
  mkdir d.png
  run 2 "$st" plot m.jsonl --out d.png
  printf '%s' "$out" | grep -q "plot --out: 'd.png' is a directory" || fail "$out"
  [ -z "$(ls -A d.png)" ] || fail "something was written into d.png: $(ls -A d.png)"
  run 2 "$st" train "${tiny[@]}" metrics.trace=d
  printf '%s' "$out" | grep -q "metrics.trace: 'd' is a directory" || fail "$out"
  run 0 "$st" train "${tiny[@]}" checkpoint.dir=ck
  run 2 "$st" export --checkpoint ck/step-00000002 --out /dev/null
  printf '%s' "$out" | grep -q "export --out: '/dev/null' is a character device;.*regular file" \
    || fail "$out"
  [ -c /dev/null ] || fail "/dev/null is no longer a character device"
  [ -z "$(ls -A d)" ] || fail "something was written into the directory: $(ls -A d)"
  ;;
symlink)
  printf 'old\n' > real.bin
  ln -s real.bin link.bin
  run 0 "$st" tokenize --in t.txt --out link.bin
  [ -L link.bin ] && [ "$(readlink link.bin)" = real.bin ] || fail "the symlink was replaced"
  [ "$(stat -c %s real.bin)" = $((1024 + 2 * $(stat -c %s t.txt))) ] || fail "real.bin not written"
  only_inputs t.txt real.bin link.bin
  ;;
stdout)
  run 1 sh -c "'$st' tokenize --in t.txt --out x.bin > /dev/full"
  printf '%s' "$out" | grep -q "writing standard output: No space left on device" || fail "$out"
  run 0 "$st" train "${tiny[@]}" checkpoint.dir=ck
  for cmd in "eval --checkpoint ck/step-00000002 --json" \
             "sample --checkpoint ck/step-00000002 --prompt a --tokens 2" \
             "train ${tiny[*]} --json"; do
    run 1 sh -c "'$st' $cmd > /dev/full"
    printf '%s' "$out" | grep -q "writing standard output" || fail "$cmd: $out"
  done
  ;;
together)
  run 1 "$st" tokenize --in t.txt --val-tokens 3 --val-out v.bin --out /dev/full
  printf '%s' "$out" | grep -q "writing '/dev/full': No space left on device" || fail "$out"
  only_inputs t.txt
  ;;
file_limit)
  run 0 "$st" train "${tiny[@]}" checkpoint.dir=ck "metrics.file=$dir/m.jsonl"
  mkdir out
  cd out || exit 1
  run 1 sh -c "ulimit -f 8; '$st' export --checkpoint ../ck/step-00000002 --out model.safetensors"
  printf '%s' "$out" | grep -q "model.safetensors.*File too large" || fail "$out"
  only_inputs
  run 1 sh -c "ulimit -f 8; '$st' plot ../m.jsonl --out p.png"
  printf '%s' "$out" | grep -Eq "p.png.*File too large|gnuplot wrote an incomplete png" \
    || fail "$out"
  only_inputs
  run 1 sh -c "ulimit -f 2; '$st' train ${tiny[*]} metrics.trace=t.json"
  printf '%s' "$out" | grep -q "t.json.*File too large" || fail "$out"
  only_inputs
  ;;
existing)
  run 0 "$st" train "${tiny[@]}" checkpoint.dir=a/ck metrics.file=b/c/m.jsonl metrics.trace=d/t.json
  [ -s b/c/m.jsonl ] && [ -s d/t.json ] && [ -d a/ck/step-00000002 ] || fail "outputs: $(find . | sort)"
  run 0 "$st" tokenize --in t.txt --out e/f/t.bin
  [ -s e/f/t.bin ] || fail "tokenize did not create its folder"
  ck=a/ck/step-00000002
  run 0 "$st" export --checkpoint "$ck" --out w/one.safetensors
  cp w/one.safetensors before.safetensors
  run 2 "$st" export --checkpoint "$ck" --out w/one.safetensors --dtype fp32
  printf '%s' "$out" | grep -q "export --out: 'w/one.safetensors' exists: not replaced (add --overwrite" \
    || fail "$out"
  cmp -s w/one.safetensors before.safetensors || fail "a refused export changed the file"
  run 0 "$st" export --checkpoint "$ck" --out w/one.safetensors --dtype fp32 --overwrite
  cmp -s w/one.safetensors before.safetensors && fail "--overwrite did not replace the file"
  # A one-file export's config.json beside it is an output too.
  rm w/one.safetensors
  run 2 "$st" export --checkpoint "$ck" --out w/one.safetensors
  printf '%s' "$out" | grep -q "config.json' exists: not replaced" || fail "$out"
  [ ! -e w/one.safetensors ] || fail "the refused export wrote its weights"
  run 0 "$st" export --checkpoint "$ck" --out hf
  run 2 "$st" export --checkpoint "$ck" --out hf --dtype fp32
  printf '%s' "$out" | grep -q "export --out: 'hf' is a folder with files in it: not replaced.*--overwrite" \
    || fail "$out"
  touch hf/stale.json
  run 0 "$st" export --checkpoint "$ck" --out hf --dtype fp32 --overwrite
  [ -f hf/model.safetensors ] && [ ! -e hf/stale.json ] || fail "not replaced whole: $(ls -A hf)"
  # --overwrite replaces an earlier export only: never a folder with anything else in it (the
  # checkpoints, the folder it runs in).
  touch hf/notes.md
  run 2 "$st" export --checkpoint "$ck" --out hf --overwrite
  printf '%s' "$out" | grep -q "'hf' holds 'notes.md', which no export writes: not replaced" || fail "$out"
  [ -f hf/notes.md ] && [ -f hf/model.safetensors ] || fail "the refused folder changed: $(ls -A hf)"
  run 2 "$st" export --checkpoint "$ck" --out a/ck --overwrite
  printf '%s' "$out" | grep -q "'a/ck' holds '.*', which no export writes" || fail "$out"
  [ -d "$ck" ] || fail "the checkpoints are gone"
  rm hf/notes.md
  (cd hf || exit 1
   run 2 "$st" export --checkpoint "../$ck" --out . --overwrite
   printf '%s' "$out" | grep -q "'.' is the current folder or holds it: not replaced" || fail "$out"
  ) || exit 1
  [ -z "$(ls -A | grep -E 'partial|replaced')" ] || fail "left behind: $(ls -A)"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "$case_name: as expected"
