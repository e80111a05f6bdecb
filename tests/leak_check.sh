#!/usr/bin/env bash
# leak_check.sh SHARDRUN PROBE: the sanitized run's leak check works. tests/leak_probe.cpp leaks
# 4,096 bytes at 2 ranks: each rank's LeakSanitizer report names leak_on_purpose, and its summary
# counts that one allocation alone (Open MPI's own, suppressed by tests/lsan.supp, would add
# to it); the job fails.
set -u
. "$(dirname "$0")/support/expect.sh"
out=$("$1" -n 2 "$2" 2>&1)
rc=$?
[ "$rc" != 0 ] || fail "exit 0: no leak reported: $out"
[ "$(grep -c 'ERROR: LeakSanitizer: detected memory leaks' <<< "$out")" = 2 ] ||
  fail "want a leak report from each of the 2 ranks: $out"
grep -qE '#1 0x[0-9a-f]+ in .*leak_on_purpose' <<< "$out" ||
  fail "the report does not name leak_on_purpose: $out"
[ "$(grep -c 'SUMMARY: AddressSanitizer: 4096 byte(s) leaked in 1 allocation(s)\.' <<< "$out")" = 2 ] ||
  fail "want each rank's summary to count the probe's 4096 bytes alone: $out"
echo "leak reported at each rank, Open MPI's suppressed (exit $rc)"
