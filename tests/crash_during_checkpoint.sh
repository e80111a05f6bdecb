#!/usr/bin/env bash
# crash_during_checkpoint.sh SHARDRUN SHARDTRAIN: kills a 2-rank training run with SIGKILL
# while it writes its second checkpoint (a test hook slows the writer down), then shows that the
# first checkpoint is intact, the killed save's temporary directory is removed (and said so) when
# the next run starts, and training resumes from the first checkpoint to the end.
set -u
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-crash-XXXXXX)
trap 'pkill -9 -f "checkpoint.dir=$dir" 2>/dev/null; rm -rf "$dir" "$dir.log"' EXIT
common=(model.n_layer=2 model.n_embd=64 model.n_head=4 model.block_size=32 training.seq_len=32
        training.global_batch=4 training.max_steps=6 "checkpoint.dir=$dir" checkpoint.every=3)

"$shardrun" -n 2 "$st" train --test-slow-checkpoint-ms 200 "${common[@]}" > "$dir.log" 2>&1 &
for _ in $(seq 600); do
  [ -f "$dir/step-00000003/COMPLETE" ] && [ -d "$dir/.step-00000006.tmp" ] && break
  sleep 0.1
done
if ! [ -d "$dir/.step-00000006.tmp" ]; then
  echo "the run never started its second checkpoint:"; cat "$dir.log"; exit 1
fi
# The ranks only (their command line starts with the binary): mpirun sees them die, as it would
# after a machine's crash, and cleans up after itself.
pkill -9 -f "^$st train .*checkpoint.dir=$dir"
wait
if [ -f "$dir/step-00000006/COMPLETE" ]; then
  echo "the second checkpoint completed before the kill; the test did not test anything"; exit 1
fi

out=$("$shardrun" -n 2 "$st" train "${common[@]}" 2>&1)
rc=$?
if [ $rc != 0 ] || ! printf '%s' "$out" | grep -q "resumed from $dir/step-00000003 after step 3"; then
  printf 'resume after the crash failed (exit %s):\n%s\n' "$rc" "$out"; exit 1
fi
if ! printf '%s' "$out" | grep -q "checkpoint | removed .step-00000006.tmp (.* files of an interrupted save of step-00000006)"; then
  printf 'the killed save'"'"'s temporary was not removed by name:\n%s\n' "$out"; exit 1
fi
if ls -A "$dir" | grep -q '^\.step-'; then
  echo "temporaries left behind: $(ls -A "$dir")"; exit 1
fi
if ! printf '%s' "$out" | grep -Eq "step +6/6"; then
  printf 'the resumed run did not reach step 6:\n%s\n' "$out"; exit 1
fi
[ -f "$dir/step-00000006/COMPLETE" ] || { echo "no final checkpoint after the resumed run"; exit 1; }
echo "killed during the step-6 checkpoint; resumed from step 3 and finished"
