#!/usr/bin/env bash
# mfu_never_above_100.sh SHARDTRAIN: MFU is never printed above 100%, whatever start-up measured.
#  1. start-up's peak forced low (--test-peak-gflops 1, as if other jobs had slowed it): the
#     first step beats it, reads "100.0%?!", says the peak was raised, and caches that rate;
#  2. the same again: the peak is the cached best (the summary says so), no step above 100%;
#  3. a real one: two busy loops beside the start-up of a fresh cache, then none.
set -u
st=$1
dir=$(mktemp -d /tmp/shardtrain-mfu-XXXXXX)
busy=()
trap 'kill "${busy[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
run=(train training.max_steps=8 training.seq_len=64 "metrics.file=$dir/m.jsonl")
# No step line or metrics record above 100% (or 1.0).
check_caps() {
  local over
  over=$(grep -oE 'mfu [0-9.]+%' <<< "$1" | awk '$2 + 0 > 100' | head -1)
  [ -z "$over" ] || fail "$2: a step line reads $over: $1"
  over=$(grep -oE '"mfu":[0-9.e+-]+' "$dir/m.jsonl" | cut -d: -f2 | awk '$1 > 1' | head -1)
  [ -z "$over" ] || fail "$2: metrics.file has mfu $over"
  [ "$(grep -c '^step ' <<< "$1")" = 8 ] || fail "$2: not 8 step lines: $1"
}

export XDG_CACHE_HOME=$dir/cache
out=$(timeout 120 "$st" "${run[@]}" --test-peak-gflops 1 2>&1) || fail "run 1 failed: $out"
check_caps "$out" "a low start-up peak"
grep -qE '^step +1/8 .*\| mfu 100\.0%\?! ' <<< "$out" || fail "step 1 does not read 100.0%?!: $out"
grep -q '^mfu: this step computed .* GFLOP/s, more than the matmul peak of 1 .*the peak is raised' \
  <<< "$out" || fail "no line says the peak was raised: $out"
[ -s "$dir/cache/shardtrain/peaks.json" ] || fail "nothing cached in $dir/cache/shardtrain"

out=$(timeout 120 "$st" "${run[@]}" --test-peak-gflops 1 2>&1) || fail "run 2 failed: $out"
check_caps "$out" "a cached peak"
grep -q "^matmul peak .*GFLOP/s (all ranks; the best this machine has shown, from $dir/cache/shardtrain/peaks.json; measured now 1," \
  <<< "$out" || fail "the summary does not name the cached peak: $(grep '^matmul peak' <<< "$out")"

export XDG_CACHE_HOME=$dir/fresh-cache
for _ in 1 2; do timeout 3 sh -c 'while :; do :; done' & busy+=($!); done
out=$(timeout 120 "$st" "${run[@]}" 2>&1) || fail "run 3 failed: $out"
check_caps "$out" "a start-up beside two busy loops"
echo "MFU stayed at or below 100% with a low, a cached and a loaded start-up peak"
