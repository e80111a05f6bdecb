#!/usr/bin/env python3
"""Evaluates a shardtrain export (one safetensors file with config.json beside it, or a Hugging
Face model folder: config.json with model.safetensors, or model.safetensors.index.json and its
shards) with an independent PyTorch implementation of Hugging Face's semantics for its
config.json's model_type: GPT-2 (Conv1D weights [in, out], tied lm_head, gelu_new, eps 1e-5),
Llama (LlamaForCausalLM: nn.Linear weights [out, in], RMSNorm with FP32 statistics,
rotate_half rotary embeddings, grouped-query attention by repeating kv heads, SiLU-gated MLP,
lm_head tied or not), Qwen2 (Llama with biases on q, k and v) or Qwen3 (Llama with an RMSNorm
over each q and k head before the rotation, heads head_dim wide, 128 by default), reading the
files with nothing but json and struct. Prints {"loss": ..., "tokens": ...} over the windows of
seq_len + 1 tokens in --tokens (llm.c's uint16 or uint32 token file, told apart by its magic, or
raw little-endian uint16), to compare with
`shardtrain eval --weights PATH --tokens FILE --json` (precision.param_dtype=fp32, or bf16 with
--bf16: weights and activations in BF16 as transformers runs a torch_dtype=bfloat16 model).

  /usr/bin/python3 bench/reference/check_export.py --weights hf/model.safetensors --tokens t.bin --seq-len 32
  /usr/bin/python3 bench/reference/check_export.py --weights my-model --tokens t.bin --seq-len 32

--make-random DIR writes a random-weight Qwen3 folder the way transformers saves one (config.json
as Qwen3Config writes it, F32 tensors in two shards with their index), from its own seed, to
evaluate with both; --vocab-size V sets its vocabulary (default 300) and --tokenizer PATH copies
a tokenizer.json (and the tokenizer_config.json beside it) into the folder.
Needs PyTorch, which Debian 12 packages as python3-torch for /usr/bin/python3 (apt-get install -y
python3-torch; not a shardtrain dependency): run as `bench/reference/check_export.py`, or with
any python3, it runs itself under /usr/bin/python3 when the python3 it started in has no torch.
"""
import argparse
import json
import math
import os
import shutil
import struct

from find_torch import require_torch

require_torch()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[t["dtype"]]
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dtype).view(t["shape"])
    return out


def read_weights(path):
    """(config, tensors) of a file (config.json beside it) or a model folder."""
    if not os.path.isdir(path):
        return json.load(open(os.path.join(os.path.dirname(os.path.abspath(path)), "config.json"))), read_safetensors(path)
    cfg = json.load(open(os.path.join(path, "config.json")))
    index = os.path.join(path, "model.safetensors.index.json")
    if not os.path.exists(index):
        return cfg, read_safetensors(os.path.join(path, "model.safetensors"))
    tensors = {}
    for name in sorted(set(json.load(open(index))["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(path, name)))
    return cfg, tensors


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_tokens(path):
    """llm.c's token files (magic 20240520: uint16, 20240801: uint32, after a 1 KiB header) or raw
    little-endian uint16."""
    raw = open(path, "rb").read()
    magic = struct.unpack("<i", raw[:4])[0] if len(raw) >= 1024 else 0
    if magic in (20240520, 20240801):
        n = struct.unpack("<i", raw[8:12])[0]
        width = "H" if magic == 20240520 else "I"
        return struct.unpack(f"<{n}{width}", raw[1024 : 1024 + n * struct.calcsize(width)])
    return struct.unpack(f"<{len(raw) // 2}H", raw)


def make_random_qwen3(folder, seed=7, V=300, tokenizer=None):
    """A small random Qwen3 (heads of 16 where hidden / heads is 12, grouped kv heads, untied)
    saved as transformers would: config.json and two shards with their index."""
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 48,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None, "hidden_act": "silu",
           "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
           "max_window_layers": 2, "tie_word_embeddings": False, "vocab_size": V,
           "torch_dtype": "float32"}
    g = torch.Generator().manual_seed(seed)
    C, F_, H, KV, D = 48, 96, 4, 2, 16
    rnd = lambda *shape, s=0.1: torch.randn(*shape, generator=g) * s
    w = {"model.embed_tokens.weight": rnd(V, C, s=0.5)}
    for l in range(2):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rnd(C)
        w[p + "self_attn.q_proj.weight"] = rnd(H * D, C)
        w[p + "self_attn.k_proj.weight"] = rnd(KV * D, C)
        w[p + "self_attn.v_proj.weight"] = rnd(KV * D, C)
        w[p + "self_attn.o_proj.weight"] = rnd(C, H * D)
        w[p + "self_attn.q_norm.weight"] = 1 + rnd(D)
        w[p + "self_attn.k_norm.weight"] = 1 + rnd(D)
        w[p + "post_attention_layernorm.weight"] = 1 + rnd(C)
        w[p + "mlp.gate_proj.weight"] = rnd(F_, C)
        w[p + "mlp.up_proj.weight"] = rnd(F_, C)
        w[p + "mlp.down_proj.weight"] = rnd(C, F_)
    w["model.norm.weight"] = 1 + rnd(C)
    w["lm_head.weight"] = rnd(V, C)
    os.makedirs(folder, exist_ok=True)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"), indent=2)
    names = list(w)
    shards = [names[: len(names) // 2], names[len(names) // 2 :]]
    weight_map = {}
    for k, shard in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(folder, file), {n: w[n] for n in shard})
        weight_map.update({n: file for n in shard})
    total = sum(t.numel() * 4 for t in w.values())
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(folder, "model.safetensors.index.json"), "w"), indent=2)
    if tokenizer:
        source = tokenizer if os.path.isdir(tokenizer) else os.path.dirname(tokenizer) or "."
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if os.path.exists(os.path.join(source, name)):
                shutil.copyfile(os.path.join(source, name), os.path.join(folder, name))


def gpt2_loss(w, cfg, idx, targets):
    L, C, H = cfg["n_layer"], cfg["n_embd"], cfg["n_head"]
    eps = cfg["layer_norm_epsilon"]
    B, T = idx.shape
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    for l in range(L):
        p = f"transformer.h.{l}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # Conv1D: [in, out]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    logits = x @ w["transformer.wte.weight"].t()  # lm_head tied to wte
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def rms_norm(x, weight, eps):
    # LlamaRMSNorm: statistics in FP32, the normalized input cast back, then the weight.
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def llama_loss(w, cfg, idx, targets, dtype):
    """LlamaForCausalLM, and Qwen2 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm) as
    modeling_qwen2.py and modeling_qwen3.py compute them."""
    L, C, H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    qwen3 = cfg.get("model_type") == "qwen3"
    default_hs = 128 if qwen3 else C // H  # Qwen3Config's default head_dim
    hs = cfg.get("head_dim") or default_hs
    eps, theta = cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    B, T = idx.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    x = w["model.embed_tokens.weight"][idx]
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        proj = lambda name: h @ w[p + f"self_attn.{name}_proj.weight"].t() + (
            w[p + f"self_attn.{name}_proj.bias"] if p + f"self_attn.{name}_proj.bias" in w else 0)
        q = proj("q").view(B, T, H, hs)
        k = proj("k").view(B, T, KV, hs)
        v = proj("v").view(B, T, KV, hs).transpose(1, 2)
        if qwen3:  # Qwen3RMSNorm over each head's channels, before the rotation
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        att = F.softmax(att, dim=-1, dtype=torch.float32).to(dtype)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * hs)
        x = x + y @ w[p + "self_attn.o_proj.weight"].t()
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = F.silu(h @ w[p + "mlp.gate_proj.weight"].t()) * (h @ w[p + "mlp.up_proj.weight"].t())
        x = x + g @ w[p + "mlp.down_proj.weight"].t()
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    logits = (x @ head.t()).float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", help="a safetensors file or a model folder")
    ap.add_argument("--tokens")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--bf16", action="store_true", help="compute in BF16 (Llama, Qwen)")
    ap.add_argument("--make-random", metavar="DIR", help="write a random Qwen3 folder and stop")
    ap.add_argument("--vocab-size", type=int, default=300, help="the random folder's vocabulary")
    ap.add_argument("--tokenizer", help="a tokenizer.json (or its folder) for the random folder")
    args = ap.parse_args()
    if args.make_random:
        make_random_qwen3(args.make_random, V=args.vocab_size, tokenizer=args.tokenizer)
        return
    cfg, tensors = read_weights(args.weights)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    w = {k: v.to(dtype) for k, v in tensors.items()}
    toks = torch.tensor(read_tokens(args.tokens), dtype=torch.long)
    T = args.seq_len
    n = len(toks) // (T + 1)
    win = toks[: n * (T + 1)].view(n, T + 1)
    total = 0.0
    with torch.no_grad():  # a few windows at a time: a large vocabulary's logits are big
        for b in range(0, n, 16):
            rows = win[b : b + 16]
            if cfg.get("model_type", "gpt2") in ("llama", "qwen2", "qwen3"):
                total += llama_loss(w, cfg, rows[:, :-1], rows[:, 1:], dtype).item()
            else:
                total += gpt2_loss(w, cfg, rows[:, :-1], rows[:, 1:]).item()
    print(json.dumps({"loss": total / (n * T), "tokens": n * T}))


if __name__ == "__main__":
    main()
