#!/usr/bin/env bash
# eval_context.sh SHARDTRAIN: eval of a model folder whose context (config.json's n_positions) is
# 64 positions. training.seq_len on the command line is honoured below the context (32) and
# refused above it naming the folder's context (100 ran silently at 64; 300 quoted the default
# config's block_size = 256); without it, the default is capped at the context. A GPT-2
# config.json with another layer_norm_epsilon than the LayerNorm computes with is refused by
# name (0.5 gave the same loss as 1e-5, bit for bit).
set -u
. "$(dirname "$0")/support/expect.sh"
st=$1
dir=$(mktemp -d /tmp/shardtrain-eval-context-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$st" train model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=64 \
  training.seq_len=64 training.max_steps=1 checkpoint.dir=ck > train.log 2>&1 ||
  fail "training: $(cat train.log)"
"$st" export --checkpoint ck/step-00000001 --out hf --dtype fp32 > export.log 2>&1 ||
  fail "export: $(cat export.log)"
out=$("$st" eval --weights hf training.seq_len=32 2>&1) || fail "eval at 32: $out"
printf '%s' "$out" | grep -q "windows of 32 |" || fail "training.seq_len=32 was not used: $out"
out=$("$st" eval --weights hf 2>&1) || fail "eval: $out"
printf '%s' "$out" | grep -q "windows of 64 |" || fail "the default is not the context: $out"
for T in 100 300; do
  expect2 "^shardtrain: error: eval: training.seq_len = $T is longer than the context of --weights 'hf': 64 positions \(n_positions in 'hf/config.json'\); give training.seq_len <= 64$" \
    "$st" eval --weights hf training.seq_len=$T
done
expect2 "training.seq_len = 100 is longer than the context of --checkpoint 'ck/step-00000001': 64 positions" \
  "$st" eval --checkpoint ck/step-00000001 training.seq_len=100
cp -r hf eps
python3 -c "import json; p='eps/config.json'; c=json.load(open(p)); c['layer_norm_epsilon']=0.5; json.dump(c, open(p, 'w'))"
expect2 "^shardtrain: error: 'eps/config.json' .*: layer_norm_epsilon = 0.5 is not supported \(this GPT-2's LayerNorm uses 1e-05\)$" \
  "$st" eval --weights eps
echo "ok"
