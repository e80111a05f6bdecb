#!/usr/bin/env bash
# simulate_first_use.sh SHARDTRAIN: docs/simulate.md's `simulate --config tiny --cluster
# this-machine` works from an empty cache: the first run says it calibrates this machine and
# where the profile goes ($XDG_CACHE_HOME/shardtrain/...), writes it there and predicts from it;
# the second run reads it without calibrating again. SHARDTRAIN_QUICK_CALIBRATION=1 keeps the
# calibration to one sample of each kind (seconds).
set -u
st=$1
cache=$(mktemp -d /tmp/shardtrain-simcache-XXXXXX)
trap 'rm -rf "$cache"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
export XDG_CACHE_HOME=$cache SHARDTRAIN_QUICK_CALIBRATION=1 OMP_WAIT_POLICY=passive
command=("$st" simulate --config tiny --cluster this-machine)  # as docs/simulate.md shows it

"${command[@]}" > "$cache/out" 2> "$cache/err" || { cat "$cache/err"; fail "the first run exited $?"; }
grep -q "^simulate: no calibration of this machine for --cluster this-machine yet (.*): measuring it once (.*) into $cache/shardtrain/this-machine\..*\.profile\.json$" "$cache/err" ||
  { cat "$cache/err"; fail "the first run does not say that it calibrates, and where"; }
profiles=("$cache"/shardtrain/this-machine.*.profile.json)
[ ${#profiles[@]} = 1 ] && [ -s "${profiles[0]}" ] || fail "no profile in $cache/shardtrain: $(ls -R "$cache")"
grep -Eq '^compute: (measured \(gpt2 profile|scaled from the gpt2 profile)' "$cache/out" || { cat "$cache/out"; fail "not predicted from the profile measured here"; }
grep -Eq '^ +2 fsdp 2x1 ' "$cache/out" || { cat "$cache/out"; fail "no 2-rank FSDP row"; }

"${command[@]}" > "$cache/out2" 2> "$cache/err2" || { cat "$cache/err2"; fail "the second run exited $?"; }
[ ! -s "$cache/err2" ] || { cat "$cache/err2"; fail "the second run calibrated again (or complained)"; }
[ "$(sed -n 2p "$cache/out2")" = "$(sed -n 2p "$cache/out")" ] || fail "the second run's compute line differs"
echo "ok: calibrated once into ${profiles[0]}, read it the second time"
