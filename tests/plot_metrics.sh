#!/usr/bin/env bash
# plot_metrics.sh SHARDTRAIN: two short runs' metrics files overlaid into a PNG and an SVG (with
# the validation loss: a dashed curve through the first run's validations every 2 steps, a point
# for the second's final one), and bad input refused with the file and line named, nothing
# written.
set -u
st=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { echo "$*"; exit 1; }
for lr in 1e-3 3e-3; do
  every=$([ $lr = 1e-3 ] && echo 2 || echo 0)
  "$st" train --config tiny model.n_layer=1 training.seq_len=32 training.max_steps=4 \
    optimizer.lr=$lr training.eval_every=$every "metrics.file=$dir/lr$lr.jsonl" \
    > "$dir/train.log" 2>&1 || fail "training failed: $(cat "$dir/train.log")"
done
grep -q '"val_loss":.*"after_step":4\|"after_step":4.*"val_loss"' "$dir/lr1e-3.jsonl" \
  || fail "no validation loss in the metrics file: $(cat "$dir/lr1e-3.jsonl")"
"$st" plot "$dir/lr1e-3.jsonl" "$dir/lr3e-3.jsonl" --out "$dir/runs.png" || fail "plot to PNG failed"
[ "$(head -c 4 "$dir/runs.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "runs.png is no PNG"
"$st" plot "$dir/lr1e-3.jsonl" "$dir/lr3e-3.jsonl" --out "$dir/runs.svg" || fail "plot to SVG failed"
grep -q 'lr3e-3' "$dir/runs.svg" || fail "the SVG does not name the second run"
# The series after its legend entry: a dashed path with the legend's sample, then the curve.
series() { grep -A4 ">$1 (validation)<" "$dir/runs.svg"; }
series lr1e-3 | grep -Eq "stroke-dasharray[^>]* d='M[0-9.,]+ L[0-9.,]+ M[0-9.,]+ L[0-9.,]+ " \
  || fail "no validation curve for lr1e-3: $(series lr1e-3)"
series lr3e-3 | grep -q 'dasharray' && fail "lr3e-3's one validation drawn as a curve: $(series lr3e-3)"
printf '{"step":0,"loss":1,"tokens_per_s":5,"peak_rss_mib":9}\nnot json\n' > "$dir/bad.jsonl"
out=$("$st" plot "$dir/bad.jsonl" --out "$dir/bad.png" 2>&1); rc=$?
[ $rc = 2 ] && printf '%s' "$out" | grep -q "bad.jsonl' line 2 is not JSON" \
  || fail "bad line: rc $rc, $out"
out=$("$st" plot "$dir/lr1e-3.jsonl" --out "$dir/runs.jpg" 2>&1); rc=$?
[ $rc = 2 ] && printf '%s' "$out" | grep -q "must end in .png or .svg" || fail "bad extension: rc $rc, $out"
[ ! -e "$dir/bad.png" ] && [ ! -e "$dir/runs.jpg" ] || fail "a refused plot left a file"
echo "plots made"
