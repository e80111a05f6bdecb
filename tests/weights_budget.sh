#!/usr/bin/env bash
# weights_budget.sh SHARDTRAIN: eval and sample --weights check the model's memory budget before
# allocating, as train does. A Hugging Face folder whose config.json and safetensors header agree
# on a 30 GiB FP32 Llama (the data a sparse file) is refused at once: exit 2, the budget's parts
# and the folder named. (It grew to 14 GB and ran until killed.) The commands run under ulimit -v
# and a timeout, so a regression fails the test instead of taking the machine's memory; hence
# not in the sanitized build (AddressSanitizer cannot start under ulimit -v).
set -u
. "$(dirname "$0")/support/expect.sh"
st=$1
dir=$(mktemp -d /tmp/shardtrain-weights-budget-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
python3 - big <<'PY' || fail "cannot make the sparse folder"
import json, os, struct, sys
out = sys.argv[1]
L, C, H, KV, F, V, ctx = 32, 4096, 32, 8, 14336, 128256, 64
os.makedirs(out)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V,
           "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
           "num_attention_heads": H, "num_key_value_heads": KV, "max_position_embeddings": ctx,
           "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float32"},
          open(os.path.join(out, "config.json"), "w"))
kv = KV * (C // H)
shapes = [("model.embed_tokens.weight", [V, C])]
for l in range(L):
    p = f"model.layers.{l}."
    shapes += [(p + "input_layernorm.weight", [C]), (p + "self_attn.q_proj.weight", [C, C]),
               (p + "self_attn.k_proj.weight", [kv, C]), (p + "self_attn.v_proj.weight", [kv, C]),
               (p + "self_attn.o_proj.weight", [C, C]), (p + "post_attention_layernorm.weight", [C]),
               (p + "mlp.gate_proj.weight", [F, C]), (p + "mlp.up_proj.weight", [F, C]),
               (p + "mlp.down_proj.weight", [C, F])]
shapes += [("model.norm.weight", [C]), ("lm_head.weight", [V, C])]
header, offset = {"__metadata__": {"format": "pt"}}, 0
for name, shape in shapes:
    n = 4
    for d in shape:
        n *= d
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
    offset += n
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    f.truncate(8 + len(text) + offset)  # sparse: the tensors' bytes take no disk
PY
budget="^shardtrain: error: the memory budget is [0-9.]+ GiB per rank \(shards [0-9.]+ \+ unsharded [0-9.]+ \+ activations [0-9.]+\) x 1 rank on this node = [0-9.]+ GiB, more than the [0-9.]+ GiB available .*The model of --weights 'big' \(Llama L=32 C=4096 .*\) .*run on more ranks"
limited() { (ulimit -v 4000000 && exec timeout 60 "$@"); }
expect2 "$budget" limited "$st" eval --weights big training.seq_len=64
expect2 "$budget" limited "$st" sample --weights big --prompt "The " --tokens 2
echo "ok"
