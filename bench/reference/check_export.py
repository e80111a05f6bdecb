#!/usr/bin/env python3
"""Evaluates a shardtrain safetensors export with an independent PyTorch implementation of
Hugging Face's semantics for its config.json's model_type: GPT-2 (Conv1D weights [in, out], tied
lm_head, gelu_new, eps 1e-5) or Llama (LlamaForCausalLM: nn.Linear weights [out, in], RMSNorm
with FP32 statistics, rotate_half rotary embeddings, grouped-query attention by repeating kv
heads, SiLU-gated MLP, lm_head tied or not), reading the file with nothing but json and struct.
Prints {"loss": ..., "tokens": ...} over the little-endian uint16 windows of seq_len + 1 tokens
in --tokens, to compare with `shardtrain eval --weights FILE --tokens FILE --json`
(precision.param_dtype=fp32, or bf16 with --bf16: weights and activations in BF16 as
transformers runs a torch_dtype=bfloat16 model).

/usr/bin/python3 bench/reference/check_export.py --weights hf/model.safetensors --tokens t.bin --seq-len 32
(Needs Debian's python3-torch; not a shardtrain dependency.)
"""
import argparse
import json
import math
import os
import struct

import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": torch.float32, "BF16": torch.bfloat16}[t["dtype"]]
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dtype).view(t["shape"])
    return out


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
    L, C, H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hs, eps, theta = C // H, cfg["rms_norm_eps"], cfg.get("rope_theta", 10000.0)
    B, T = idx.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    x = w["model.embed_tokens.weight"][idx]
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].t()).view(B, T, H, hs).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].t()).view(B, T, KV, hs).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].t()).view(B, T, KV, hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        att = F.softmax(att, dim=-1, dtype=torch.float32).to(dtype)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
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
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--bf16", action="store_true", help="compute in BF16 (Llama)")
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(args.weights)), "config.json")))
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    w = {k: v.to(dtype) for k, v in read_safetensors(args.weights).items()}
    raw = open(args.tokens, "rb").read()
    toks = torch.tensor(struct.unpack(f"<{len(raw) // 2}H", raw), dtype=torch.long)
    T = args.seq_len
    n = len(toks) // (T + 1)
    win = toks[: n * (T + 1)].view(n, T + 1)
    with torch.no_grad():
        if cfg.get("model_type", "gpt2") == "llama":
            total = llama_loss(w, cfg, win[:, :-1], win[:, 1:], dtype).item()
        else:
            total = gpt2_loss(w, cfg, win[:, :-1], win[:, 1:]).item()
    print(json.dumps({"loss": total / (n * T), "tokens": n * T}))


if __name__ == "__main__":
    main()
