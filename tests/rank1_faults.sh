#!/usr/bin/env bash
# rank1_faults.sh SHARDRUN SHARDTRAIN [memory]: faults on rank 1 alone of a 2-rank job. Each must
# end the whole job with the expected exit code and the failing rank's message once (rank 0's
# faults are the cli.rank0_* / *_checked_at_startup tests), within 25 s of starting: start-up
# (seconds under AddressSanitizer on 2 loaded cores), the fault, and the abort's 5 s grace for
# the failing rank's message. A job that hung instead would end only by the heartbeat's
# training.stall_timeout (30 s) or the watchdog, so the bound tells the two apart without a
# margin a loaded machine can eat.
# With "memory", only the memory-limit case runs (its own CTest test, not in the sanitized
# build: AddressSanitizer reserves terabytes of address space and cannot start under ulimit -v).
set -u
shardrun=$1 st=$2 only=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/shardtrain-rank1-XXXXXX)
trap 'rm -rf "$dir"' EXIT
model=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 training.seq_len=32
       training.global_batch=4)
failed=0

# expect NAME CODE PATTERN SETUP ARGS...: SETUP runs on rank 1 only (tests/on_rank.sh).
expect() {
  local name=$1 want=$2 pattern=$3 setup=$4 out rc start elapsed count
  shift 4
  start=$(date +%s%N)
  # A job that does not end is the test's CTest timeout.
  out=$("$shardrun" -n 2 "$here/on_rank.sh" 1 "$setup" "$st" "$@" 2>&1)
  rc=$?
  elapsed=$((($(date +%s%N) - start) / 1000000))  # ms, for the record
  count=$(printf '%s\n' "$out" | grep -Ec -- "$pattern")
  # No second shardtrain message contradicts the failing rank's (a "terminated" line from rank
  # 0 as mpirun ends it, or an error caused by the first).
  # (A killed rank sends no notice: rank 0's line naming the step and checkpoint stays useful.)
  others=$(printf '%s\n' "$out" | grep -E '^shardtrain: ' | grep -Ev -- "${allowed:-$pattern}" | grep -Evc -- "$pattern")
  [ "$want" = nonzero ] && [ "$rc" != 0 ] && want=$rc
  if [ "$rc" != "$want" ] || [ "$count" != 1 ] || [ "$others" != 0 ]; then
    printf 'FAIL %s: exit %s (want %s), %s lines matching /%s/ (want 1), %s other messages (want 0), after %s ms:\n%s\n\n' \
      "$name" "$rc" "$want" "$count" "$pattern" "$others" "$elapsed" "$out"
    failed=1
  else
    printf 'ok   %s: exit %s in %s ms\n' "$name" "$rc" "$elapsed"
  fi
}

# Rank 1 alone cannot have the memory its budget needs (ulimit -v): refused at start-up,
# naming rank 1.
if [ "$only" = memory ]; then
  expect "rank 1's memory limit" 2 \
    "shardtrain: error: rank 1 of 2: the memory budget is .* GiB per rank .* on this rank, more than the 0.76 GiB available to it .*ulimit -v 0.8 GiB" \
    "ulimit -v 800000" \
    train "${model[@]}" model.n_layer=4 model.n_embd=1024 model.n_head=8 training.global_batch=128 \
    training.max_steps=1
  exit $failed
fi

# A write that fails on rank 1 alone, mid-run: its checkpoint shard meets a file-size limit
# (as a quota would); SIGXFSZ ignored, so write() returns EFBIG.
expect "rank 1's checkpoint write fails" 1 \
  "shardtrain: rank 1: failed: writing '.*master.rank-00001.bin.*File too large" \
  "trap '' XFSZ; ulimit -f 64" \
  train "${model[@]}" training.max_steps=6 "checkpoint.dir=$dir/ck1" checkpoint.every=3

# Rank 1 verifies a checkpoint file that fails its checksum (files are split between the
# ranks); every rank reports the same error, printed once.
"$shardrun" -n 2 "$st" train "${model[@]}" training.max_steps=2 "checkpoint.dir=$dir/ck2" \
  checkpoint.every=2 > "$dir/ck2.log" 2>&1 || { cat "$dir/ck2.log"; exit 1; }
printf 'x' | dd of="$dir/ck2/step-00000002/exp_avg.rank-00000.bin" bs=1 seek=100 conv=notrunc 2> /dev/null
expect "a corrupt file verified by rank 1" 2 \
  "shardtrain: error: checkpoint file '.*exp_avg.rank-00000.bin' fails its xxh64 checksum" \
  "" train "${model[@]}" training.max_steps=4 "checkpoint.dir=$dir/ck2"

# Rank 1 killed (SIGKILL) once its step 3 is done (SHARDRUN_FAULT_KILL, the launcher's fault
# seam): mpirun ends the job and names the rank.
allowed="shardtrain: stopped by mpirun \\(SIGTERM\\) in step" expect "rank 1 killed" nonzero "process rank 1 .*exited on signal 9" \
  'export SHARDRUN_FAULT_KILL=1@3' train "${model[@]}" training.max_steps=100000

exit $failed
