#pragma once
// What the multi-rank training tests share: a GPT small enough to train 20 steps in a second
// (global_batch 12 splits over 1-4 ranks), its data, and the comparison of sharded weights with
// the unsharded reference's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "collectives/mpi_process_group.hpp"
#include "launch/config.hpp"
#include "launch/sharded_trainer.hpp"
#include "tests/support/local_trainer.hpp"
#include "tests/support/test_family.hpp"

namespace st::testing {

// The world under mpirun, one per test binary.
inline MpiProcessGroup& world() {
  static auto group = MpiProcessGroup::world();
  return *group;
}

// Under the sanitizers 5 steps, not 20: every step after the warm-up runs the same code, which
// is what they check (the mesh tests at 4 ranks took 33 s there); the plain build compares all 20.
#ifdef SHARDTRAIN_SANITIZED
constexpr const char* kTestSteps = "training.max_steps=5";
#else
constexpr const char* kTestSteps = "training.max_steps=20";
#endif

inline Config test_config(std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.n_layer=2",
                                "model.n_embd=64",
                                "model.n_head=4",
                                "model.block_size=32",
                                "training.seq_len=32",
                                "training.global_batch=12",
                                kTestSteps,
                                "optimizer.warmup_steps=2",
                                "optimizer.lr=3e-3"};
  const std::vector<std::string> family = family_overrides();
  o.insert(o.end(), family.begin(), family.end());
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("tiny", o);
}

inline const Dataset& data() {
  static const Dataset d = Dataset::builtin(0.05, 32);
  return d;
}

// Largest |a - b| over every parameter: sharded (gathered; a collective) against the reference.
inline double max_weight_diff(ShardedTrainer& sharded, LocalTrainer& local) {
  double worst = 0;
  const auto& specs = local.model().param_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const Tensor got = sharded.whole_master(i);
    const float* a = got.data<float>();
    const float* b = local.params().master(i).data<float>();
    for (int64_t k = 0; k < got.numel(); ++k)
      worst = std::max(worst, double(std::fabs(a[k] - b[k])));
  }
  return worst;
}

}  // namespace st::testing
