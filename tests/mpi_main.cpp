// main() for the multi-rank GoogleTest binaries run under mpirun by CTest.
// --expect-ranks=N: the world size must be N, or the run fails (it never skips).
// --family=NAME: the model family the training tests use (tests/support/test_family.hpp).
// A run in which no test ran (a --gtest_filter matching nothing) fails.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "api/rank_context.hpp"
#include "collectives/mpi_runtime.hpp"
#include "tests/support/shared_dir.hpp"
#include "tests/support/test_family.hpp"

namespace {
// On ranks other than 0: print only failed assertions, with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", st::mpi_world_rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }
};
}  // namespace

int main(int argc, char** argv) {
  st::mpi_init(&argc, &argv);
  st::apply_kernel_choice_from_environment();  // SHARDTRAIN_KERNELS=portable
  ::testing::InitGoogleTest(&argc, argv);
  int expected = -1;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--expect-ranks=", 15) == 0)
      expected = std::stoi(argv[i] + 15);
    else if (std::strncmp(argv[i], "--family=", 9) == 0)
      st::testing::test_family() = argv[i] + 9;
  if (expected < 1) {
    std::fprintf(stderr, "mpi test: pass --expect-ranks=N\n");
    st::abort_job("missing --expect-ranks", 1);
  }
  if (st::mpi_world_size() != expected)
    st::abort_job("this test expects " + std::to_string(expected) + " ranks but runs on " +
                  std::to_string(st::mpi_world_size()) + " (check the mpirun -np)");
  // Only rank 0 prints the progress; every rank still reports its own failures.
  if (st::mpi_world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  int result = RUN_ALL_TESTS();
  // A --gtest_filter that matches nothing (a renamed test) would otherwise pass having run
  // nothing.
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::fprintf(stderr, "rank %d: no test matched the filter\n", st::mpi_world_rank());
    result = 1;
  }
  if (result != 0) std::fprintf(stderr, "rank %d: tests failed\n", st::mpi_world_rank());
  MPI_Barrier(MPI_COMM_WORLD);  // no rank reads a shared test folder any more
  st::testing::remove_shared_dirs();
  st::mpi_finalize();
  return result;
}
