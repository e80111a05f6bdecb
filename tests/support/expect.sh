# Sourced by the command-line test scripts: fail MESSAGE ends the test; expect2 PATTERN
# COMMAND... passes when COMMAND exits 2 with the extended regular expression PATTERN in its
# output (the error contract: exit 2 and one message naming what is wrong).
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
expect2() {
  local pattern=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  [ "$rc" = 2 ] && printf '%s' "$out" | grep -qE -- "$pattern" ||
    fail "want exit 2 and /$pattern/ from $*, got $rc: $out"
}
