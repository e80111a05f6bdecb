#!/usr/bin/env bash
# async_checkpoint.sh CASE SHARDRUN SHARDTRAIN: checkpoint.async = true at 2 ranks, FP32.
#   same_files     a background save writes byte for byte the files a synchronous one does
#   one_in_flight  saves every step with slow writes: the next save waits for the one in
#                  flight (checkpoint_wait_ms in the metrics, "checkpoint wait" in the trace),
#                  and every checkpoint kept is complete and loads
#   disk_full      the second save meets a full disk: exit 1 at a step boundary naming the file
#                  and the cause, its temporaries gone, the first checkpoint loadable; under
#                  --max-restarts not restarted (the record says ENOSPC)
#   disk_full_pp   the same under pipeline stages (pp 2: rank 0 writes both stages' shards,
#                  rank 1 sends its own): the same failure and exit, the sender released at
#                  once (it waited out checkpoint.async_timeout, and the save read "gave up")
#   given_up       rank 1's writes are too slow for checkpoint.async_timeout: the save is given
#                  up, said, its temporaries removed; training goes on, later saves are
#                  synchronous, the job ends 0 with a loadable final checkpoint
#   interrupted    SIGTERM after a background save completed on disk but before the training
#                  thread looked: the interruption line names that checkpoint (it named the
#                  one before)
set -u
case_=$1 shardrun=$2 st=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ "${case_#disk_full}" != "$case_" ] && [ "${ASYNC_DISK_INSIDE:-}" != 1 ]; then
  exec env ASYNC_DISK_INSIDE=1 unshare -m "$0" "$@"  # a private mount namespace for the tmpfs
fi
dir=$(mktemp -d /tmp/shardtrain-async-XXXXXX)
trap 'umount "$dir/disk" 2> /dev/null; rm -rf "$dir"' EXIT
cd "$dir" || exit 1
model=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 training.seq_len=32
       training.global_batch=4 precision.param_dtype=fp32)
fail() { printf 'FAIL %s: %s\n' "$case_" "$*"; [ -f out ] && cat out; exit 1; }
train() { "$shardrun" -n 2 "$st" train "${model[@]}" "$@"; }
# loads CKPT: the checkpoint verifies (sizes, checksums) and loads at 2 ranks.
loads() {
  local step=${1##*step-}
  train training.max_steps=$((10#$step)) "checkpoint.resume=$1" > load.out 2>&1 ||
    { cat load.out; fail "'$1' does not load"; }
  grep -q "resumed from $1 after step" load.out || { cat load.out; fail "'$1' was not resumed"; }
}

# fills_the_disk [KEY=VALUE...]: a background save every 3 steps onto a disk with room for one
# checkpoint (1.4 MB) but not two: the second save fails, exit 1 at a step boundary with one
# message naming the file and the cause, its temporaries gone, the first checkpoint loadable.
fills_the_disk() {
  mkdir disk && mount -t tmpfs -o size=2200k shardtrain-async disk || fail "cannot mount a tmpfs"
  train training.max_steps=20 checkpoint.dir=disk/ck checkpoint.every=3 checkpoint.async=true \
    "$@" > out 2>&1
  rc=$?
  [ "$rc" = 1 ] || fail "exit $rc (want 1)"
  grep -q "^shardtrain: rank [01]: failed: checkpoint.async: the background save of step 6 failed: writing 'disk/ck/.step-00000006.tmp/.*': No space left on device" out ||
    fail "want the failed save, its file and the cause"
  [ "$(grep -c '^shardtrain: ' out)" = 1 ] || fail "want one message"
  ls -a disk/ck | grep -q '^\.step' && fail "temporaries left: $(ls -a disk/ck | tr "\n" " ")"
  [ -f disk/ck/step-00000003/COMPLETE ] || fail "the first checkpoint is gone: $(ls -a disk/ck)"
  loads disk/ck/step-00000003
}

case $case_ in
  same_files)
    train training.max_steps=10 checkpoint.dir=a checkpoint.every=3 checkpoint.async=true \
      > out 2>&1 || fail "exit $?"
    [ "$(grep -c 'in the background' out)" -ge 3 ] || fail "want 3 saves in the background"
    train training.max_steps=10 checkpoint.dir=b checkpoint.every=3 > out 2>&1 || fail "exit $?"
    diff -r a/step-00000009 b/step-00000009 || fail "the background save's files differ"
    ls -a a | grep -q '^\.step' && fail "temporaries left: $(ls -a a)"
    ;;
  one_in_flight)
    train training.max_steps=6 checkpoint.dir=ck checkpoint.every=1 checkpoint.keep=6 \
      checkpoint.async=true --test-slow-checkpoint-ms 30 metrics.file=m.jsonl \
      metrics.trace=t.json > out 2>&1 || fail "exit $?"
    waits=$(grep -o '"checkpoint_wait_ms":[0-9.e+-]*' m.jsonl | cut -d: -f2 | awk '$1 > 0' | wc -l)
    [ "$waits" -ge 1 ] || fail "no save waited for the one in flight: $(grep -o '"checkpoint_wait_ms":[0-9.e+-]*' m.jsonl)"
    grep -q '"checkpoint wait"' t.json || fail "no 'checkpoint wait' span in the trace"
    grep -q '"checkpoint stage"' t.json || fail "no 'checkpoint stage' span in the trace"
    [ "$(ls -d ck/step-* | wc -l)" = 6 ] || fail "want 6 checkpoints: $(ls ck)"
    for c in ck/step-*; do [ -f "$c/COMPLETE" ] || fail "$c is incomplete"; done
    loads ck/step-00000003
    echo "$waits saves waited for the previous one"
    ;;
  disk_full)
    fills_the_disk
    # Under --max-restarts it is not restarted: the writer thread's failure record says ENOSPC
    # (it said {"class":"other","errno":0}, so every restart was burnt on the same full disk).
    rm -rf disk/ck
    "$shardrun" -n 2 --max-restarts 2 --restart-backoff 0 "$st" train "${model[@]}" \
      training.max_steps=20 checkpoint.dir=disk/ck checkpoint.every=3 checkpoint.async=true \
      > out 2>&1
    rc=$?
    [ "$rc" = 1 ] || fail "exit $rc under --max-restarts (want 1)"
    grep -q "^shardrun: not restarting: No space left on device (free space first) fails again on a restart; the failure, after step [0-9]*: rank [01]: failed: checkpoint.async: the background save of step 6 failed: .*No space left on device" out ||
      fail "want the refusal to restart naming ENOSPC"
    grep -q '^restart 1' out && fail "restarted after a full disk"
    ;;
  disk_full_pp)
    fills_the_disk checkpoint.async_timeout=100 parallel.pp=2
    ;;
  given_up)
    # Rank 1 writes 1 unit in 0.4 s, 12 in all: past the 1 s timeout of the step-4 save.
    "$shardrun" -n 2 "$here/on_rank.sh" 1 'set -- "$@" --test-slow-checkpoint-ms 400' "$st" \
      train "${model[@]}" training.max_steps=8 checkpoint.dir=ck checkpoint.every=4 \
      checkpoint.async=true checkpoint.async_timeout=1 > out 2>&1 || fail "exit $?"
    grep -q "^checkpoint | gave up the background save of step 4 after [0-9.]*s (.*checkpoint.async_timeout = 1 s): none stays the newest complete checkpoint, and later saves are synchronous$" out ||
      fail "want the line saying the save was given up"
    grep -q '^step     8/8' out || fail "training did not go on"
    ls -a ck | grep -q '^\.step' && fail "temporaries left: $(ls -a ck)"
    [ ! -e ck/step-00000004 ] || fail "the given-up save appeared"
    loads ck/step-00000008
    ;;
  interrupted)
    # Forced, not timed: rank 0 writes 0.3 s a unit, so the step-2 save is in flight when the
    # training thread passes step 2's boundary, and rank 0 then hangs at the start of step 3
    # (a test seam) while the save completes. The hanging rank says when the writer thread has
    # recorded the save (after the marker's fsync), which is later than COMPLETE appearing.
    "$shardrun" -n 2 "$here/on_rank.sh" 0 'set -- "$@" --test-slow-checkpoint-ms 300 --test-hang-at-step 3' \
      "$st" train "${model[@]}" training.max_steps=10 checkpoint.dir=ck checkpoint.every=2 \
      checkpoint.async=true > out 2>&1 &
    launcher=$!
    recorded='^test: hanging before step 3; newest complete checkpoint: ck/step-00000002$'
    for _ in $(seq 600); do grep -q "$recorded" out && break; sleep 0.1; done
    grep -q "$recorded" out || { kill -TERM "$launcher"; fail "the step-2 save was never recorded: $(tail -5 out)"; }
    [ -f ck/step-00000002/COMPLETE ] || fail "the step-2 save was recorded before its marker"
    kill -TERM "$launcher"
    wait "$launcher"
    rc=$?
    [ "$rc" != 0 ] || fail "exit 0 after SIGTERM"
    [ "$(grep -c '^shardtrain: terminated (SIGTERM) in step 3 of 10; newest complete checkpoint: ck/step-00000002$' out)" = 1 ] ||
      fail "want one line naming ck/step-00000002, complete on disk"
    ;;
  *) echo "async_checkpoint.sh: unknown case '$case_'" >&2; exit 2 ;;
esac
echo "ok $case_"
