#!/usr/bin/env bash
# simulate_plan.sh SHARDTRAIN: `simulate --plan` searches the layouts and simulates the few that
# can win. Checked here: every simulated layout's step is at least its lower bound (the bound
# is what prunes, so one above its step would drop a winner); bounding out does not change the
# winner (--top 1 against every layout that fits); the search's counts add up; every kind of
# layout of 2 ranks is ranked (FSDP, DDP, TP, each pipeline schedule); the 405B-shaped plan of
# the issue (TP x PP x FSDP at 16,384 H100 ranks) prints its best layouts; --plot draws the
# frontier; a cluster calibrated from a published row reproduces it.
set -u
st=$1
dir=$(mktemp -d /tmp/shardtrain-simplan-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }

"$st" simulate --plan --json --top 0 --config tiny --cluster ethernet-25g-8x16 --ranks 2 \
  > "$dir/all2.json" || fail "plan of 2 ranks: exit $?"
"$st" simulate --plan --json --top 0 --config tiny --cluster ethernet-25g-8x16 --ranks 4 \
  training.global_batch=16 > "$dir/all4.json" || fail "plan of 4 ranks: exit $?"
"$st" simulate --plan --json --top 1 --config tiny --cluster ethernet-25g-8x16 --ranks 4 \
  training.global_batch=16 > "$dir/top4.json" || fail "plan of 4 ranks, top 1: exit $?"
/usr/bin/python3 - "$dir" << 'PY' || exit 1
import json, sys
d = sys.argv[1]
def load(name):
    return json.load(open(f"{d}/{name}.json"))
for name in ("all2", "all4", "top4"):
    j = load(name)
    counts = sum(j["do_not_fit"].values()) + sum(j["cannot_run"].values()) + j["dominated"] \
        + j["bounded_out"] + j["too_large_to_simulate"] + j["simulated"]
    assert counts == j["layouts"], f"{name}: the counts {counts} are not the {j['layouts']} layouts"
    steps = [b["step_ms"] for b in j["best"]]
    assert steps == sorted(steps), f"{name}: not fastest first: {steps}"
    for b in j["best"]:
        assert b["bound_ms"] <= b["step_ms"] * (1 + 1e-9), \
            f"{name}: {b['layout']}'s bound {b['bound_ms']} ms is above its step {b['step_ms']} ms"
        assert b["bound_ms"] > 0.5 * b["step_ms"], f"{name}: {b['layout']}'s bound is loose"
all2 = load("all2")
kinds = {(b["tp_degree"], b["pp_degree"], b["pp_schedule"], b["replicate_degree"])
         for b in all2["best"]}
for want in [(1, 1, "", 1), (1, 1, "", 2), (2, 1, "", 1), (1, 2, "1f1b", 1),
             (1, 2, "interleaved_1f1b", 1), (1, 2, "zero_bubble", 1)]:
    assert want in kinds, f"2 ranks: no layout of (tp, pp, schedule, replicas) {want} in {kinds}"
all4, top4 = load("all4"), load("top4")
assert all4["bounded_out"] == 0 and top4["bounded_out"] >= all4["simulated"] // 2, \
    f"bounded out: {all4['bounded_out']} with --top 0, {top4['bounded_out']} with --top 1"
assert top4["best"][0]["layout"] == all4["best"][0]["layout"], \
    f"--top 1 found {top4['best'][0]['layout']}, every layout {all4['best'][0]['layout']}"
assert abs(top4["best"][0]["step_ms"] - all4["best"][0]["step_ms"]) < 1e-9
print(f"2 ranks: {len(all2['best'])} layouts ranked; 4 ranks: {all4['simulated']} simulated, "
      f"{top4['simulated']} with --top 1 ({top4['bounded_out']} bounded out), the same winner")
PY

# The issue's command: the 405B shape on 16,384 ranks of the H100 pod.
"$st" simulate --plan --config llama3-405b-shape --cluster gpu-pod-h100-128x8 --ranks 16384 \
  training.global_batch=2048 --plot "$dir/frontier.png" > "$dir/405b.txt" \
  || fail "the 405B plan: exit $?: $(cat "$dir/405b.txt")"
grep -Eq '^  1 tp8 ' "$dir/405b.txt" || fail "the 405B plan's best is not TP 8: $(cat "$dir/405b.txt")"
grep -Eq '^searched [0-9]+ layouts in [0-9.]+ s: [0-9]+ do not fit \(the largest term: ' "$dir/405b.txt" \
  || fail "the 405B plan does not say what does not fit: $(cat "$dir/405b.txt")"
grep -Eq '^1 as overrides \(for train\): parallel\.dp_shard=2048 parallel\.dp_replicate=1 parallel\.tp=8 ' \
  "$dir/405b.txt" || fail "the 405B plan does not give its best as overrides: $(cat "$dir/405b.txt")"
[ -s "$dir/frontier.png" ] || fail "--plot wrote no frontier"
cat "$dir/405b.txt"

# A cluster calibrated from a published row reproduces that row (torchtitan's 8B FSDP on 8 H100,
# 5,762 tokens/s a GPU, to 0.1%) and says so in its compute line.
"$st" simulate --json --config llama3-8b-shape --cluster gpu-pod-h100-grand-teton-64x8 --ranks 8 \
  --mesh fsdp training.global_batch=16 > "$dir/cal.json" || fail "the calibrated row: exit $?"
/usr/bin/python3 - "$dir/cal.json" << 'PY' || exit 1
import json, sys
j = json.loads(open(sys.argv[1]).readline())
per_rank = j["tokens_per_s"] / 8
assert abs(per_rank / 5762 - 1) < 1e-3, f"the calibration row predicts {per_rank} tokens/s a rank"
assert "fitted to 5762 tokens/s a rank of 8 ranks" in j["compute_source"], j["compute_source"]
print(f"calibrated: {per_rank:.1f} tokens/s a rank ({j['compute_source']})")
PY
