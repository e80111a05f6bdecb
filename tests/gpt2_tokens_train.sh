#!/usr/bin/env bash
# gpt2_tokens_train.sh SHARDRUN SHARDTRAIN DATA_DIR: GPT-2 small's vocabulary (50,257 padded to
# 50,304) with one block 256 wide (the vocabulary is the point, not the width; lr 3e-3 for the
# narrow model) trains 20 steps at 2 ranks on the shared GPT-2 token files; the loss
# starts near ln 50257 = 10.82 (an untrained model's uniform guess) and falls well below it.
# Skips (77) where ../shared/data is absent.
set -u
shardrun=$1 st=$2 data=$3
train=$data/tiny_shakespeare_gpt2_train.bin val=$data/tiny_shakespeare_gpt2_val.bin
[ -f "$train" ] && [ -f "$val" ] || { echo "skipped: no $train"; exit 77; }
err=$(mktemp); trap 'rm -f "$err"' EXIT
out=$("$shardrun" -n 2 "$st" train --json --config gpt2-124m-bpe model.n_layer=1 model.n_embd=256 \
      model.n_head=4 training.seq_len=64 training.global_batch=8 training.max_steps=20 \
      optimizer.lr=3e-3 optimizer.warmup_steps=2 "data.tokens=$train" "data.val_tokens=$val" 2>"$err") \
  || { echo "$out"; cat "$err"; exit 1; }
losses=$(printf '%s\n' "$out" | grep '"step"' | sed -n 's/.*"loss":\([-0-9.e+]*\).*/\1/p')
[ "$(printf '%s\n' "$losses" | wc -l)" = 20 ] || { echo "expected 20 losses:"; echo "$out"; exit 1; }
first=$(printf '%s\n' "$losses" | head -1) last=$(printf '%s\n' "$losses" | tail -1)
echo "loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { d = a - log(50257); if (d < 0) d = -d; exit !(d < 0.4 && b < 8.0) }' \
  || { echo "the loss should start near 10.82 and fall below 8"; exit 1; }
