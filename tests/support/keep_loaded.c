// LD_PRELOADed into the sanitized test run (tests/run-suite): dlclose does nothing, so the
// libraries a process loaded stay mapped until it exits. Open MPI unloads its components at
// MPI_Finalize; LeakSanitizer, which reports at exit, then saw their allocations as coming from
// "<unknown module>" and could only suppress them through the whole stack reaching
// libopen-pal (fast_unwind_on_malloc=0: every allocation unwound with DWARF, which made the
// sanitized tests twice as slow). Built without sanitizers: bash and python load it too.
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
