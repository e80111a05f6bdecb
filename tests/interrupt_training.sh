#!/usr/bin/env bash
# interrupt_training.sh SHARDRUN SHARDTRAIN SIGNAL: a 2-rank run that has saved a checkpoint gets
# SIGNAL: INT to its whole process group, as Ctrl-C sends it, or TERM to mpirun, as a scheduler
# does. The job must end within a few seconds with one line naming the step and the newest
# complete checkpoint.
set -u
shardrun=$1 st=$2 sig=$3
dir=$(mktemp -d /tmp/shardtrain-interrupt-XXXXXX)
trap 'pkill -9 -f "checkpoint.dir=$dir" 2>/dev/null; rm -rf "$dir" "$dir.log"' EXIT
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
start=$(date +%s.%N)
if [ "$sig" = INT ]; then kill -INT -- -"$pid"; else kill -TERM "$pid"; fi
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "still running 10 s after SIG$sig"; tail -20 "$dir.log"; exit 1; fi
wait "$pid"
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
line=$(grep -E "shardtrain: (interrupted \(SIGINT\)|terminated \(SIGTERM\)) in step [0-9]+ of 100000; newest complete checkpoint: $dir/step-[0-9]{8}" "$dir.log")
if [ -z "$line" ]; then echo "no interruption line (exit $rc):"; tail -20 "$dir.log"; exit 1; fi
[ "$(printf '%s\n' "$line" | wc -l)" = 1 ] || { echo "the line came more than once:"; tail -20 "$dir.log"; exit 1; }
[ "$rc" != 0 ] || { echo "exit code 0 after SIG$sig"; exit 1; }
echo "SIG$sig: ended in ${took}s with exit $rc: $line"
