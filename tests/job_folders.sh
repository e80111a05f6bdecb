#!/usr/bin/env bash
# job_folders.sh SHARDRUN SHARDTRAIN: every shardrun job has Open MPI's session directory and
# shared-memory segments to itself (jobs started together on one host once met in
# $TMPDIR/ompi.HOST.UID and /dev/shm's segment names and hung in start-up, Open MPI issue
# 7642), and nothing of them is left once the job ends: exit 0, SIGTERM to shardrun, or SIGKILL
# of shardrun (then the next shardrun removes them). TMPDIR is this test's own folder, so every
# job's temporary folder is in it; the ranks' memory maps show the segments they use.
set -u
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-folders-XXXXXX)
export TMPDIR=$dir/tmp OMP_WAIT_POLICY=passive
mkdir "$TMPDIR"
launchers=()
# The launchers first, with SIGTERM: killed, they would leave their folders to the next one.
cleanup() {
  kill -TERM "${launchers[@]}" 2> /dev/null
  wait
  pkill -KILL -f -- "metrics.file=$dir/" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
train() {  # train NAME: a long 2-rank run in the background, its launcher's pid in $launcher
  "$shardrun" -n 2 "$st" train precision.param_dtype=fp32 model.n_layer=1 training.max_steps=100000 \
    "metrics.file=$dir/$1.jsonl" > "$dir/$1.log" 2>&1 &
  launcher=$!
  launchers+=($!)
}
trained() { for _ in $(seq 600); do [ -s "$dir/$1.jsonl" ] && return 0; sleep 0.1; done; fail "$1 never trained: $(cat "$dir/$1.log")"; }
# The files under /dev/shm and $TMPDIR that the ranks of job NAME map (segments, PMIx's store).
mapped() {
  local p
  for p in $(pgrep -f -- "metrics.file=$dir/$1.jsonl"); do
    grep -oE '(/dev/shm|/tmp)/[^ ]*' "/proc/$p/maps" 2> /dev/null
  done | sort -u
}

train a
a=$launcher
train b
b=$launcher
trained a
trained b
# Two folders under TMPDIR, one per launcher (its pid inside), each with a session directory.
folders=$(grep -lx -e "$a" -e "$b" "$TMPDIR"/shardrun-*/pid 2> /dev/null | wc -l)
[ "$folders" = 2 ] || fail "want one folder per job in \$TMPDIR, found: $(ls "$TMPDIR" "$TMPDIR"/*)"
[ -z "$(ls -d "$TMPDIR"/ompi.* 2> /dev/null)" ] || fail "a session directory shared by the jobs: $(ls -d "$TMPDIR"/ompi.*)"
for job in a b; do
  maps=$(mapped $job)
  segments=$(grep -c 'vader_segment' <<< "$maps")
  [ "$segments" -ge 2 ] || fail "job $job's ranks map no shared-memory segments: $maps"
  # Every segment in the job's own folder under /dev/shm, none at /dev/shm's top level.
  grep 'vader_segment' <<< "$maps" | grep -vqE '^/dev/shm/shardrun-[^/]+/vader_segment' &&
    fail "job $job maps segments outside a folder of its own: $maps"
  eval "shm_$job=\$(grep -oE '^/dev/shm/shardrun-[^/]+' <<< \"\$maps\" | sort -u)"
done
[ "$(wc -l <<< "$shm_a")" = 1 ] && [ "$shm_a" != "$shm_b" ] ||
  fail "the jobs' segments are not each in one folder of its own: a: $shm_a, b: $shm_b"

# SIGTERM to shardrun: its folders go with it.
kill -TERM "$a"
wait "$a"
rc=$?
[ "$rc" = 143 ] || fail "exit $rc after SIGTERM, want 143: $(tail -3 "$dir/a.log")"
[ ! -e "$shm_a" ] || fail "SIGTERM left $shm_a"
[ -z "$(grep -lx "$a" "$TMPDIR"/shardrun-*/pid 2> /dev/null)" ] || fail "SIGTERM left the job's folder in \$TMPDIR"
# SIGKILL of shardrun: the job ends with it (mpirun's parent-death signal); its folders stay
# until the next shardrun, which removes them.
kill -KILL "$b"
wait "$b" 2> /dev/null
for _ in $(seq 150); do pgrep -f -- "metrics.file=$dir/" > /dev/null || break; sleep 0.1; done
[ -e "$shm_b" ] || echo "(another shardrun removed $shm_b first)"
"$shardrun" -n 2 "$st" train precision.param_dtype=fp32 model.n_layer=1 training.max_steps=1 \
  "metrics.file=$dir/c.jsonl" > "$dir/c.log" 2>&1 || fail "a 1-step run failed: $(cat "$dir/c.log")"
left=$(ls -A "$TMPDIR"; ls -d "$shm_b" 2> /dev/null)
[ -z "$left" ] || fail "left behind after the jobs: $left"
echo "each job had its own session directory and segments; nothing left after exit 0, SIGTERM or SIGKILL"
