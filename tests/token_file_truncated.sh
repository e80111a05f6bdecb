#!/usr/bin/env bash
# token_file_truncated.sh SHARDRUN SHARDTRAIN TEXT: a token file truncated while `train` reads it
# at 2 ranks (after the first step line) ends the job with exit code 2 and one message naming the
# file, never SIGBUS (exit code 135, no word, as when token files were memory-mapped).
set -u
shardrun=$1 st=$2 text=$3
dir=$(mktemp -d) pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir" || exit 1
"$st" tokenize --in "$text" --out tokens.bin > tokenize.log 2>&1 || { cat tokenize.log; exit 1; }
"$shardrun" -n 2 "$st" train --config tiny training.max_steps=1000000 metrics.log_every=1 \
  training.seq_len=64 data.tokens=tokens.bin > out.log 2> err.log &
pid=$!
# The first step line: the run is reading the file.
until grep -Eq '^step +[0-9]+/' out.log; do
  kill -0 "$pid" 2>/dev/null || { echo "train ended before its first step:"; cat out.log err.log; exit 1; }
  sleep 0.2
done
truncate -s 2048 tokens.bin
wait "$pid"
rc=$? pid=
fail() { echo "$1 (exit code $rc)"; echo "--- stdout"; cat out.log; echo "--- stderr"; cat err.log; exit 1; }
[ "$rc" = 2 ] || fail "expected exit code 2"
[ "$(grep -c "tokens.bin' shrank while in use" err.log)" = 1 ] \
  || fail "expected one message naming tokens.bin"
grep "shrank" err.log
