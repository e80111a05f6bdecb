#!/usr/bin/env bash
# on_rank.sh RANK SETUP COMMAND...: under mpirun, runs COMMAND on every rank; on rank RANK
# alone it first evaluates the shell code SETUP (a ulimit, an ignored signal, a timed kill of
# itself) in the shell that then becomes COMMAND. Fault injection for one rank only.
set -u
rank=$1 setup=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-}" = "$rank" ]; then
  eval "$setup"
fi
exec "$@"
