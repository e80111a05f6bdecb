// main() for unit_tests: GoogleTest's, after the kernel choice of SHARDTRAIN_KERNELS (so
// `SHARDTRAIN_KERNELS=portable ctest` runs every test on the portable kernels).
#include <gtest/gtest.h>

#include "api/rank_context.hpp"

int main(int argc, char** argv) {
  st::apply_kernel_choice_from_environment();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
