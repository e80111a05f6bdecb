#!/usr/bin/env bash
# launcher_death.sh SHARDRUN SHARDTRAIN [--nodes 2]: SIGKILL of shardrun while its job trains
# ends the job within seconds (no rank runs on to completion), and the next shardrun removes
# what the killed one left (its emulated hosts' folder under $TMPDIR, stale shared memory).
set -u
shardrun=$1 st=$2
shift 2
dir=$(mktemp -d /tmp/shardtrain-launcher-XXXXXX)
marker="metrics.file=$dir/m.jsonl"  # names this job's processes
trap 'pkill -9 -f "$marker" 2> /dev/null; rm -rf "$dir"' EXIT
fail() { printf '%s\n' "$*"; exit 1; }
"$shardrun" -n 2 "$@" "$st" train precision.param_dtype=fp32 model.n_layer=1 \
  training.max_steps=100000 "$marker" > "$dir/log" 2>&1 &
launcher=$!
for _ in $(seq 300); do
  [ -s "$dir/m.jsonl" ] && break
  sleep 0.1
done
[ -s "$dir/m.jsonl" ] || fail "the job never trained: $(cat "$dir/log")"
# Its own emulated hosts' folder, by the pid shardrun writes there (its re-run inside the
# namespaces keeps the launcher's pid). Other tests' launchers come and go meanwhile.
own=""
if [ "$*" = "--nodes 2" ]; then
  own=$(grep -lx "$launcher" "${TMPDIR:-/tmp}"/shardrun-hosts-*/pid 2> /dev/null | head -1)
  [ -n "$own" ] || fail "no hosts folder names the launcher (pid $launcher); the test tests nothing"
  own=$(dirname "$own")
fi
kill -9 $launcher
wait $launcher 2> /dev/null
# A job that outlives its launcher for good fails by the test's CTest timeout.
while pgrep -f "$marker" > /dev/null; do sleep 0.1; done
if [ -n "$own" ]; then
  # SIGKILL left the folder behind; the next shardrun removes it. Under a parallel ctest another
  # test's shardrun can start first and remove it: that is the same behaviour, seen sooner.
  if [ -e "$own" ]; then
    "$shardrun" -n 2 --nodes 2 true || fail "the next shardrun failed"
    [ -e "$own" ] && fail "the next shardrun did not remove the stale '$own'"
  else
    echo "another shardrun removed the stale '$own' first"
  fi
fi
echo "the job ended with its launcher"
