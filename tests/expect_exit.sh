#!/usr/bin/env bash
# expect_exit.sh CODE REGEX COMMAND...: runs COMMAND, passes when it exits with CODE (or any
# non-zero code for "nonzero") and its output (stdout and stderr) matches the extended regular
# expression REGEX.
set -u
want=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
got=$?
if [ "$want" = nonzero ] && [ "$got" != 0 ]; then
  want=$got
fi
if [ "$got" != "$want" ]; then
  printf 'expected exit code %s, got %s; output:\n%s\n' "$want" "$got" "$out"
  exit 1
fi
if [ -n "$pattern" ] && ! printf '%s' "$out" | grep -Eq -- "$pattern"; then
  printf 'output does not match /%s/:\n%s\n' "$pattern" "$out"
  exit 1
fi
exit 0
