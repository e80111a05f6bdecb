#!/usr/bin/env bash
# tp_checkpoint.sh SHARDRUN SHARDTRAIN: tensor parallelism's checkpoints, in whole-parameter
# coordinates. A Llama trained in FP32 at 4 ranks as FSDP 2 x TP 2 follows the 1-rank run's
# losses; its checkpoint (the manifest says tp 2) resumes at parallel.tp = 1 on 2 ranks and on
# one rank with the 1-rank run's next losses; exported at 1 and at 3 ranks it is the same file,
# which evaluates to the checkpoint's loss, and training.init_from it at TP 2 and at FSDP 2 x
# TP 2 (each rank reading only its slices) continues as at one rank.
set -u
. "$(dirname "$0")/support/loss_curves.sh"
. "$(dirname "$0")/support/eval_losses.sh"
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-tp-checkpoint-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
train=(train --config llama-tiny model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2
       model.ffn_hidden=160 model.block_size=32 training.seq_len=32 training.global_batch=8
       training.max_steps=8 precision.param_dtype=fp32)

"$st" "${train[@]}" metrics.file=one.jsonl > one.out 2>&1 || fail "1-rank run: $(cat one.out)"
"$shardrun" -n 4 "$st" "${train[@]}" parallel.tp=2 parallel.dp_shard=2 checkpoint.dir=ck \
  checkpoint.every=4 metrics.file=tp.jsonl > tp.out 2>&1 || fail "FSDP 2 x TP 2: $(cat tp.out)"
grep -q 'mesh: FSDP over 2 ranks x TP 2' tp.out || fail "the summary's mesh: $(grep mesh tp.out)"
same_losses one.jsonl tp.jsonl 8 || fail "FSDP 2 x TP 2 differs from one rank"
grep -q '"tp": 2' ck/step-00000004/manifest.json || fail "the manifest does not record tp 2"

for ranks in 2 1; do
  "$shardrun" -n "$ranks" "$st" "${train[@]}" parallel.tp=1 checkpoint.resume=ck/step-00000004 \
    metrics.file=resumed$ranks.jsonl > resumed$ranks.out 2>&1 ||
    fail "resuming at tp 1 on $ranks ranks: $(cat resumed$ranks.out)"
  [ "$(losses resumed$ranks.jsonl | cut -f1 | tr '\n' ' ')" = "4 5 6 7 " ] ||
    fail "the resumed run at $ranks ranks did not take steps 4-7: $(losses resumed$ranks.jsonl)"
  same_losses one.jsonl resumed$ranks.jsonl 4 || fail "resumed at $ranks ranks, the losses differ"
done

for ranks in 1 3; do
  "$shardrun" -n "$ranks" "$st" export --checkpoint ck/step-00000008 --out "hf$ranks" \
    --dtype fp32 > export$ranks.out 2>&1 || fail "export at $ranks ranks: $(cat export$ranks.out)"
done
cmp -s hf1/model.safetensors hf3/model.safetensors || fail "the exports at 1 and 3 ranks differ"
a=$("$st" eval --json --weights hf1 training.seq_len=32) || fail "eval of the export: $a"
b=$("$shardrun" -n 2 "$st" eval --json --checkpoint ck/step-00000008 training.seq_len=32 \
  precision.param_dtype=fp32) || fail "eval of the checkpoint: $b"
losses_agree 0 "$(json_loss <<< "$a")" "$(json_loss <<< "$b")" ||
  fail "the export's loss differs from the checkpoint's: $a vs $b"

# training.init_from the exported folder at TP 2 (each rank reading its slices' bytes), at
# FSDP 2 x TP 2 and at TP 4 (the 2 KV heads shared by pairs of ranks) starts where one rank does.
"$st" "${train[@]}" training.max_steps=2 training.init_from=hf1 metrics.file=init1.jsonl \
  > init1.out 2>&1 || fail "init_from at one rank: $(cat init1.out)"
n=0
for mesh in "2 parallel.tp=2" "4 parallel.tp=2 parallel.dp_shard=2" "4 parallel.tp=4"; do
  set -- $mesh
  ranks=$1; shift
  run=$((n += 1))
  "$shardrun" -n "$ranks" "$st" "${train[@]}" training.max_steps=2 training.init_from=hf1 "$@" \
    metrics.file="init$run.jsonl" > "init$run.out" 2>&1 ||
    fail "init_from at $ranks ranks ($*): $(cat "init$run.out")"
  same_losses init1.jsonl "init$run.jsonl" 2 || fail "init_from at $ranks ranks ($*) differs"
done
echo "FSDP 2 x TP 2 followed one rank, resumed at tp 1 (2 ranks, 1 rank), exported alike at 1 and 3 ranks, read back at TP 2, FSDP 2 x TP 2 and TP 4"
