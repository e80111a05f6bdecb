#!/usr/bin/env bash
# elastic.sh CASE SHARDRUN SHARDTRAIN: failures that shardrun --max-restarts recovers from (or
# rightly does not), each against an uninterrupted run of the same FP32 training: 4 ranks, 20
# steps, a checkpoint after step 10 (and the last), a global batch of 12 (which splits over 4,
# 3, 2 and 1 ranks). A fault lands once shardrun sees its step's line, a step or more later on
# a loaded machine; with no checkpoint between step 10 and the end, the restart always resumes
# from step 10 and trains the steps since again.
#   lost_rank        rank 1 killed after step 12 for good: finishes at 3 ranks
#   batch_split      the same with a global batch of 8, which 3 ranks cannot split: finishes at
#                    2 ranks (the largest world size the job runs at), saying why
#   crashed_rank     rank 2 killed after step 12, its slot free again: finishes at 4 ranks
#   startup_death    the same, and restart 1 loses rank 1 before its first step: restart 2's
#                    line names that, and counts the steps recomputed from step 12, not from 0
#   hsdp_mesh        HSDP 2x2 losing rank 3: falls back to FSDP over 3, and says so
#   quantized        int8 all-gathers and reductions between 2 pretend nodes of 2 ranks and
#                    hpZ (reshard_after_forward = 2), global batch 8, rank 1 lost: restarts at
#                    2 ranks on one node, dropping the quantization (nothing left to quantize)
#                    and hpZ (a shard group of 2 has no smaller group), saying so; every step once
#   quantized_host   (emulated hosts) int8 reductions between 2 hosts, host1 lost: the same
#   lost_host        4 ranks on 2 emulated hosts, host1's link down for good after step 11:
#                    finishes on host0
#   link_outage      host1's link down for 3 s: survived, no restart
#   link_lost        host1's link down for good, no --max-restarts: ends within the stall
#                    timeout, naming host1
#   same_failure     a job failing the same way after the same step twice stops, both messages
#   interrupted_backoff  SIGINT to shardrun during the restart back-off ends the job (130)
#   bad_input        exit 2 is never restarted
#   min_ranks        fewer ranks than --min-ranks left: not restarted, saying why
# The restarted runs' losses must equal the uninterrupted run's to 1e-5 relative at every step,
# the steps between the checkpoint and the failure computed again.
set -u
case_=$1 shardrun=$2 st=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/shardtrain-elastic-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
train=(train model.n_layer=4 model.n_embd=128 model.n_head=4 model.block_size=64
       training.seq_len=64 training.global_batch=12 training.max_steps=20
       precision.param_dtype=fp32)
fail() { printf 'FAIL %s: %s\n' "$case_" "$*"; [ -f out ] && cat out; exit 1; }

# step<TAB>loss for each step record of a metrics file.
losses() {
  grep '"loss":' "$1" | sed -E 's/.*"loss":([-0-9.e+]+).*"step":([0-9]+).*/\2\t\1/'
}
# The run's curve equals the uninterrupted one's: every step once, each loss within 1e-5.
same_curve() {
  "$shardrun" -n 4 "$st" "${train[@]}" metrics.file=ref.jsonl > ref.out 2>&1 || { cat ref.out; fail "the reference run failed"; }
  losses ref.jsonl > ref.tsv
  losses "$1" > run.tsv
  [ "$(wc -l < ref.tsv)" = 20 ] || fail "the reference has $(wc -l < ref.tsv) steps, not 20"
  [ "$(cut -f1 run.tsv | sort -n | uniq | wc -l)" = 20 ] && [ "$(wc -l < run.tsv)" = 20 ] ||
    fail "the restarted run's metrics do not hold steps 0-19 once each: $(cut -f1 run.tsv | tr '\n' ' ')"
  join <(sort ref.tsv) <(sort run.tsv) | awk '
    { d = $2 - $3; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > worst) worst = r; rows++
      if (r > 1e-5) { printf "step %d: loss %s uninterrupted, %s restarted (%.2g relative)\n", $1, $2, $3, r; bad = 1 } }
    END { printf "worst relative difference over %d steps: %.2g\n", rows, worst
          if (rows != 20) { print "want 20 steps compared"; bad = 1 }
          exit bad }' || fail "the loss curves differ"
}
# One restart record in the metrics, at `ranks` ranks, with steps recomputed.
one_restart() {
  local rec
  [ "$(grep -c '"restart":' "$1")" = 1 ] || fail "want one restart record in $1"
  rec=$(grep '"restart":' "$1")
  grep -q "\"ranks\":$2," <<< "$rec" || fail "the restart record says other than $2 ranks: $rec"
  local after failed
  after=$(sed -E 's/.*"after_step":([0-9]+).*/\1/' <<< "$rec")
  failed=$(sed -E 's/.*"failed_after_step":([0-9]+).*/\1/' <<< "$rec")
  [ "$failed" -gt "$after" ] || fail "no step recomputed (failed after $failed, resumed after $after): $rec"
  echo "restart: resumed after step $after, the failed run had printed step $failed"
}
elapsed() { echo $((($(date +%s%N) - $1) / 1000000)); }

case $case_ in
  lost_rank)
    "$shardrun" -n 4 --max-restarts 2 --restart-backoff 0.5 --fault lose:1@12 "$st" "${train[@]}" \
      checkpoint.dir=ck checkpoint.every=10 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    [ "$(grep -c '^restart 1 of 2 | why: rank 1 on .* exited on signal 9 (Killed) | from ck/step-00000010 (step 10); [1-9] steps\? recomputed | 3 ranks (was 4), FSDP over 3 ranks$' out)" = 1 ] ||
      fail "want one restart line naming the killed rank, the checkpoint and 3 ranks"
    one_restart m.jsonl 3
    same_curve m.jsonl
    ;;
  batch_split)
    train+=(training.global_batch=8)
    "$shardrun" -n 4 --max-restarts 1 --restart-backoff 0.5 --fault lose:1@12 "$st" "${train[@]}" \
      checkpoint.dir=ck checkpoint.every=10 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    [ "$(grep -c '^shardrun: 3 ranks remain, but this job cannot run at 3 (training.global_batch = 8 cannot be split evenly over 3 rank(s) x training.micro_batches = 1; make it a multiple of 3): the restart runs at 2, the largest world size it can$' out)" = 1 ] ||
      fail "want one line saying why the restart runs at 2 ranks"
    grep -q '^restart 1 of 1 | why: rank 1 on .* exited on signal 9 (Killed) | from ck/step-00000010 (step 10); [1-9] steps\? recomputed | 2 ranks (was 4), FSDP over 2 ranks$' out ||
      fail "want the restart line at 2 ranks"
    one_restart m.jsonl 2
    same_curve m.jsonl
    ;;
  crashed_rank)
    "$shardrun" -n 4 --max-restarts 1 --restart-backoff 0.5 --fault kill:2@12 "$st" "${train[@]}" \
      checkpoint.dir=ck checkpoint.every=10 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q '^restart 1 of 1 | why: rank 2 on .* exited on signal 9 (Killed) | .* | 4 ranks (was 4), FSDP over 4 ranks$' out ||
      fail "want the restart line at 4 ranks"
    one_restart m.jsonl 4
    same_curve m.jsonl
    ;;
  startup_death)
    # Rank 1 of restart 1 kills itself before shardtrain starts (on_rank.sh's setup).
    "$shardrun" -n 4 --max-restarts 2 --restart-backoff 0.2 --fault kill:2@12 "$here/on_rank.sh" 1 \
      '[ "${SHARDRUN_RESTART:-}" = 1/2 ] && kill -KILL $$' "$st" "${train[@]}" \
      checkpoint.dir=ck checkpoint.every=10 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q '^restart 1 of ' out && fail "restart 1 printed a restart line"
    grep -q "^restart 2 of 2 | why: .*, during restart 1's start-up | from ck/step-00000010 (step 10); [1-9] steps\? recomputed | 4 ranks (was 4), FSDP over 4 ranks$" out ||
      fail "want restart 2's line naming restart 1's death and the steps since step 10"
    one_restart m.jsonl 4
    same_curve m.jsonl
    ;;
  hsdp_mesh)
    "$shardrun" -n 4 --max-restarts 1 --restart-backoff 0.5 --fault lose:3@12 "$st" "${train[@]}" \
      sharding.shard_degree=2 sharding.replicate_degree=2 checkpoint.dir=ck checkpoint.every=10 \
      metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q '^restart 1 of 1 | .* | 3 ranks (was 4), FSDP over 3 ranks | parallel.dp_shard = 2 x dp_replicate = 2 does not fit 3 ranks: 3 x 1 instead.$' out ||
      fail "want the restart line to name the mesh it fell back to"
    one_restart m.jsonl 3
    same_curve m.jsonl
    ;;
  quantized)
    "$shardrun" -n 4 --max-restarts 1 --restart-backoff 0.5 --fault lose:1@12 "$st" "${train[@]}" \
      training.global_batch=8 sharding.ranks_per_node=2 sharding.gather_quantization=int8 \
      sharding.reduce_quantization=int8 sharding.reshard_after_forward=2 checkpoint.dir=ck \
      checkpoint.every=10 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q '^restart 1 of 1 | .* | 2 ranks (was 4), FSDP over 2 ranks | sharding.reshard_after_forward = 2 does not divide a shard group of 2: true. sharding.gather_quantization = int8, reduce_quantization = int8 have no link between nodes to quantize on 2 ranks: none.$' out ||
      fail "want the restart line to name hpZ and the quantization it dropped"
    one_restart m.jsonl 2
    [ "$(losses m.jsonl | cut -f1 | sort -n | uniq | wc -l)" = 20 ] || fail "want steps 0-19 in m.jsonl"
    ;;
  quantized_host)
    "$shardrun" -n 4 --nodes 2 --max-restarts 1 --restart-backoff 0.5 --fault link-down:1@11 "$st" \
      "${train[@]}" sharding.reduce_quantization=int8 checkpoint.dir=ck checkpoint.every=10 \
      training.stall_timeout=5 metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q '^restart 1 of 1 | .* | 2 ranks (was 4), FSDP over 2 ranks | sharding.gather_quantization = none, reduce_quantization = int8 have no link between nodes to quantize on 2 ranks: none.$' out ||
      fail "want the restart line to name the quantization it dropped"
    one_restart m.jsonl 2
    ;;
  lost_host)
    "$shardrun" -n 4 --nodes 2 --max-restarts 1 --restart-backoff 0.5 --fault link-down:1@11 "$st" \
      "${train[@]}" checkpoint.dir=ck checkpoint.every=10 training.stall_timeout=5 \
      metrics.file=m.jsonl > out 2>&1 || fail "exit $?"
    grep -q "^restart 1 of 1 | why: rank 0: rank 3 on host1 stopped responding .* | 2 ranks (was 4), FSDP over 2 ranks$" out ||
      fail "want the restart line to name host1's rank and 2 ranks"
    one_restart m.jsonl 2
    same_curve m.jsonl
    ;;
  link_outage)
    "$shardrun" -n 4 --nodes 2 --fault link-down:1@6+3 "$st" "${train[@]}" metrics.file=m.jsonl \
      > out 2>&1 || fail "exit $?"
    grep -q "host1's link up again" out || fail "the outage did not happen during training"
    ! grep -q '"restart":' m.jsonl || fail "a restart where none was needed"
    same_curve m.jsonl
    ;;
  link_lost)
    # Timed from the fault's line, for the record (a job that does not end fails by the test's
    # CTest timeout): 5 s of silence (training.stall_timeout), then up to 5 s for mpirun, which
    # cannot reach host1's daemon, before shardrun ends what remains.
    "$shardrun" -n 4 --nodes 2 --fault link-down:1@6 "$st" "${train[@]}" training.max_steps=1000 \
      training.stall_timeout=5 2>&1 | while IFS= read -r line; do
        printf '%s\n' "$line"
        [[ $line == *"link down for good"* ]] && date +%s%N > fault_at
      done > out
    rc=${PIPESTATUS[0]}
    [ "$rc" != 0 ] || fail "exit 0 for a lost host"
    [ -f fault_at ] || fail "the fault did not happen"
    ms=$(elapsed "$(cat fault_at)")
    [ "$(grep -c "^shardtrain: rank 0: rank 3 on host1 stopped responding at step [0-9]*: no heartbeat for 5.[0-9] s (.*unreachable: host1's link or network)" out)" = 1 ] ||
      fail "want one message naming rank 3 and host1"
    echo "ended $ms ms after the link went down, naming host1 (exit $rc)"
    ;;
  same_failure)
    # An lr of 1e30 makes step 2's gradient norm non-finite, every time.
    "$shardrun" -n 2 --max-restarts 3 --restart-backoff 0.2 "$st" train model.n_layer=1 \
      model.n_embd=32 model.n_head=2 model.block_size=16 training.seq_len=16 \
      training.max_steps=6 optimizer.lr=1e30 optimizer.warmup_steps=0 > out 2>&1
    rc=$?
    [ "$rc" = 1 ] || fail "exit $rc (want 1)"
    grep -q '^shardrun: not restarting: the job failed the same way after step 1 twice:$' out ||
      fail "want the same-failure refusal"
    [ "$(grep -c '^  run [12]: rank 0: failed: step 2: the global gradient norm is not finite (nan)$' out)" = 2 ] ||
      fail "want both runs' messages"
    [ "$(grep -c '^shardtrain | cpu' out)" = 2 ] || fail "want exactly 2 runs"
    ;;
  bad_input)
    "$shardrun" -n 2 --max-restarts 3 "$st" train model.n_layr=2 > out 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "exit $rc (want 2)"
    grep -q "unknown config key 'model.n_layr'" out || fail "want the job's own message"
    grep -q '^shardrun: not restarting: the job refused its input (exit 2)' out || fail "want the refusal"
    ;;
  min_ranks)
    "$shardrun" -n 2 --max-restarts 2 --min-ranks 2 --fault lose:1@3 "$st" "${train[@]}" \
      training.max_steps=1000 > out 2>&1 && fail "exit 0"
    grep -q '^shardrun: not restarting: 1 rank(s) remain, fewer than --min-ranks 2; the failure, after step [0-9]*: rank 1 on .* exited on signal 9 (Killed)$' out ||
      fail "want the --min-ranks refusal naming the failure"
    [ "$(grep -c '^shardtrain | cpu' out)" = 1 ] || fail "want no restart"
    ;;
  interrupted_backoff)
    # SIGINT to shardrun itself while it waits to restart ends the job: 130, one line, nothing
    # left in /tmp (it was ignored: the restart went ahead and the job ran to exit 0). Its
    # "restart 1 of 2 in 30 s" line says the back-off has begun, so the signal lands in it.
    "$shardrun" -n 2 --max-restarts 2 --restart-backoff 30 --fault kill:1@2 "$st" "${train[@]}" \
      training.max_steps=1000 > out 2>&1 &
    launcher=$!
    for _ in $(seq 600); do grep -q '^shardrun: restart 1 of 2 in 30 s' out && break; sleep 0.1; done
    grep -q '^shardrun: restart 1 of 2 in 30 s' out || fail "the back-off never began"
    kill -INT "$launcher"
    wait "$launcher"
    rc=$?
    [ "$rc" = 130 ] || fail "exit $rc (want 130)"
    grep -q '^shardrun: interrupted by SIGINT during the restart back-off: not restarting; the failure, after step [0-9]*: rank 1 on .* exited on signal 9 (Killed)$' out ||
      fail "want the interruption line"
    [ "$(grep -c '^shardtrain | cpu' out)" = 1 ] || fail "restarted after the interruption"
    ;;
  *) echo "elastic.sh: unknown case '$case_'" >&2; exit 2 ;;
esac
echo "ok $case_"
