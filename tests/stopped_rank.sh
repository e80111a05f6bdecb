#!/usr/bin/env bash
# stopped_rank.sh SHARDRUN SHARDTRAIN: rank 1 of 2 is stopped (SIGSTOP) once 3 steps of a long
# run are in metrics.file (not after a fixed time: start-up under AddressSanitizer on a slow
# machine can outlast it, and a rank stopped before training begins is another case). The job
# ends within training.stall_timeout (4 s here) with exit 1 and one message naming the rank and
# its step, and no process of the job is left behind: a stopped process
# ignores everything but SIGKILL, so this is looked for, not assumed (the job's processes are
# found by the temporary directory on their command lines).
set -u
shardrun=$1 st=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/shardtrain-stopped-XXXXXX)
cleanup() { pkill -KILL -f -- "$dir" 2> /dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { printf 'FAIL: %s\n%s\n' "$*" "${out:-}"; exit 1; }
stop_after_step_3="(until [ \"\$(wc -l 2> /dev/null < $dir/metrics.jsonl || echo 0)\" -ge 3 ]; do sleep 0.1; done; kill -STOP \$\$) &"
out=$(timeout 90 "$shardrun" -n 2 "$here/on_rank.sh" 1 "$stop_after_step_3" "$st" train \
      precision.param_dtype=fp32 training.max_steps=1000 training.stall_timeout=4 \
      "metrics.file=$dir/metrics.jsonl" 2>&1)
rc=$?
[ $rc = 1 ] || fail "exit $rc, want 1"
pattern="rank 1 stopped responding at step [0-9]+: no heartbeat for [0-9.]+ s"
[ "$(printf '%s\n' "$out" | grep -Ec -- "$pattern")" = 1 ] || fail "want one line matching /$pattern/"
# mpirun has returned; its ranks are gone or going. Give the kernel a moment to reap them.
for _ in $(seq 50); do
  left=$(pgrep -af -- "$dir")
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "processes of the job left behind: $left"
echo "the stopped rank was named once, the job ended, nothing left running"
