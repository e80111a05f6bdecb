#!/usr/bin/env bash
# bpe_sample_export.sh SHARDRUN SHARDTRAIN DATA_DIR: a model with GPT-2's vocabulary (50,257,
# padded to 50,304 inside) trained briefly at 2 ranks; export writes the real 50,257 rows and
# config.json says 50,257; sample takes --prompt-tokens and prints ids, refuses a text prompt
# without the vocabulary files, and (where ../shared/data has them) encodes and decodes text.
set -u
shardrun=$1 st=$2 data=$3
dir=$(mktemp -d /tmp/shardtrain-bpe-XXXXXX); trap 'rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
model=(model.vocab_size=50257 model.n_layer=1 model.n_embd=64 model.n_head=4 model.block_size=32
       training.seq_len=32)
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 "checkpoint.dir=$dir/ckpt" \
  > "$dir/train.log" 2>&1 || fail "training failed: $(cat "$dir/train.log")"
ckpt="$dir/ckpt/step-00000002"

"$st" export --checkpoint "$ckpt" --out "$dir/hf/model.safetensors" > "$dir/export.log" 2>&1 \
  || fail "export failed: $(cat "$dir/export.log")"
grep -q '"vocab_size": 50257' "$dir/hf/config.json" || fail "config.json: $(cat "$dir/hf/config.json")"
head -c 4096 "$dir/hf/model.safetensors" | grep -aq '"transformer.wte.weight":{"dtype":"BF16","shape":\[50257,64\]' \
  || fail "wte should be exported as [50257, 64]: $(head -c 400 "$dir/hf/model.safetensors")"
# The exported weights load back (padding restored) and evaluate.
"$st" eval --weights "$dir/hf/model.safetensors" "${model[@]}" > "$dir/eval.log" 2>&1 \
  || fail "eval of the export: $(cat "$dir/eval.log")"

out=$("$st" sample --checkpoint "$ckpt" --prompt-tokens 15496,11,995 --tokens 4 --temperature 0 2>&1) \
  || fail "sample --prompt-tokens: $out"
printf '%s' "$out" | grep -Eq '^15496 11 995( [0-9]+){4} ?$' || fail "expected 7 ids: $out"
out=$("$st" sample --checkpoint "$ckpt" --prompt Hello --tokens 1 2>&1); rc=$?
[ $rc = 2 ] && printf '%s' "$out" | grep -q "needs --vocab DIR" || fail "text prompt without vocab: rc $rc, $out"
out=$("$st" sample --checkpoint "$ckpt" --prompt-tokens 1,50257 --tokens 1 2>&1); rc=$?
[ $rc = 2 ] && printf '%s' "$out" | grep -q "id 50257 (position 1) is outside the vocabulary" \
  || fail "id beyond the vocabulary: rc $rc, $out"
if [ -f "$data/gpt2/encoder.json" ]; then
  out=$("$st" sample --checkpoint "$ckpt" --vocab "$data/gpt2" --prompt "Hello, world" --tokens 3 \
        --temperature 0 2>&1) || fail "sample --vocab: $out"
  printf '%s' "$out" | grep -q '^Hello, world' || fail "the prompt should come back as text: $out"
else
  # Everything else above ran and passed; the text check needs the data, so the test reports
  # itself skipped (CTest: SKIP_RETURN_CODE 77) rather than passing without it.
  echo "skipped: the text round trip needs $data/gpt2/encoder.json (GPT-2's vocabulary); the id checks passed"
  exit 77
fi
echo "export and sample with GPT-2's vocabulary work"
