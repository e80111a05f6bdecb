#!/usr/bin/env bash
# tokens_equal_text.sh SHARDTRAIN TEXT: 50 steps of tiny on TEXT through data.path and on the
# llm.c token file `tokenize --encoding bytes` makes of it give identical losses (the token path
# reads, splits and samples exactly like the text path), including the validation loss.
set -u
st=$1 text=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$st" tokenize --in "$text" --out "$dir/text.bin" > "$dir/tokenize.log" 2>&1 \
  || { cat "$dir/tokenize.log"; exit 1; }
common=(--json --config tiny training.max_steps=50 training.seq_len=64 model.n_layer=2)
"$st" train "${common[@]}" "data.path=$text" > "$dir/a.jsonl" 2> "$dir/a.err" \
  || { cat "$dir/a.err"; exit 1; }
"$st" train "${common[@]}" "data.tokens=$dir/text.bin" > "$dir/b.jsonl" 2> "$dir/b.err" \
  || { cat "$dir/b.err"; exit 1; }
losses() { sed -n 's/.*"\(val_\)\{0,1\}loss":\([-0-9.e+]*\).*/\1\2/p' "$1"; }
[ "$(losses "$dir/a.jsonl" | wc -l)" -ge 51 ] || { echo "expected 50 losses and a validation loss"; cat "$dir/a.jsonl"; exit 1; }
if ! diff <(losses "$dir/a.jsonl") <(losses "$dir/b.jsonl"); then
  echo "the losses differ between data.path and data.tokens"; exit 1
fi
echo "$(losses "$dir/a.jsonl" | wc -l) losses identical"
