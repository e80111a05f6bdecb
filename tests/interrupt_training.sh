#!/usr/bin/env bash
# interrupt_training.sh SHARDRUN SHARDTRAIN SIGNAL [slow-rank0]: a 2-rank run that has saved a
# checkpoint gets SIGNAL: INT to its whole process group, as Ctrl-C sends it, or TERM to mpirun,
# as a scheduler does. The job must end within a few seconds with one line naming the step and
# the newest complete checkpoint.
# slow-rank0: rank 0 takes the signal 2 s late (frozen in a cgroup freezer, as a descheduled or
# uninterruptibly writing process would be, which SIGCONT does not wake); rank 1 must not end
# the job first, or mpirun kills rank 0 before it says its line.
set -u
shardrun=$1 st=$2 sig=$3 slow=${4:-}
dir=$(mktemp -d /tmp/shardtrain-interrupt-XXXXXX)
freezer=""
cleanup() {
  [ -z "$freezer" ] || thaw
  pkill -9 -f "checkpoint.dir=$dir" 2> /dev/null
  [ -z "$freezer" ] || { sleep 0.5; rmdir "$freezer"; }
  rm -rf "$dir" "$dir.log"
}
trap cleanup EXIT
# A freezer cgroup of its own: cgroup v1's freezer controller, or cgroup v2's cgroup.freeze.
make_freezer() {
  local v1=/sys/fs/cgroup/freezer v2
  v2=$(findmnt -n -o TARGET -t cgroup2 | head -1)
  if [ -d "$v1" ]; then
    freezer=$v1/shardtrain-interrupt-$$
  elif [ -n "$v2" ]; then
    freezer=$v2/shardtrain-interrupt-$$
  else
    echo "slow-rank0 needs a cgroup freezer (cgroup v1's freezer or cgroup v2), and there is none"
    exit 1
  fi
  mkdir "$freezer" || { freezer=""; echo "cannot make a cgroup (root?)"; exit 1; }
}
freeze() {
  if [ -e "$freezer/freezer.state" ]; then
    echo FROZEN > "$freezer/freezer.state"
    until grep -qx FROZEN "$freezer/freezer.state"; do sleep 0.05; done
  else
    echo 1 > "$freezer/cgroup.freeze"
    until grep -qx "frozen 1" "$freezer/cgroup.events"; do sleep 0.05; done
  fi
}
thaw() {
  if [ -e "$freezer/freezer.state" ]; then echo THAWED > "$freezer/freezer.state"
  else echo 0 > "$freezer/cgroup.freeze"; fi
}
rank0_pid() {
  local p
  for p in $(pgrep -f "train .*checkpoint.dir=$dir"); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && echo "$p"
  done
}
# Job control puts the run in a process group of its own with SIGINT at its default, as a
# terminal's foreground job is (a plain background job of a script starts with SIGINT ignored).
set -m
"$shardrun" -n 2 "$st" train model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 \
  training.seq_len=32 training.global_batch=4 training.max_steps=100000 "checkpoint.dir=$dir" \
  checkpoint.every=3 > "$dir.log" 2>&1 &
pid=$!
complete() { compgen -G "$dir/step-*/COMPLETE" > /dev/null; }
for _ in $(seq 600); do complete && break; sleep 0.1; done
complete || { echo "no checkpoint was written:"; tail -20 "$dir.log"; exit 1; }
if [ "$slow" = slow-rank0 ]; then
  make_freezer
  rank0=$(rank0_pid)
  [ -n "$rank0" ] || { echo "rank 0's process not found"; exit 1; }
  echo "$rank0" > "$freezer/cgroup.procs"
  freeze
fi
start=$(date +%s.%N)
if [ "$sig" = INT ]; then kill -INT -- -"$pid"; else kill -TERM "$pid"; fi
[ "$slow" != slow-rank0 ] || { sleep 2; thaw; }
wait "$pid"  # a job the signal does not end fails by the test's CTest timeout
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
# The line names the signal the user sent (a SIGTERM of mpirun's own is not it).
said="interrupted \(SIGINT\)"
[ "$sig" = INT ] || said="terminated \(SIGTERM\)"
line=$(grep -E "shardtrain: $said in step [0-9]+ of 100000; newest complete checkpoint: $dir/step-[0-9]{8}" "$dir.log")
if [ -z "$line" ]; then echo "no interruption line (exit $rc):"; tail -20 "$dir.log"; exit 1; fi
[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || { echo "the line came more than once:"; tail -20 "$dir.log"; exit 1; }
[ "$rc" != 0 ] || { echo "exit code 0 after SIG$sig"; exit 1; }
echo "SIG$sig: ended in ${took}s with exit $rc: $line"
