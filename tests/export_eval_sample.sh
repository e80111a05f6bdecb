#!/usr/bin/env bash
# export_eval_sample.sh SHARDRUN SHARDTRAIN: train at 2 ranks with a checkpoint, export it at 3
# ranks, then eval (checkpoint, FP32 weights, uint16 tokens) and sample (deterministic per seed).
set -u
. "$(dirname "$0")/support/eval_losses.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-export-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 training.seq_len=32)
fail() { printf '%s\n' "$*"; exit 1; }

"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=4 "checkpoint.dir=$dir/ckpt" \
  > "$dir/train.log" 2>&1 || fail "training failed: $(cat "$dir/train.log")"
ckpt="$dir/ckpt/step-00000004"
"$shardrun" -n 3 "$st" export --checkpoint "$ckpt" --out "$dir/hf/model.safetensors" --dtype fp32 \
  > "$dir/export.log" 2>&1 || fail "export failed: $(cat "$dir/export.log")"
[ -f "$dir/hf/config.json" ] && grep -q '"model_type": "gpt2"' "$dir/hf/config.json" \
  || fail "no GPT-2 config.json beside the export"

# FP32 weights evaluated in FP32 at 1 and 2 ranks: the same loss to rounding.
a=$("$st" eval --json --weights "$dir/hf/model.safetensors" "${model[@]}") || fail "eval: $a"
b=$("$shardrun" -n 2 "$st" eval --json --weights "$dir/hf/model.safetensors" "${model[@]}") \
  || fail "eval at 2 ranks: $b"
c=$("$st" eval --json --checkpoint "$ckpt" "${model[@]}" precision.param_dtype=fp32) \
  || fail "eval of the checkpoint: $c"
losses_agree 0 "$(json_loss <<< "$a")" "$(json_loss <<< "$b")" "$(json_loss <<< "$c")" ||
  fail "losses disagree: weights $a, 2 ranks $b, checkpoint $c"

# --tokens: two windows of 33 uint16 tokens (66 tokens, 132 bytes): 64 tokens evaluated.
for i in $(seq 66); do printf '\x41\x00'; done > "$dir/tokens.bin"
t=$("$st" eval --json --weights "$dir/hf/model.safetensors" --tokens "$dir/tokens.bin" "${model[@]}") \
  || fail "eval --tokens: $t"
printf '%s' "$t" | grep -q '"tokens":64' || fail "eval --tokens did not evaluate 64 tokens: $t"
printf '\x00\x01' > "$dir/bad.bin"
bad=$("$st" eval --weights "$dir/hf/model.safetensors" --tokens "$dir/bad.bin" "${model[@]}" 2>&1)
[ $? = 2 ] && printf '%s' "$bad" | grep -q -- "--tokens: token file .*bad.bin.: token 0 (byte offset 0) is id 256, not below" \
  || fail "an out-of-vocabulary token was not refused by name: $bad"

# Files from outside are checked before they are trusted: a missing weights file is named, the
# checkpoints' directory is not taken for a checkpoint, and a NaN in the weights names the tensor.
expect2() {  # expect2 PATTERN COMMAND...: exit code 2 and PATTERN in the output
  local pattern=$1 out rc; shift
  out=$("$@" 2>&1); rc=$?
  [ $rc = 2 ] && printf '%s' "$out" | grep -q -- "$pattern" || fail "expected exit 2 and /$pattern/ from '$*', got $rc: $out"
}
expect2 "--weights: 'nope.safetensors' is not a file" "$st" eval --weights nope.safetensors
expect2 "holds checkpoints rather than being one; the newest complete one is '$ckpt'" \
  "$st" eval --checkpoint "$dir/ckpt"
cp "$dir/hf/model.safetensors" "$dir/hf/nan.safetensors"
header=$(od -An -tu8 -N8 "$dir/hf/nan.safetensors" | tr -d ' ')
printf '\x00\x00\xc0\x7f' | dd of="$dir/hf/nan.safetensors" bs=1 seek=$((8 + header)) conv=notrunc 2> /dev/null
expect2 "nan.safetensors': tensor 'transformer.wte.weight' holds a non-finite value (nan) at element 0" \
  "$st" eval --weights "$dir/hf/nan.safetensors" "${model[@]}"
# The config.json beside weights must describe the model they initialize; a hand-edited
# manifest is refused by its checksum.
expect2 "config.json' (beside '$dir/hf/model.safetensors') says n_layer = 2, but this run has model.n_layer = 1" \
  "$st" train "${model[@]}" model.n_layer=1 training.max_steps=1 "training.init_from=$dir/hf/model.safetensors"
cp -r "$ckpt" "$dir/edited"
sed -i 's/"step": 4/"step": 3/' "$dir/edited/manifest.json"
expect2 "manifest.json': the manifest does not match its own checksum" \
  "$st" eval --checkpoint "$dir/edited" "${model[@]}"

# Sampling is a function of the seed, whatever the world size.
s1=$("$st" sample --checkpoint "$ckpt" --prompt "The " --tokens 40 --seed 5) || fail "sample: $s1"
s2=$("$shardrun" -n 2 "$st" sample --checkpoint "$ckpt" --prompt "The " --tokens 40 --seed 5) \
  || fail "sample at 2 ranks: $s2"
[ "$s1" = "$s2" ] || fail "samples differ: '$s1' vs '$s2'"
echo "export, eval and sample agree"
