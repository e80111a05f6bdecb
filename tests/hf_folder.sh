#!/usr/bin/env bash
# hf_folder.sh SHARDRUN SHARDTRAIN: Hugging Face model folders in and out. A Llama checkpoint
# exported at 2 ranks as a folder of several shards (--max-shard-size small) with its index and
# as one file: eval --weights of the folder (1 and 2 ranks) and of the file give the same FP32
# loss; training.init_from the folder trains; the folder appears whole (no .partial left) and an
# existing folder with files is never written into; Qwen3 and Qwen2 checkpoints export to folders
# that evaluate to their loss. A damaged index is refused by name (exit 2):
# a tensor missing from weight_map, a file it names missing, a name leaving the folder, a tensor
# in another file than the index says, a total_size that is not the tensors' bytes.
set -u
. "$(dirname "$0")/support/expect.sh"
. "$(dirname "$0")/support/eval_losses.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-hf-folder-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
model=(--config llama-tiny model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2
       model.block_size=32 training.seq_len=32)
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 checkpoint.dir=ck > train.log 2>&1 ||
  fail "training: $(cat train.log)"
"$shardrun" -n 2 "$st" export --checkpoint ck/step-00000002 --out hf --max-shard-size 64KiB \
  --dtype fp32 > export.log 2>&1 || fail "folder export: $(cat export.log)"
grep -q '^exported hf: [0-9]* shards (fp32), model.safetensors.index.json, config.json$' export.log ||
  fail "the export's line: $(cat export.log)"
shards=$(ls hf/model-*-of-*.safetensors | wc -l)
[ "$shards" -ge 2 ] || fail "want 2+ shards, got: $(ls hf)"
[ -f hf/config.json ] && [ -f hf/model.safetensors.index.json ] || fail "folder: $(ls hf)"
[ -z "$(ls -A . | grep partial)" ] || fail "a temporary was left: $(ls -A .)"
for f in hf/model-*.safetensors; do
  [ "$(stat -c %s "$f")" -le $((64 * 1024 + 4096)) ] || [ "$(python3 -c "import json,struct;f=open('$f','rb');n=struct.unpack('<Q',f.read(8))[0];print(len(json.loads(f.read(n)))-1)")" = 1 ] ||
    fail "$f is larger than the shard size and holds several tensors"
done
python3 - <<'PY' || fail "the index does not match the files"
import json, os, struct
index = json.load(open("hf/model.safetensors.index.json"))
total = 0
for name in sorted(set(index["weight_map"].values())):
    f = open(os.path.join("hf", name), "rb")
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    held = {t for t in header if t != "__metadata__"}
    assert held == {t for t, n in index["weight_map"].items() if n == name}, name
    total += sum(h["data_offsets"][1] - h["data_offsets"][0] for t, h in header.items() if t != "__metadata__")
assert index["metadata"]["total_size"] == total, (index["metadata"], total)
PY
"$shardrun" -n 2 "$st" export --checkpoint ck/step-00000002 --out one.safetensors --dtype fp32 \
  > export1.log 2>&1 || fail "file export: $(cat export1.log)"
a=$("$st" eval --json --weights hf | json_loss)
b=$("$shardrun" -n 2 "$st" eval --json --weights hf | json_loss)
c=$("$st" eval --json --weights one.safetensors | json_loss)
echo "eval: folder $a, folder at 2 ranks $b, one file $c"
losses_agree 0 "$a" "$b" "$c" || fail "losses differ: $a $b $c"
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 training.init_from=hf \
  > init.log 2>&1 || fail "init_from the folder: $(cat init.log)"
grep -qE '^step +2/2' init.log || fail "init_from trained no steps: $(cat init.log)"

# Qwen3 (per-head q/k norms, heads of their own width) and Qwen2 (q/k/v biases) through the same
# loop: the folder's config.json names the family, and the folder evaluates to the checkpoint's
# loss.
for family in qwen3 qwen2; do
  "$shardrun" -n 2 "$st" train "${model[@]}" model.family=$family model.head_dim=8 \
    training.max_steps=2 checkpoint.dir=ck_$family > train_$family.log 2>&1 ||
    fail "$family training: $(cat train_$family.log)"
  "$shardrun" -n 2 "$st" export --checkpoint ck_$family/step-00000002 --out $family --dtype fp32 \
    > export_$family.log 2>&1 || fail "$family export: $(cat export_$family.log)"
  grep -q "\"model_type\": \"$family\"" $family/config.json && grep -q '"head_dim": 8' $family/config.json ||
    fail "$family config.json: $(cat $family/config.json)"
  d=$("$st" eval --json --weights $family | json_loss)
  e=$("$st" eval --json --checkpoint ck_$family/step-00000002 precision.param_dtype=fp32 | json_loss)
  echo "$family: folder $d, checkpoint $e"
  losses_agree 0 "$d" "$e" || fail "$family: the folder's loss $d is not the checkpoint's $e"
done

expect2 "export --out: 'hf' is a folder with files in it: not replaced" \
  "$st" export --checkpoint ck/step-00000002 --out hf
expect2 "--max-shard-size = '5XB' must be a size" \
  "$st" export --checkpoint ck/step-00000002 --out new --max-shard-size 5XB
[ ! -e new ] && [ -z "$(ls -A . | grep partial)" ] || fail "a refused export left files"
# Damaged copies of the index, one fault each.
damage() {  # damage NAME PYTHON: a copy of hf as NAME with PYTHON applied to index (a dict)
  cp -r hf "$1"
  python3 -c "import json; p='$1/model.safetensors.index.json'; index=json.load(open(p)); $2; json.dump(index, open(p, 'w'))"
}
first=$(python3 -c "import json; print(next(iter(json.load(open('hf/model.safetensors.index.json'))['weight_map'])))")
damage missing "del index['weight_map']['$first']"
expect2 "does not name tensor '$first' \(the model needs every parameter\)" "$st" eval --weights missing
damage gone "index['weight_map']['$first'] = 'model-00099-of-00099.safetensors'"
expect2 "names 'model-00099-of-00099.safetensors', which is not a file in 'gone'" "$st" eval --weights gone
damage escape "index['weight_map']['$first'] = '../one.safetensors'"
expect2 "weight_map\['$first'\] = '../one.safetensors' must name a file in the same folder" "$st" eval --weights escape
second=$(printf 'model-00002-of-%05d.safetensors' "$shards")
damage moved "index['weight_map']['$first'] = '$second'"
expect2 "which the index assigns to another file|has no tensor '$first'" "$st" eval --weights moved
damage total "index['metadata']['total_size'] += 2"
expect2 "metadata.total_size = [0-9]+ but its tensors take [0-9]+ bytes" "$st" eval --weights total
damage extra "index['weight_map']['lm_head.bias'] = '$second'"
expect2 "names tensor 'lm_head.bias', which this model does not have" "$st" eval --weights extra
# A config.json claiming 65,536 layers: refused from the index and headers (exit 2, naming the
# first tensor missing), before any tensor is allocated.
cp -r hf deep
python3 -c "import json; p='deep/config.json'; c=json.load(open(p)); c['num_hidden_layers']=65536; json.dump(c, open(p, 'w'))"
# Under AddressSanitizer, the suite's fast_unwind_on_malloc=0 (for Open MPI's leak stacks) makes
# the 600,000 specs of this model cost 32 s instead of 1; this command is one process without
# mpirun, so its leak stacks need no slow unwinding.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=1 \
  expect2 "does not fit the model 'deep/config.json' in it describes \(Llama L=65536 .*(has no|does not name) tensor 'model.layers.2" \
  "$st" eval --weights deep
# A FIFO where a folder's config.json or a checkpoint's manifest.json belongs: refused at once
# (it blocked with no writer).
mkdir fifo_folder && cp hf/model* fifo_folder/ && mkfifo fifo_folder/config.json
expect2 "'fifo_folder/config.json' is a FIFO; it must be a regular file" timeout 20 "$st" eval --weights fifo_folder
cp -r ck/step-00000002 fifo_ck && rm fifo_ck/manifest.json && mkfifo fifo_ck/manifest.json
expect2 "'fifo_ck/manifest.json' is a FIFO; it must be a regular file" timeout 20 "$st" eval --checkpoint fifo_ck
mkdir empty_folder && cp hf/config.json empty_folder/
expect2 "'empty_folder' holds neither model.safetensors nor model.safetensors.index.json" \
  "$st" eval --weights empty_folder
echo "ok"
