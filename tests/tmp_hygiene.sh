#!/usr/bin/env bash
# tmp_hygiene.sh snapshot|check LIST: what the suite may leave behind in /tmp and /dev/shm.
# `snapshot` (the first test) lists what is there; `check` (the last) fails naming every new
# entry that is shardtrain's (/tmp/shardtrain-*, /tmp/shardrun-*, /dev/shm/shardrun-*) or
# belongs to a process that is gone: Open MPI's shared-memory segments and session
# directories, OpenMP's registrations, and any session folder of an emulated host
# (/tmp/ompi.hostN.*: shardrun --nodes keeps them in its own folder; a lost host's once stayed
# behind, 8 MB a run).
# Entries of processes still running (a second suite side by side) are not counted.
set -u
mode=$1 list=$2
entries() {
  ls -d /tmp/shardtrain-* /tmp/shardrun-* /tmp/ompi.*/pid.* /tmp/ompi.host[0-9]* \
    /dev/shm/vader_segment.* /dev/shm/shardrun-* \
    /dev/shm/__KMP_REGISTERED_LIB_* 2> /dev/null | sort
}
# The process an entry belongs to, where its name says: pid.N, __KMP_REGISTERED_LIB_N_...,
# vader_segment.HOST.JOBID.RANK (no pid: judged by whether any process maps it).
owner_alive() {
  local name=${1##*/} pid=
  case $1 in
    /tmp/ompi.*/pid.*) pid=${name#pid.} ;;
    /dev/shm/__KMP_REGISTERED_LIB_*) pid=${name#__KMP_REGISTERED_LIB_} pid=${pid%%_*} ;;
    /dev/shm/vader_segment.*) grep -qsF "$1" /proc/[0-9]*/maps; return ;;
    *) return 1 ;;
  esac
  [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null
}
case $mode in
  snapshot) entries > "$list"; echo "$(wc -l < "$list") entries before the suite" ;;
  check)
    [ -f "$list" ] || { echo "no snapshot $list: run the whole suite (the first test takes it)"; exit 1; }
    left=()
    while read -r e; do
      owner_alive "$e" || left+=("$e")
    done < <(comm -13 "$list" <(entries))
    if [ ${#left[@]} -gt 0 ]; then
      printf 'the suite left behind:\n'; ls -ld "${left[@]}"; exit 1
    fi
    echo "nothing new in /tmp or /dev/shm"
    ;;
  *) echo "usage: tmp_hygiene.sh snapshot|check LIST"; exit 2 ;;
esac
