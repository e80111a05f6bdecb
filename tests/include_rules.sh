#!/usr/bin/env bash
# include_rules.sh SOURCE_DIR: the folder rules of docs/architecture.md hold; each check must
# find nothing.
set -u
cd "$1" || exit 1
status=0
# A folder that is not there would read as "nothing found": each one named must exist.
for folder in core models collectives parallel parallel/fsdp checkpoint optim api simulate launch bench app; do
  [ -d "$folder" ] || { echo "include_rules.sh: no folder '$folder' (renamed? update the checks)"; exit 1; }
done
# Each check must find nothing, and must run: a grep that fails (a missing file, a bad pattern)
# says so on stderr, and that fails the test rather than passing as "found nothing".
check() {
  local what=$1 found errors
  shift
  errors=$(mktemp)
  found=$("$@" 2> "$errors")
  if [ -s "$errors" ]; then
    printf '%s: the check could not run:\n%s\n' "$what" "$(cat "$errors")"
    status=1
  fi
  rm -f "$errors"
  if [ -n "$found" ]; then printf '%s:\n%s\n' "$what" "$found"; status=1; fi
}
# The layers, lowest first: core < collectives < parallel (the mesh; its arithmetic,
# mesh_layout, over core/ alone; fsdp/, the FSDP runtime) < checkpoint < optim < api (the
# library) < launch (the program's commands); models/ (the families) over core/ alone, included
# by whoever builds a family's model; simulate/ beside api/, over core/, models/ and parallel/
# (the runtime's schedule it replays); bench/ and app/ on top.
check "core/ including a layer above it" grep -rnE '#include "(models|collectives|parallel|checkpoint|optim|api|simulate|launch|bench|app)/' core
check "models/ including more than core/" grep -rnE '#include "(collectives|parallel|checkpoint|optim|api|simulate|launch|bench|app)/' models
check "collectives/ including a layer above it" grep -rnE '#include "(models|parallel|checkpoint|optim|api|simulate|launch|bench|app)/' collectives
check "parallel/mesh_layout including more than core/" grep -nE '#include "((models|collectives|checkpoint|optim|api|simulate|launch|bench|app|parallel/fsdp)/|parallel/device_mesh)' parallel/mesh_layout.hpp parallel/mesh_layout.cpp
check "parallel/ including a layer above it" grep -rnE '#include "(models|checkpoint|optim|api|simulate|launch|bench|app)/' parallel
check "checkpoint/ including a layer above it" grep -rnE '#include "(models|optim|api|simulate|launch|bench|app)/' checkpoint
check "optim/ including a layer above it" grep -rnE '#include "(models|parallel|checkpoint|api|simulate|launch|bench|app)/' optim
check "api/ (the library) including the program or the simulator" grep -rnE '#include "(simulate|launch|bench|app)/' api
check "simulate/ including more than core/, models/ and parallel/" grep -rnE '#include "(collectives|checkpoint|optim|api|launch|bench|app)/' simulate
check "launch/ including bench/ or app/" grep -rnE '#include "(bench|app)/' launch
check "bench/ including app/" grep -rn '#include "app/' bench
check "SimGrid outside simulate/simgrid_*" sh -c "grep -rln 'simgrid/' core models collectives parallel checkpoint optim api simulate launch bench app | grep -v '^simulate/simgrid_'"
check "MPI called outside collectives/" grep -rln '#include <mpi.h>' core models parallel checkpoint optim api simulate launch bench app
check "environment read below the library" grep -rn getenv core models collectives parallel checkpoint optim
[ $status = 0 ] && echo "the include rules hold"
exit $status
