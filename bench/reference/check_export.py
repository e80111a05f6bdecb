#!/usr/bin/env python3
"""Evaluates a shardtrain safetensors export with an independent PyTorch implementation of
Hugging Face's GPT-2 semantics (Conv1D weights [in, out], tied lm_head, gelu_new, eps 1e-5),
reading the file with nothing but json and struct. Prints {"loss": ..., "tokens": ...} over the
little-endian uint16 windows of seq_len + 1 tokens in --tokens, to compare with
`shardtrain eval --weights FILE --tokens FILE precision.param_dtype=fp32 --json`.

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
        assert t["dtype"] == "F32", "export with --dtype fp32 for this check"
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).view(t["shape"])
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    args = ap.parse_args()
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(args.weights)), "config.json")))
    w = read_safetensors(args.weights)
    raw = open(args.tokens, "rb").read()
    toks = torch.tensor(struct.unpack(f"<{len(raw) // 2}H", raw), dtype=torch.long)
    T = args.seq_len
    n = len(toks) // (T + 1)
    win = toks[: n * (T + 1)].view(n, T + 1)
    with torch.no_grad():
        total = gpt2_loss(w, cfg, win[:, :-1], win[:, 1:]).item()
    print(json.dumps({"loss": total / (n * T), "tokens": n * T}))


if __name__ == "__main__":
    main()
