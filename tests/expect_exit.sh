#!/usr/bin/env bash
# expect_exit.sh CODE REGEX COMMAND...: runs COMMAND, passes when it exits with CODE (or any
# non-zero code for "nonzero") and its output (stdout and stderr) matches the extended regular
# expression REGEX. With EXPECT_ONCE=1 exactly one line of the output must match (one error
# message from a multi-rank job, not one per rank). With EXPECT_WHOLE=1, REGEX is a Perl
# regular expression matched against the whole output at once (\n matches a line break, ^ the
# output's start).
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
if [ "${EXPECT_WHOLE:-0}" = 1 ]; then
  if ! printf '%s' "$out" | grep -Pzq -- "$pattern"; then
    printf 'output does not match /%s/ as a whole:\n%s\n' "$pattern" "$out"
    exit 1
  fi
elif [ -n "$pattern" ] && ! printf '%s' "$out" | grep -Eq -- "$pattern"; then
  printf 'output does not match /%s/:\n%s\n' "$pattern" "$out"
  exit 1
fi
if [ "${EXPECT_ONCE:-0}" = 1 ]; then
  count=$(printf '%s\n' "$out" | grep -Ec -- "$pattern")
  if [ "$count" != 1 ]; then
    printf 'expected one line matching /%s/, found %s:\n%s\n' "$pattern" "$count" "$out"
    exit 1
  fi
fi
exit 0
