// leak_probe: between MPI_Init and MPI_Finalize it leaks 4,096 bytes on purpose. Run by the
// sanitized build's sanitizer.leaks_reported (tests/leak_check.sh): LeakSanitizer must report
// exactly this leak, by its function, and none of Open MPI's (tests/lsan.supp; their components
// stay loaded through tests/support/keep_loaded.c).
#include <mpi.h>

#include <cstdlib>

namespace {

void* volatile g_sink;  // volatile: the allocation and the lost pointer are kept as written

__attribute__((noinline)) void leak_on_purpose() {
  g_sink = std::malloc(4096);
  g_sink = nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  leak_on_purpose();
  MPI_Finalize();
  return 0;
}
