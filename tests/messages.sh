#!/usr/bin/env bash
# messages.sh SHARDTRAIN: bad inputs whose messages once misled, each now naming what is wrong:
# a device as data, an empty text to tokenize, a binary vocab.bpe (quoted safely, never raw),
# a token file without llm.c's magic (a format problem, not a bad id), weights that do not fit
# the config.json beside them, a TOML array where a number belongs, CLI11's errors, a negative
# sample seed. Each: exit 2 and the message expected. And `train --help` names every bundled
# config (it once named two of six).
set -u
st=$1
configs=$(cd "$(dirname "$0")/../launch/configs" && pwd)
dir=$(mktemp -d /tmp/shardtrain-messages-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf '%s\n' "$*"; exit 1; }
expect() {  # expect REGEX ARGS...: shardtrain ARGS exits 2 with one line matching REGEX
  local pattern=$1
  shift
  out=$(timeout 60 "$st" "$@" 2>&1 < /dev/null)
  local rc=$?
  [ $rc = 2 ] || fail "expected exit 2, got $rc from $*: $out"
  [ "$(printf '%s\n' "$out" | grep -Ec -- "$pattern")" = 1 ] || fail "no one line /$pattern/ from $*: $out"
  printf '%s' "$out" | LC_ALL=C grep -q '[^[:print:][:space:]]' && fail "raw bytes printed by $*"
  return 0
}
expect "'/dev/zero' is a character device, not a file that can be read whole" \
  train data.path=/dev/zero
: > empty.txt
expect "tokenize: 'empty.txt' holds no text: nothing to tokenize" tokenize --in empty.txt --out e.bin
mkdir vocab
printf '{"a": 0, "b": 1}' > vocab/encoder.json
head -c 300 /dev/urandom | tr -d ' \n' > vocab/vocab.bpe
printf 'ab' > t.txt
expect "vocab.bpe' line 1: a merge is two symbols separated by one space, got '.*(\\\\x[0-9a-f]{2})" \
  tokenize --in t.txt --out t.bin --encoding gpt2 --vocab vocab
printf 'XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX' > bad.bin
expect "token file 'bad.bin': token 0 .* is id 22616, not below model.vocab_size = 256 \(it does not start with llm.c's magic" \
  train data.tokens=bad.bin
"$st" train model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16 \
  training.seq_len=16 training.max_steps=1 checkpoint.dir=ck > /dev/null 2>&1 || fail "training failed"
"$st" export --checkpoint ck/step-00000001 --out w/model.safetensors > /dev/null 2>&1 || fail "export failed"
sed -i 's/"n_layer": 1/"n_layer": 2/' w/config.json
expect "--weights 'w/model.safetensors' does not fit the model 'w/config.json' beside it describes" \
  eval --weights w/model.safetensors
printf '[training]\nseed = [1]\n' > array.toml
expect "training.seed.* got an array" train --config array.toml
expect "^shardtrain: error: .*--bogus.* \(see shardtrain train --help\)" train --bogus
expect "sample: --seed = -1 must not be negative" \
  sample --weights w/model.safetensors --prompt a --seed -1
help=$("$st" train --help) || fail "train --help failed"
for toml in "$configs"/*.toml; do
  name=$(basename "$toml" .toml)
  printf '%s\n' "$help" | grep -qE "[(, ]$name[,;)]" || fail "train --help does not name '$name': $help"
done
echo "each message names what is wrong; train --help names every bundled config"
