#!/usr/bin/env bash
# hsdp_tp.sh SHARDRUN SHARDTRAIN: the 3-D data-parallel x tensor-parallel mesh. A Llama trained in
# FP32 at 8 ranks as HSDP (2 replicas, one per emulated node, x 2 shards) x TP 2 follows the
# 1-rank run's losses, and its checkpoint (written by replica 0's dp_shard x tp ranks) resumes as
# FSDP 2 x TP 2 at 4 ranks with the 1-rank run's next losses.
set -u
. "$(dirname "$0")/support/loss_curves.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-hsdp-tp-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
train=(train --config llama-tiny model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2
       model.ffn_hidden=160 model.block_size=32 training.seq_len=32 training.global_batch=8
       training.max_steps=6 precision.param_dtype=fp32
       # 8 ranks on 2 cores beside the rest of the suite: a checkpoint's fsync stalled one rank
       # past the default 30 s once in CI (the job ended, naming it); this test is about
       # numbers, not about the stall detector (cli.stopped_rank_ends_the_job is).
       training.stall_timeout=180)

"$st" "${train[@]}" metrics.file=one.jsonl > one.out 2>&1 || fail "1-rank run: $(cat one.out)"
"$shardrun" -n 8 "$st" "${train[@]}" parallel.dp_replicate=2 parallel.dp_shard=2 parallel.tp=2 \
  sharding.ranks_per_node=4 checkpoint.dir=ck checkpoint.every=3 metrics.file=hsdp.jsonl \
  > hsdp.out 2>&1 || fail "HSDP x TP: $(cat hsdp.out)"
grep -q 'mesh: HSDP: 2 replicas x 2 shards x TP 2' hsdp.out ||
  fail "the summary's mesh: $(grep mesh hsdp.out)"
same_losses one.jsonl hsdp.jsonl 6 || fail "HSDP 2 x 2 x TP 2 differs from one rank"
grep -q '"world_size": 4' ck/step-00000003/manifest.json ||
  fail "the checkpoint was not written by one replica's 4 ranks"
"$shardrun" -n 4 "$st" "${train[@]}" parallel.dp_shard=2 parallel.tp=2 \
  checkpoint.resume=ck/step-00000003 metrics.file=resumed.jsonl > resumed.out 2>&1 ||
  fail "resuming as FSDP 2 x TP 2: $(cat resumed.out)"
same_losses one.jsonl resumed.jsonl 3 || fail "resumed as FSDP 2 x TP 2, the losses differ"
echo "HSDP 2 x 2 x TP 2 at 8 ranks followed one rank; its checkpoint resumed as FSDP 2 x TP 2"
