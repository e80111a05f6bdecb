#!/usr/bin/env bash
# pipeline.sh SHARDRUN SHARDTRAIN: issue 58's command. llama-tiny trained in FP32 at 4 ranks as
# PP 2 x FSDP 2 under interleaved 1F1B (2 stages per rank, 4 micro-batches) follows the 1-rank
# run's losses with the same micro-batches; its background checkpoint (pipeline rank 0's ranks
# write every stage's shards, sent to them over a group of the saves' own) resumes at pp 1 on
# one rank with the 1-rank run's next losses; the start-up summary names the schedule and the
# stages, and the step line the measured bubble. (Synchronous saves under stages: the mesh
# tests' Mesh.CheckpointsCarryAcrossMeshesAndWorldSizes.)
set -u
. "$(dirname "$0")/support/loss_curves.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-pipeline-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
train=(train --config llama-tiny model.block_size=64 training.seq_len=64 training.max_steps=6
       training.micro_batches=4 precision.param_dtype=fp32 training.stall_timeout=180)

"$st" "${train[@]}" metrics.file=one.jsonl > one.out 2>&1 || fail "1-rank run: $(cat one.out)"
"$shardrun" -n 4 "$st" "${train[@]}" parallel.pp=2 parallel.dp_shard=2 \
  parallel.pp_schedule=interleaved_1f1b parallel.pp_virtual_stages=2 checkpoint.dir=ck \
  checkpoint.every=3 checkpoint.async=true metrics.file=pp.jsonl > pp.out 2>&1 ||
  fail "PP 2 x FSDP 2: $(cat pp.out)"
grep -q 'saved ck/step-00000003 in the background' pp.out ||
  fail "step 3 was not saved in the background: $(grep checkpoint pp.out)"
grep -q 'mesh: PP 2 x FSDP over 2 ranks' pp.out || fail "the summary's mesh: $(grep mesh pp.out)"
grep -q 'pipeline: interleaved_1f1b over 2 ranks x 2 stages each, 4 micro-batches: bubble 11.1% in theory' pp.out ||
  fail "the summary's schedule: $(grep pipeline: pp.out)"
grep -q 'stages: 0: blocks \[0-1) + embedding on pipeline rank 0' pp.out ||
  fail "the summary's stages: $(grep stages: pp.out)"
grep -Eq '^step +6/6 .*bubble [0-9]+%' pp.out || fail "the step line's bubble: $(grep '^step' pp.out)"
same_losses one.jsonl pp.jsonl 6 || fail "PP 2 x FSDP 2 differs from one rank"
"$st" "${train[@]}" checkpoint.resume=ck/step-00000003 metrics.file=resumed.jsonl \
  > resumed.out 2>&1 || fail "resuming at pp 1: $(cat resumed.out)"
same_losses one.jsonl resumed.jsonl 3 || fail "resumed at pp 1, the losses differ"
echo "PP 2 x FSDP 2 (interleaved 1F1B) at 4 ranks followed one rank; its checkpoint resumed at pp 1"
