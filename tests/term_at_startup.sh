#!/usr/bin/env bash
# term_at_startup.sh SHARDRUN SHARDTRAIN: SIGTERM to shardrun at every moment of a 2-rank run's
# start-up: 0.2, 0.5, 1, 1.5 and 3 s after it started (the moment each lands depends on the
# machine's load), and at events that pin the moments down: mpirun started, the ranks started
# (loading, MPI_Init), the start-up summary printed, training. Each time the job ends with exit
# 143 and one line saying so: shardrun's ("terminated (SIGTERM) before the job started") or
# rank 0's ("terminated (SIGTERM) before the first step" or "... in step N of M"). Was: exit
# 140 and "exited on signal 12 (User defined signal 2)" (the SIGUSR2 shardrun passes SIGTERM on
# as reached a rank before it handled it), or the job training on for 10 s to exit 1 (it reached
# mpirun before the ranks started), or exit 143 and no line; later (CI at 7300316), exit 143 and
# "exited on signal 12" (a rank that mpirun had forked but not yet started was sent it).
set -u
shardrun=$1 st=$2
dir=$(mktemp -d /tmp/shardtrain-termstart-XXXXXX)
trap 'pkill -KILL -f -- "metrics.file=$dir/" 2> /dev/null; rm -rf "$dir"' EXIT
export OMP_WAIT_POLICY=passive
failed=0
# until_seen CASE MARKER: waits for CASE's event (a delay in seconds, or a process or a line).
until_seen() {
  local i
  for ((i = 0; i < 3000; i++)); do
    case $1 in
      mpirun) pgrep -f -- "^mpirun .*$2" > /dev/null && return ;;
      ranks) pgrep -f -- "^$st .*$2" > /dev/null && return ;;
      summary) grep -q '^collective timeout' "$dir/$1.log" 2> /dev/null && return ;;
      training) [ -s "$dir/m-training.jsonl" ] && return ;;
      *) sleep "$1"; return ;;
    esac
    sleep 0.01
  done
}
# Job control: shardrun starts as a terminal's job does, SIGINT at its default. (Started in a
# script's background with SIGINT ignored, it first runs itself again with SIGINT restored;
# a SIGTERM within that exec ends it before it can trap anything: exit 143, nothing started,
# and no line.)
set -m
for case_ in 0.2 0.5 1 1.5 3 mpirun ranks summary training; do
  marker="metrics.file=$dir/m-$case_.jsonl"
  "$shardrun" -n 2 "$st" train precision.param_dtype=fp32 model.n_layer=1 training.max_steps=100000 \
    "$marker" > "$dir/$case_.log" 2>&1 &
  launcher=$!
  until_seen "$case_" "$marker"
  kill -TERM "$launcher"
  wait "$launcher"
  rc=$?
  said=$(grep -cE '^shard(train|run): terminated \(SIGTERM\) (before the job started|before the first step|in step [0-9]+ of 100000; newest complete checkpoint: none)$' "$dir/$case_.log")
  if [ "$rc" != 143 ] || [ "$said" != 1 ] || grep -q 'signal 12' "$dir/$case_.log"; then
    printf 'FAIL at %s: exit %s (want 143), %s lines saying SIGTERM (want 1):\n%s\n\n' \
      "$case_" "$rc" "$said" "$(grep -v '^step ' "$dir/$case_.log" | tail -8)"
    failed=1
  else
    printf 'ok   at %s: %s\n' "$case_" "$(grep -E '^shard(train|run): terminated' "$dir/$case_.log")"
  fi
done
exit $failed
