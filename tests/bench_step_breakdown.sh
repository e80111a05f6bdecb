#!/usr/bin/env bash
# bench_step_breakdown.sh SHARDRUN SHARDTRAIN: `bench step --json` at 2 ranks reports the step
# by kind of work, every kind present, each step's kinds adding up to rank 0's step (within 5%:
# time charged twice by nested ops, or not at all, breaks it), and a plausible MFU beside the
# peak it was measured against.
set -u
shardrun=$1 st=$2
# Only stdout carries the JSON (stderr, forwarded separately by mpirun, could split a line).
err=$(mktemp); trap 'rm -f "$err"' EXIT
out=$("$shardrun" -n 2 "$st" bench step --json --warmup 1 --steps 3 model.n_layer=2 \
      model.n_embd=64 model.n_head=4 model.block_size=64 training.seq_len=64 2>"$err") \
  || { echo "$out"; cat "$err"; exit 1; }
line=$(printf '%s\n' "$out" | grep '"breakdown_ms"') || { echo "no breakdown: $out"; exit 1; }
field() { printf '%s' "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }
for kind in other matmul attention layernorm gelu cross_entropy embedding bias_grad cast_copy \
            optimizer collective_wait recompute; do
  [ -n "$(field "$line" "$kind")" ] || { echo "kind $kind missing: $line"; exit 1; }
done
for f in breakdown_sum_ms rank0_step_ms peak_gflops peak_gflops_at_start mfu; do
  [ -n "$(field "$line" "$f")" ] || { echo "field $f missing: $line"; exit 1; }
done
awk -v sum="$(field "$line" breakdown_sum_ms)" -v step="$(field "$line" rank0_step_ms)" \
    -v mm="$(field "$line" matmul)" -v peak="$(field "$line" peak_gflops)" \
    -v start="$(field "$line" peak_gflops_at_start)" \
    'BEGIN { d = sum - step; if (d < 0) d = -d; exit !(d <= 0.05 * step && mm > 0 && peak >= start && start > 0) }' \
  || { echo "breakdown does not add up to the step (or no matmul time, or the peak shrank): $line"; exit 1; }
printf '%s' "$line" | grep -q '"mfu_plausible":true' || { echo "implausible MFU: $line"; exit 1; }
echo "breakdown consistent"
