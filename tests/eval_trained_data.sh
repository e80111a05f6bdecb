#!/usr/bin/env bash
# eval_trained_data.sh SHARDTRAIN: `eval --checkpoint` scores the data the checkpoint's run
# trained on (recorded in its meta with absolute paths), says so, and says "bits per token" for
# token files; data.* overrides choose other data (with the model's vocabulary, not the config
# default's 256). It once scored the built-in byte corpus, labelled "bits per byte".
set -u
st=$1
dir=$(mktemp -d /tmp/shardtrain-evaldata-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
# uint16 token files (no magic: read as raw uint16) with ids up to 499 of a 512 vocabulary.
python3 -c "
import struct
for name, offset in (('train.bin', 0), ('val.bin', 3)):
    ids = [(i * 7 + i // 13 + offset) % 500 for i in range(4000)]
    open(name, 'wb').write(struct.pack('<%dH' % len(ids), *ids))
" || fail "cannot write the token files"
model=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16 training.seq_len=16
       model.vocab_size=512)
"$st" train "${model[@]}" data.tokens=train.bin data.val_tokens=val.bin training.max_steps=2 \
  checkpoint.dir=ck > train.log 2>&1 || { cat train.log; fail "training failed"; }
mkdir elsewhere && cd elsewhere || exit 1
a=$("$st" eval --checkpoint ../ck/step-00000002 2>&1) || fail "eval: $a"
printf '%s\n' "$a" | grep -qE "^eval: loss [0-9.]+ \| [0-9.]+ bits per token \| [0-9]+ tokens in [0-9]+ windows of 16 \| $dir/val.bin, the data the checkpoint trained on$" ||
  fail "want the loss on $dir/val.bin in bits per token, named: $a"
b=$("$st" eval --checkpoint ../ck/step-00000002 data.tokens=../train.bin data.val_tokens=../val.bin 2>&1) ||
  fail "eval with data.* overrides: $b"
printf '%s\n' "$b" | grep -q "the data the checkpoint trained on" && fail "overrides named as the recorded data: $b"
loss() { printf '%s' "$1" | sed -n 's/^eval: loss \([0-9.]*\) .*/\1/p'; }
[ -n "$(loss "$a")" ] && [ "$(loss "$a")" = "$(loss "$b")" ] ||
  fail "the recorded data and the same files named by hand disagree: $a / $b"
j=$("$st" eval --json --checkpoint ../ck/step-00000002 2>&1) || fail "eval --json: $j"
printf '%s' "$j" | grep -q "\"bits_per_token\":.*\"data\":\"$dir/val.bin, the data the checkpoint trained on\"" ||
  fail "want bits_per_token and data in the JSON: $j"
echo "eval scores the data the checkpoint trained on: $a"
