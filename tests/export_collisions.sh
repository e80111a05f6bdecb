#!/usr/bin/env bash
# export_collisions.sh SHARDRUN SHARDTRAIN: exports never destroy what is not theirs, and two at
# once never mix. --overwrite replaces an earlier export only: not a file that is no safetensors
# file (export --out NAME overwrote a text file NAME and wrote config.json beside it), not a
# config.json that is no model's or goes with other weights (it was silently replaced); each
# refusal exit 2 naming the path, leaving everything as it was. Two exports of one new folder
# or file at once (they shared .DIR.partial: one failed with ENOENT, the other merged both)
# give one export whole and one refusal, with no temporary left behind. At 2 ranks, rank 0's
# refusal is the job's, at once.
set -u
. "$(dirname "$0")/support/expect.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-export-collisions-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$st" train model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16 \
  training.seq_len=16 training.max_steps=1 checkpoint.dir=ck > train.log 2>&1 ||
  fail "training: $(cat train.log)"
ck=$dir/ck/step-00000001
mkdir one && cd one || exit 1
printf 'notes\n' > NAME
expect2 "^shardtrain: error: export --out: 'NAME' is not a safetensors file .*not replaced, even with --overwrite" \
  "$st" export --checkpoint "$ck" --out NAME --overwrite
[ "$(cat NAME)" = notes ] && [ "$(ls -A)" = NAME ] || fail "the refused export changed: $(ls -lA)"
printf '{"mine": 1}\n' > config.json
expect2 "config.json' exists, and no weights are at 'w.safetensors': it goes with other weights, not replaced, even with --overwrite" \
  "$st" export --checkpoint "$ck" --out w.safetensors --overwrite
rm config.json
"$st" export --checkpoint "$ck" --out w.safetensors > export.log 2>&1 || fail "$(cat export.log)"
printf '{"mine": 1}\n' > config.json
cp w.safetensors before.safetensors
expect2 "config.json' is not a model's config.json \(no model_type\): not replaced, even with --overwrite" \
  "$st" export --checkpoint "$ck" --out w.safetensors --overwrite --dtype fp32
cmp -s w.safetensors before.safetensors && [ "$(cat config.json)" = '{"mine": 1}' ] ||
  fail "the refused export changed the files"
rm config.json before.safetensors export.log
"$st" export --checkpoint "$ck" --out w.safetensors > /dev/null 2>&1 --overwrite ||
  fail "an earlier export without its config.json was not replaced"
"$st" export --checkpoint "$ck" --out w.safetensors --overwrite --dtype fp32 > /dev/null 2>&1 ||
  fail "an earlier export was not replaced"
# At 2 ranks, rank 0 alone refuses what is there (the config.json beside new weights, a full
# folder) while rank 1 reads the model: exit 2 with rank 0's message, at once (the two agreed
# in different collectives and rank 1 waited out its start-up deadline, exit 1).
mkdir two && printf '{"mine": 1}\n' > two/config.json
expect2 "^shardtrain: error on rank 0 of 2: export's config.json: '.*two/config.json' exists: not replaced" \
  "$shardrun" -n 2 "$st" export --checkpoint "$ck" --out two/w.safetensors
[ "$(ls -A two)" = config.json ] || fail "the refused export changed two/: $(ls -A two)"
mkdir full && touch full/notes
expect2 "^shardtrain: error on rank 0 of 2: export --out: 'full' is a folder with files in it: not replaced" \
  "$shardrun" -n 2 "$st" export --checkpoint "$ck" --out full
[ "$(ls -A full)" = notes ] || fail "the refused export changed the folder: $(ls -A full)"
cd "$dir" || exit 1

# at_once NAME RUNNER...: two exports of NAME at once; one whole, one refused; no temporaries.
at_once() {
  local out=$1
  shift
  rm -rf "$out" config.json a.log b.log
  "$@" "$st" export --checkpoint "$ck" --out "$out" > a.log 2>&1 & local a=$!
  "$@" "$st" export --checkpoint "$ck" --out "$out" > b.log 2>&1 & local b=$!
  wait $a; local ra=$?
  wait $b; local rb=$?
  [ "$((ra + rb))" = 2 ] && [ "$((ra * rb))" = 0 ] ||
    fail "$out at once: exits $ra and $rb (want 0 and 2): $(cat a.log b.log)"
  grep -hqE "appeared while|is a folder with files in it|' exists: not replaced" a.log b.log ||
    fail "$out at once: the refusal does not say why: $(cat a.log b.log)"
  [ -z "$(ls -A | grep -E 'partial|replaced|shardtrain-tmp')" ] || fail "left behind: $(ls -A)"
}
mkdir folder file
for i in 1 2 3; do
  cd "$dir/folder" && at_once hf
  [ "$(ls -A | tr '\n' ' ')" = "a.log b.log hf " ] || fail "beside hf: $(ls -A)"
  [ "$(ls -A hf | tr '\n' ' ')" = "config.json model.safetensors " ] || fail "hf holds: $(ls -A hf)"
  "$st" eval --weights hf > ../eval.log 2>&1 || fail "the folder is not whole: $(cat ../eval.log)"
  cd "$dir/file" && at_once w.safetensors
  [ "$(ls -A | tr '\n' ' ')" = "a.log b.log config.json w.safetensors " ] ||
    fail "beside w.safetensors: $(ls -A)"
  "$st" eval --weights w.safetensors > ../eval.log 2>&1 ||
    fail "the file is not whole: $(cat ../eval.log)"
done
cd "$dir/folder" && at_once hf "$shardrun" -n 2
"$st" eval --weights hf > ../eval.log 2>&1 || fail "the 2-rank folder is not whole: $(cat ../eval.log)"
echo "ok"
