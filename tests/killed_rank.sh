#!/usr/bin/env bash
# killed_rank.sh SHARDRUN SHARDTRAIN RANKS [SHARDRUN OPTIONS...]: the last rank of a RANKS-rank
# run is killed from outside (SIGKILL) once a checkpoint is complete. mpirun then ends the other
# ranks with SIGTERM: rank 0's one line must say so ("stopped by mpirun (SIGTERM) in step N of
# M; newest complete checkpoint: ..."), with mpirun's note naming the killed rank, and never
# "terminated (SIGTERM)", the line of a SIGTERM the user sent (none was).
set -u
shardrun=$1 st=$2 ranks=$3
shift 3
dir=$(mktemp -d /tmp/shardtrain-killed-XXXXXX)
trap 'pkill -KILL -f -- "checkpoint.dir=$dir/" 2> /dev/null; rm -rf "$dir"' EXIT
fail() { printf 'FAIL: %s\n%s\n' "$*" "$(grep -v '^step \|^checkpoint |' "$dir/log" | tail -12)"; exit 1; }
export OMP_WAIT_POLICY=passive
"$shardrun" -n "$ranks" "$@" "$st" train model.n_layer=2 model.n_embd=64 model.n_head=4 \
  model.block_size=32 training.seq_len=32 training.global_batch=4 training.max_steps=100000 \
  "checkpoint.dir=$dir/ck" checkpoint.every=3 > "$dir/log" 2>&1 &
launcher=$!
for _ in $(seq 900); do compgen -G "$dir/ck/step-*/COMPLETE" > /dev/null && break; sleep 0.1; done
compgen -G "$dir/ck/step-*/COMPLETE" > /dev/null || fail "no checkpoint was written"
last=$((ranks - 1)) victim=""
for p in $(pgrep -f -- "checkpoint.dir=$dir/ck"); do
  tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$last" && victim=$p
done
[ -n "$victim" ] || fail "rank $last's process not found"
kill -KILL "$victim"
wait "$launcher"
rc=$?
[ "$rc" != 0 ] || fail "exit 0 after rank $last was killed"
grep -q "process rank $last .*exited on signal 9" "$dir/log" || fail "no note of rank $last's death"
grep -q '^shardtrain: terminated (SIGTERM)' "$dir/log" && fail "a line claims a SIGTERM nobody sent"
stopped=$(grep -cE "^shardtrain: stopped by mpirun \(SIGTERM\) in step [0-9]+ of 100000; newest complete checkpoint: $dir/ck/step-[0-9]{8}$" "$dir/log")
[ "$stopped" = 1 ] || fail "want one line saying mpirun stopped the job, got $stopped"
echo "rank $last killed: exit $rc, $(grep '^shardtrain: stopped' "$dir/log")"
