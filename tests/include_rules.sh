#!/usr/bin/env bash
# include_rules.sh SOURCE_DIR: the folder rules of docs/architecture.md hold; each check must
# find nothing.
set -u
cd "$1" || exit 1
status=0
# A folder that is not there would read as "nothing found": each one named must exist.
for folder in core collectives sharding optim simulate launch bench app; do
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
check "launch/ included below it" grep -rn '#include "launch/' core collectives sharding optim simulate
check "bench/ included outside app/" grep -rn '#include "bench/' launch core collectives sharding optim simulate
check "SimGrid outside simgrid_*" sh -c "grep -rln 'simgrid/' simulate | grep -v simgrid_"
check "sharding/ including optim/" grep -rn '#include "optim/' sharding
check "environment read below launch/" grep -rn getenv core collectives sharding optim
check "core/ including a layer above it" grep -rnE '#include "(collectives|sharding|optim|simulate)/' core
check "collectives/ including a layer above it" grep -rnE '#include "(sharding|optim|simulate)/' collectives
check "the library layer (launch/sharded_model, launch/rank_context) including launch/ or simulate/" \
  sh -c "grep -nE '#include \"(launch|simulate|bench)/' launch/sharded_model.cpp \
  launch/rank_context.cpp launch/rank_context.hpp | grep -vE 'launch/(sharded_model|rank_context).hpp'"
check "the library layer's header including more than core, collectives, sharding, optim" \
  sh -c "grep -n '#include \"' launch/sharded_model.hpp | grep -vE '\"(core|collectives|sharding|optim)/'"
[ $status = 0 ] && echo "the include rules hold"
exit $status
