#!/usr/bin/env bash
# tokenizer_faults.sh SHARDTRAIN: bad tokenizers and token inputs end with exit code 2 and one
# message naming the file at fault: a vocabulary id far beyond any real vocabulary's (once
# std::bad_alloc, exit 1), a regex that backtracks without end (once "PCRE2 match error -47",
# exit 1), a text no token of the vocabulary matches (once "holds no text"), a FIFO
# tokenizer.json in a model folder (once taken for missing). eval --tokens reads its file as
# data.token_format says (once always auto), and refuses the other data.* keys.
set -u
st=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf '%s\n' "$*"; exit 1; }
expect2() {  # expect2 PATTERN COMMAND...: exit code 2 and PATTERN in the output
  local pattern=$1 out rc; shift
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = 2 ] && printf '%s' "$out" | grep -q -- "$pattern" \
    || fail "expected exit code 2 and '$pattern' from: $* (exit code $rc): $out"
}

printf 'aaaa bbbb\n' > text.txt
echo '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1000000000}, "merges": []}}' > big.json
expect2 "big.json: model.vocab\['b'\] has id 1000000000, beyond any real vocabulary" \
  "$st" tokenize --in text.txt --out t.bin --tokenizer big.json
expect2 "data.tokenizer: big.json: model.vocab\['b'\] has id 1000000000" \
  "$st" train training.max_steps=1 data.path=text.txt data.tokenizer=big.json

python3 -c "print('a' * 10000 + 'b')" > long.txt
echo '{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated",
  "invert": false}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}}' > nested.json
expect2 "nested.json: pre_tokenizer.pattern: the regex '(a+)+\$' hit PCRE2's match limit" \
  "$st" tokenize --in long.txt --out t.bin --tokenizer nested.json

echo '{"model": {"type": "BPE", "vocab": {"x": 0}, "merges": []}}' > x.json
expect2 "'text.txt' (10 bytes) encodes to no tokens with the tokenizer 'x.json': no token of its" \
  "$st" tokenize --in text.txt --out t.bin --tokenizer x.json
[ -e t.bin ] && fail "tokenize left t.bin behind"

# A model with a checkpoint and a one-file export of it.
"$st" train model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=32 \
  training.seq_len=32 training.max_steps=1 checkpoint.dir=ckpt > train.log 2>&1 \
  || fail "training failed: $(cat train.log)"
ckpt=ckpt/step-00000001
# 66 raw uint32 ids: two windows of 33 (64 tokens evaluated), where auto would read 132 uint16.
for i in $(seq 66); do printf '\x41\x00\x00\x00'; done > ids.u32
out=$("$st" eval --json --checkpoint "$ckpt" --tokens ids.u32 training.seq_len=32 \
  data.token_format=u32 2>&1) || fail "eval --tokens with data.token_format = u32: $out"
printf '%s' "$out" | grep -q '"tokens":64' || fail "data.token_format = u32 was not honoured: $out"
expect2 "eval: data.path does not apply with --tokens 'ids.u32'" \
  "$st" eval --checkpoint "$ckpt" --tokens ids.u32 training.seq_len=32 data.path=text.txt

"$st" export --checkpoint "$ckpt" --out hf > export.log 2>&1 || fail "export: $(cat export.log)"
mkfifo hf/tokenizer.json
expect2 "tokenizer file 'hf/tokenizer.json' is a FIFO, not a regular file" \
  "$st" sample --weights hf --prompt ab --tokens 2
echo "every fault named"
