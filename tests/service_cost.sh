#!/usr/bin/env bash
# service_cost.sh RANKS SHARDRUN SHARDTRAIN: `train` at RANKS ranks for a few seconds with the
# heartbeat on and background saves, then the services record of metrics.file (the largest
# figure over ranks) is held to bounds an order of magnitude above the design: the heartbeat
# sends one beat per period (0.2 s) and takes in as many, and neither it nor the watchdog nor
# the writer spends more than a sliver of a core. A beat answered at once (the storm that halved
# every multi-rank run) sends thousands a second and fails here.
set -u
ranks=$1 shardrun=$2 st=$3
dir=$(mktemp -d /tmp/shardtrain-services-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; cat "$dir/out"; exit 1; }
# A small model, so the run takes seconds under AddressSanitizer too (the bounds scale with
# its wall time).
"$shardrun" -n "$ranks" "$st" train model.n_layer=2 model.n_embd=128 model.n_head=4 \
  training.max_steps=24 checkpoint.dir="$dir/ckpt" \
  checkpoint.every=6 checkpoint.async=true metrics.file="$dir/m.jsonl" > "$dir/out" 2>&1 ||
  fail "train exited $?"
saves=$(grep -c 'in the background' "$dir/out")
[ "$saves" -ge 3 ] || fail "want 3 saves in the background, saw $saves"
line=$(grep '"services"' "$dir/m.jsonl") || fail "no services record in metrics.file"
echo "$line"
num() { printf '%s' "$line" | sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
for f in wall_s cpu_s beats_sent datagrams_sent datagrams_received comm_cpu_s watchdog_cpu_s \
         checkpoint_writer_cpu_s; do
  [ -n "$(num $f)" ] || fail "field $f missing"
done
awk -v wall="$(num wall_s)" -v beats="$(num beats_sent)" -v sent="$(num datagrams_sent)" \
    -v got="$(num datagrams_received)" -v hb="$(num cpu_s)" -v wd="$(num watchdog_cpu_s)" \
    -v writer="$(num checkpoint_writer_cpu_s)" -v saves="$saves" '
  function check(ok, what) { if (!ok) { print "FAIL: " what; bad = 1 } }
  BEGIN {
    design = wall / 0.2 + 1                     # beats a rank sends in wall_s
    per_beat = beats > 0 ? sent / beats : 0     # one datagram per address of the next rank
    check(beats >= 2, "the heartbeat did not beat: " beats " beats")
    check(beats <= 10 * design, beats " beats in " wall " s (design " design ")")
    check(got <= 10 * design * (per_beat > 0 ? per_beat : 1),
          got " datagrams received in " wall " s (design " design * per_beat ")")
    check(hb <= 0.05 * wall, "heartbeat thread " hb " s of CPU in " wall " s")
    check(wd <= 0.05 * wall, "watchdog thread " wd " s of CPU in " wall " s")
    check(writer > 0, "the background writer used no CPU: did it run?")
    check(writer <= 1.0 * saves, "checkpoint writer " writer " s of CPU for " saves " saves")
    exit bad
  }' || fail "a service costs more than it should"
echo "services within bounds at $ranks ranks"
