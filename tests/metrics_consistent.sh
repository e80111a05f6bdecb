#!/usr/bin/env bash
# metrics_consistent.sh SHARDRUN SHARDTRAIN: every step's JSON metrics at 2 ranks carry the
# documented fields, and tokens_per_s x step_ms = tokens per step.
set -u
shardrun=$1 st=$2
# Only stdout carries the JSON: stderr's progress lines, forwarded by mpirun on their own
# stream, may land in the middle of a long JSON line if both go to one pipe.
err=$(mktemp); trap 'rm -f "$err"' EXIT
out=$("$shardrun" -n 2 "$st" train --json model.n_layer=2 model.n_embd=64 model.n_head=4 \
      model.block_size=32 training.seq_len=32 training.max_steps=3 2>"$err") \
  || { echo "$out"; cat "$err"; exit 1; }
lines=$(printf '%s\n' "$out" | grep '"step"')
[ "$(printf '%s\n' "$lines" | wc -l)" = 3 ] || { echo "expected 3 step lines:"; echo "$out"; exit 1; }
field() { printf '%s' "$1" | sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"; }
while read -r line; do
  for f in step loss lr grad_norm tokens_per_s mfu step_ms exposed_comm_ms peak_rss_mib \
           budget_mib gathered_mib scattered_mib collective_ms bus_gbps rank0_step_ms \
           tokens_per_step ranks shards_mib optimizer_mib unsharded_peak_mib activations_mib; do
    [ -n "$(field "$line" "$f")" ] || { echo "field $f missing: $line"; exit 1; }
  done
  printf '%s' "$line" | grep -Eq '"rank_peak_rss_mib":\[[0-9.e+]+,[0-9.e+]+\]' \
    || { echo "rank_peak_rss_mib should list both ranks: $line"; exit 1; }
  awk -v r="$(field "$line" tokens_per_s)" -v ms="$(field "$line" step_ms)" \
      -v n="$(field "$line" tokens_per_step)" -v r0="$(field "$line" rank0_step_ms)" \
      'BEGIN { d = r * ms / 1000 - n; if (d < 0) d = -d; exit !(d <= 1e-6 * n && r0 <= ms + 1e-9) }' \
    || { echo "tokens_per_s x step_ms != tokens_per_step (or rank 0 slower than the slowest): $line"; exit 1; }
done <<< "$lines"
echo "metrics consistent"
