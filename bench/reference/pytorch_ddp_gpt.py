#!/usr/bin/env python3
"""Same-day reference for `shardtrain bench scaling` and `bench/compute`: a GPT-2, by default
the `tiny` one (L=4, C=256, H=4, T=256, V=256, global batch 8 x 256; --layers, --width,
--heads, --seq and --vocab give others), trained with PyTorch's DDP (gloo) and bf16 autocast
(or --precision fp32: on CPUs without AVX512-BF16 PyTorch's BF16 matmul is a scalar fallback,
so FP32 is the fast choice a PyTorch user has there), N processes x --threads threads, AdamW.
Prints tokens/s (median step of --steps after --warmup).

Needs PyTorch, which Debian 12 packages as python3-torch (1.13) for /usr/bin/python3:
apt-get install -y python3-torch; run with bench/reference/pytorch_ddp_gpt.py --ranks 2 (under
a python3 without torch it runs itself under /usr/bin/python3).
Not a dependency of shardtrain: only a baseline for its README.
"""
import argparse
import math
import os
import statistics
import time

from find_torch import require_torch

require_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.H)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")).float(), dim=-1).to(q.dtype)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L=4, C=256, H=4, T=256, V=256):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def worker(rank, args):
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        GPT(L=args.layers, C=args.width, H=args.heads, T=args.seq, V=args.vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    rows = args.global_batch // args.ranks
    gen = torch.Generator().manual_seed(rank)
    times = []
    for step in range(args.warmup + args.steps):
        data = torch.randint(0, args.vocab, (rows, args.seq + 1), generator=gen)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dist.barrier()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    if rank == 0:
        step_s = statistics.median(times)
        print(f'{{"reference": "pytorch {torch.__version__} ddp gloo {args.precision}{" autocast" if args.precision == "bf16" else ""}", '
              f'"ranks": {args.ranks}, "threads": {args.threads}, '
              f'"tokens_per_s": {args.global_batch * args.seq / step_s:.1f}, "step_ms": {step_s * 1e3:.1f}}}')
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=256)
    args = p.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.ranks)
