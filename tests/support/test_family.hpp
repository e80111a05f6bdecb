#pragma once
// The model family the multi-rank tests train: GPT-2, or what mpi_main's --family=NAME says, so
// the same world-size, mesh and checkpoint tests run for every family (CTest registers each).
#include <string>
#include <vector>

namespace st::testing {

inline std::string& test_family() {
  static std::string family = "gpt2";
  return family;
}

// The [model] overrides that turn the tests' small GPT into the same-sized model of the family.
inline std::vector<std::string> family_overrides() {
  if (test_family() == "llama")
    return {"model.family=llama", "model.n_kv_head=2", "model.ffn_hidden=160"};
  return {};
}

}  // namespace st::testing
