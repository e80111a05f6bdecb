#!/usr/bin/env bash
# mfu_never_above_100.sh SHARDTRAIN: MFU is never printed above 100%, whatever start-up measured.
#  1. a first run on an empty cache measures the peak and caches it;
#  2. start-up's peak forced low (--test-peak-gflops 1, as if other jobs had slowed it): the
#     peak is the cached best instead, and the summary says so;
#  3. the same with no cache: the first step beats the peak, reads "100.0%?!", says the peak
#     was raised for this run (and caches nothing: a step's rate is no measured peak);
#  4. a real one: two busy loops beside the start-up (until its peak line) of a fresh cache.
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
cached=$dir/cache/shardtrain/peaks.json
out=$(timeout 120 "$st" "${run[@]}" 2>&1) || fail "run 1 failed: $out"
check_caps "$out" "a first run"
grep -q "^matmul peak .*(all ranks; measured now, best of .*, the best so far ($cached))" \
  <<< "$out" || fail "run 1 does not say it measured: $(grep '^matmul peak' <<< "$out")"
[ -s "$cached" ] || fail "nothing cached in $cached"

out=$(timeout 120 "$st" "${run[@]}" --test-peak-gflops 1 2>&1) || fail "run 2 failed: $out"
check_caps "$out" "a low start-up peak with a cached one"
grep -q "^matmul peak .*GFLOP/s (all ranks; the best this machine has shown, from $cached; measured now 1," \
  <<< "$out" || fail "the summary does not name the cached peak: $(grep '^matmul peak' <<< "$out")"

export XDG_CACHE_HOME=$dir/no-cache
out=$(timeout 120 "$st" "${run[@]}" --test-peak-gflops 1 2>&1) || fail "run 3 failed: $out"
check_caps "$out" "a low start-up peak"
grep -qE '^step +1/8 .*\| mfu 100\.0%\?! ' <<< "$out" || fail "step 1 does not read 100.0%?!: $out"
grep -q '^mfu: this step computed .* GFLOP/s, more than the matmul peak of 1 .*raised to the step.s rate for the rest of this run' \
  <<< "$out" || fail "no line says the peak was raised: $out"
grep -q '| 1 ranks, 1 per node, [0-9]* threads each": 1\b' "$dir/no-cache/shardtrain/peaks.json" 2>/dev/null ||
  fail "the forced start-up peak is not what was cached: $(cat "$dir/no-cache/shardtrain/peaks.json")"

# Busy loops from before the start-up until its peak line is out, then the steps on their own.
export XDG_CACHE_HOME=$dir/fresh-cache
for _ in 1 2; do sh -c 'while :; do :; done' & busy+=($!); done
timeout 120 "$st" "${run[@]}" > "$dir/loaded.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q '^matmul peak' "$dir/loaded.out" && break; sleep 0.1; done
kill "${busy[@]}" 2>/dev/null
wait "$job" || fail "run 4 failed: $(cat "$dir/loaded.out")"
check_caps "$(cat "$dir/loaded.out")" "a start-up beside two busy loops"
echo "MFU stayed at or below 100% with a cached, a low, a loaded start-up peak"
