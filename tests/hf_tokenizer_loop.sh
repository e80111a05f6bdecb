#!/usr/bin/env bash
# hf_tokenizer_loop.sh SHARDRUN SHARDTRAIN FIXTURES: Hugging Face tokenizers through the
# program. `tokenize --tokenizer` writes Hugging Face's ids (fixtures/expected.json) for a text
# with special tokens in it,
# uint32 llm.c files for Qwen3's vocabulary and uint16 for GPT-2's, with each --sections section
# after the tokenizer's separator; a Qwen3 model trains on text through data.tokenizer at 2
# ranks, exports a sharded folder that carries the tokenizer, and that folder evaluates a text
# file with its own tokenizer to the checkpoint's loss (1 and 2 ranks), trains again through
# training.init_from (the folder's tokenizer adopted) and samples from a text prompt. Bad
# tokenizer files and bad input are exit 2 naming what is wrong.
set -u
. "$(dirname "$0")/support/expect.sh"
. "$(dirname "$0")/support/eval_losses.sh"
shardrun=$1 st=$2 fixtures=$3
dir=$(mktemp -d /tmp/shardtrain-hf-tokenizer-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
# ids FILE: the ids of an llm.c token file, comma-separated, and its magic first.
ids() {
  python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(); h=struct.unpack('<256i',b[:1024]);
w=2 if h[0]==20240520 else 4; n=h[2]; print(h[0], ','.join(map(str, struct.unpack('<%d%s' % (n, 'H' if w==2 else 'I'), b[1024:1024+n*w]))))" "$1"
}
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); open('first.txt','w').write(t[7]); open('text.txt','w').write('\n\n'.join(t*6))" \
  "$fixtures/texts.json" || fail "texts.json"

for name in qwen3 gpt2 llama3 llama2; do
  "$st" tokenize --tokenizer "$fixtures/fixtures/$name" --in first.txt --out $name.bin > tok.log 2>&1 ||
    fail "tokenize $name: $(cat tok.log)"
  want=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))[sys.argv[2]]['ids'][7])))" \
    "$fixtures/fixtures/expected.json" $name)
  got=$(ids $name.bin)
  [ "${got#* }" = "$want" ] || fail "$name: ids ${got#* } are not Hugging Face's $want"
done
[ "$(ids qwen3.bin | cut -d' ' -f1)" = 20240801 ] || fail "Qwen3's ids need llm.c's uint32 file"
[ "$(ids gpt2.bin | cut -d' ' -f1)" = 20240520 ] || fail "GPT-2's ids fit llm.c's uint16 file"
# --sections: each section after the separator the files name (<|endoftext|> for Qwen3 from
# its added tokens, <s> for Llama 2 from its post-processor's template).
"$st" tokenize --tokenizer "$fixtures/fixtures/qwen3/tokenizer.json" --in text.txt --sections \
  --out sections.bin > /dev/null || fail "tokenize --sections"
sections=$(python3 -c "print(open('text.txt').read().count('\n\n') + 1)")
got=$(ids sections.bin | cut -d' ' -f2 | tr ',' '\n' | grep -cx 151643)
[ "$got" -ge "$sections" ] && [ "$(ids sections.bin | cut -d' ' -f2 | cut -d, -f1)" = 151643 ] ||
  fail "--sections: want $sections+ separators 151643 first, got $got"
"$st" tokenize --tokenizer "$fixtures/fixtures/llama2" --in first.txt --sections --out s2.bin > /dev/null &&
  [ "$(ids s2.bin | cut -d' ' -f2 | cut -d, -f1)" = 1 ] || fail "Llama 2's sections begin with <s> (1)"

model=(--config qwen3-0.6b model.n_layer=2 model.n_embd=32 model.n_head=4 model.n_kv_head=2
       model.head_dim=8 model.ffn_hidden=64 model.block_size=32 training.seq_len=32
       training.global_batch=4)
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 data.path=text.txt \
  data.tokenizer="$fixtures/fixtures/qwen3" checkpoint.dir=ck > train.log 2>&1 ||
  fail "training on tokenized text: $(cat train.log)"
grep -q "^data: text.txt (tokenized by .*qwen3/tokenizer.json)" train.log || fail "data line: $(grep ^data train.log)"
"$shardrun" -n 2 "$st" export --checkpoint ck/step-00000002 --out hf --max-shard-size 8MB \
  --dtype fp32 > export.log 2>&1 || fail "export: $(cat export.log)"
grep -q "^exported hf: 2 shards (fp32), model.safetensors.index.json, config.json, tokenizer.json, tokenizer_config.json$" export.log ||
  fail "the export's line: $(cat export.log)"
cmp -s hf/tokenizer.json "$fixtures/fixtures/qwen3/tokenizer.json" || fail "the folder's tokenizer.json is not the run's"
a=$("$st" eval --json --weights hf --data text.txt | json_loss)
b=$("$shardrun" -n 2 "$st" eval --json --weights hf --data text.txt | json_loss)
c=$("$st" eval --json --checkpoint ck/step-00000002 --data text.txt precision.param_dtype=fp32 | json_loss)
echo "eval: folder $a, at 2 ranks $b, checkpoint $c"
losses_agree 5 "$a" "$b" "$c" || fail "losses differ: $a $b $c"
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=1 training.init_from=hf \
  data.path=text.txt > init.log 2>&1 || fail "init_from: $(cat init.log)"
grep -q "^data: text.txt (tokenized by hf/tokenizer.json)" init.log || fail "init_from did not adopt the folder's tokenizer: $(grep ^data init.log)"
out=$("$st" sample --weights hf --prompt "Hello world, I'm" --tokens 4 --temperature 0 2>&1) ||
  fail "sample: $out"
[ "${out#Hello world, I\'m}" != "$out" ] || fail "sample does not begin with its prompt: $out"

mkdir bad
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); j['pre_tokenizer']['pretokenizers'][0]={'type':'WhitespaceSplit'}; json.dump(j, open('bad/tokenizer.json','w'))" \
  "$fixtures/fixtures/qwen3/tokenizer.json"
expect2 "bad/tokenizer.json: pre_tokenizer.pretokenizers\[0\] type 'WhitespaceSplit' is not supported" \
  "$st" tokenize --tokenizer bad --in first.txt --out x.bin
expect2 "give --tokenizer PATH or --encoding" \
  "$st" tokenize --tokenizer hf --encoding gpt2 --in first.txt --out x.bin
expect2 "tokenizer 'nowhere' does not exist" "$st" tokenize --tokenizer nowhere --in first.txt --out x.bin
printf 'ok \xff\n' > latin1.txt
expect2 "'latin1.txt' is not UTF-8 at byte 3" "$st" tokenize --tokenizer hf --in latin1.txt --out x.bin
expect2 "data.tokenizer 'hf/tokenizer.json' has ids up to 151668, beyond model.vocab_size = 256" \
  "$st" train data.path=text.txt data.tokenizer=hf training.max_steps=1
[ ! -e x.bin ] || fail "a refused tokenize left its output"
echo "ok"
