#!/usr/bin/env bash
# resume_checks.sh SHARDTRAIN: what a resume refuses or says. A checkpoint of another
# training.global_batch or training.seed is refused (exit 2, both values named, before the
# start-up summary and the peak measurement) since samples would repeat or be skipped; one
# already past training.max_steps says there is nothing to train; an incomplete newer
# checkpoint is named as skipped; a checkpoint of another model family is refused naming both;
# a second job on the same checkpoint.dir is refused while the first holds it.
set -u
st=$1
dir=$(mktemp -d /tmp/shardtrain-resume-XXXXXX)
# The job still training is ended as a user would (SIGTERM: it exits cleanly, so OpenMP's
# registration in /dev/shm goes with it), SIGKILL only if it does not within 10 s.
stop_jobs() {
  pkill -TERM -f "checkpoint.dir=$dir/ck" 2> /dev/null || return 0
  for _ in $(seq 100); do pgrep -f "checkpoint.dir=$dir/ck" > /dev/null || return 0; sleep 0.1; done
  pkill -9 -f "checkpoint.dir=$dir/ck" 2> /dev/null
}
trap 'stop_jobs; rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
run() {  # run CODE ARGS...: shardtrain train ARGS must exit with CODE; output in $out
  local want=$1
  shift
  out=$(timeout 60 "$st" train "${tiny[@]}" "$@" 2>&1)
  local got=$?
  [ "$got" = "$want" ] || fail "expected exit $want, got $got from train $*: $out"
}
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=16 training.seq_len=16
      precision.param_dtype=fp32 "checkpoint.dir=$dir/ck" checkpoint.every=2)
run 0 training.max_steps=4 "metrics.file=$dir/m.jsonl"
cp "$dir/m.jsonl" "$dir/before.jsonl"
run 2 training.max_steps=6 training.global_batch=16 "metrics.file=$dir/m.jsonl"
cmp -s "$dir/m.jsonl" "$dir/before.jsonl" || fail "a refused resume changed metrics.file"
printf '%s' "$out" | grep -q "saved with training.global_batch = 8, this run has 16: resuming would repeat or skip training samples" || fail "$out"
# Refused before any work: no start-up summary, no peak measured.
printf '%s' "$out" | grep -q "^matmul peak\|^model:" && fail "refused only after the start-up work: $out"
run 2 training.max_steps=6 training.seed=7
printf '%s' "$out" | grep -q "saved with training.seed = 1337, this run has 7" || fail "$out"
run 2 training.max_steps=6 model.family=llama
printf '%s' "$out" | grep -q "holds a gpt2 model, but this run has model.family = llama" || fail "$out"
run 0 training.max_steps=2
printf '%s' "$out" | grep -q "nothing to train: the checkpoint resumed is after step 4 and training.max_steps = 2" || fail "$out"
cp -r "$dir/ck/step-00000004" "$dir/ck/step-00000006"
rm "$dir/ck/step-00000006/COMPLETE"
run 0 training.max_steps=5
printf '%s' "$out" | grep -q "skipped $dir/ck/step-00000006 (no COMPLETE marker: its save did not finish)" || fail "$out"
printf '%s' "$out" | grep -q "resumed from $dir/ck/step-00000004 after step 4" || fail "$out"
# A second job while the first trains: refused at once, the first job named.
"$st" train "${tiny[@]}" training.max_steps=100000 checkpoint.every=0 > "$dir/first.log" 2>&1 &
for _ in $(seq 300); do grep -q "^step" "$dir/first.log" && break; sleep 0.1; done
run 2 training.max_steps=100000
printf '%s' "$out" | grep -q "checkpoint.dir: '$dir/ck' is in use by another job (pid [0-9]* on " || fail "$out"
echo "resumes refused or explained as expected"
