#!/usr/bin/env bash
# llama_export.sh SHARDRUN SHARDTRAIN: a Llama trained at 2 ranks with a checkpoint is exported
# at 3 ranks in Hugging Face's LlamaForCausalLM layout (names, config.json), evaluated from the
# export (1 and 2 ranks) and from the checkpoint with the same loss, sampled, fine-tuned from
# (training.init_from, which takes the model from config.json), and refused where a GPT-2 is given.
set -u
. "$(dirname "$0")/support/eval_losses.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-llama-export-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=(--config llama-tiny model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2
       model.ffn_hidden=160 model.block_size=32 training.seq_len=32 model.tie_embeddings=false)
fail() { printf '%s\n' "$*"; exit 1; }

"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=4 "checkpoint.dir=$dir/ckpt" \
  > "$dir/train.log" 2>&1 || fail "training failed: $(cat "$dir/train.log")"
ckpt="$dir/ckpt/step-00000004"
grep -q '"family": *"llama"' "$ckpt/manifest.json" || fail "the manifest does not record the family"
"$shardrun" -n 3 "$st" export --checkpoint "$ckpt" --out "$dir/hf/model.safetensors" --dtype fp32 \
  > "$dir/export.log" 2>&1 || fail "export failed: $(cat "$dir/export.log")"
cfg="$dir/hf/config.json"
for key in '"architectures": \[' '"LlamaForCausalLM"' '"num_key_value_heads": 2' \
           '"intermediate_size": 160' '"tie_word_embeddings": false' '"rms_norm_eps": 1e-05'; do
  grep -q "$key" "$cfg" || fail "config.json lacks $key: $(cat "$cfg")"
done
header=$(head -c 100000 "$dir/hf/model.safetensors")
for name in model.embed_tokens.weight model.layers.1.self_attn.k_proj.weight \
            model.layers.0.mlp.gate_proj.weight model.layers.1.post_attention_layernorm.weight \
            model.norm.weight lm_head.weight; do
  printf '%s' "$header" | grep -q "\"$name\"" || fail "the export lacks $name"
done
printf '%s' "$header" | grep -q '"model.layers.0.self_attn.k_proj.weight":{"dtype":"F32","shape":\[32,64\]' \
  || fail "k_proj is not [kv heads x head size, n_embd] = [32, 64]: $(printf '%s' "$header" | head -c 600)"

a=$("$st" eval --json --weights "$dir/hf/model.safetensors" training.seq_len=32) || fail "eval: $a"
b=$("$shardrun" -n 2 "$st" eval --json --weights "$dir/hf/model.safetensors" training.seq_len=32) \
  || fail "eval at 2 ranks: $b"
c=$("$st" eval --json --checkpoint "$ckpt" training.seq_len=32 precision.param_dtype=fp32) \
  || fail "eval of the checkpoint: $c"
losses_agree 0 "$(json_loss <<< "$a")" "$(json_loss <<< "$b")" "$(json_loss <<< "$c")" ||
  fail "losses disagree: weights $a, 2 ranks $b, checkpoint $c"

s1=$("$st" sample --weights "$dir/hf/model.safetensors" --prompt "The " --tokens 12 --seed 3) \
  || fail "sample: $s1"
s2=$("$shardrun" -n 2 "$st" sample --weights "$dir/hf/model.safetensors" --prompt "The " --tokens 12 --seed 3) \
  || fail "sample at 2 ranks: $s2"
[ "$s1" = "$s2" ] || fail "samples differ: '$s1' vs '$s2'"

"$st" train "${model[@]}" training.max_steps=1 "training.init_from=$dir/hf/model.safetensors" \
  > "$dir/init.log" 2>&1 || fail "fine-tuning from the export failed: $(cat "$dir/init.log")"
# The run's model is the one config.json describes; a family given that differs is refused.
out=$("$st" train model.family=gpt2 model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 \
  training.seq_len=32 training.max_steps=1 "training.init_from=$dir/hf/model.safetensors" 2>&1)
[ $? = 2 ] && printf '%s' "$out" | grep -q "says family = \"llama\", but this run has model.family = \"gpt2\"" \
  || fail "a Llama export was not refused for a GPT-2 run: $out"
out=$("$st" train training.seq_len=32 training.max_steps=1 "training.init_from=$dir/hf/model.safetensors" 2>&1) \
  || fail "init_from without the model's keys: $out"
printf '%s' "$out" | grep -q '^model: Llama L=2 C=64' || fail "the model was not config.json's: $out"
echo "llama exported, evaluated, sampled and fine-tuned from"
