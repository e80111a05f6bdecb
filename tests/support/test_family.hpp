#pragma once
// The model family the multi-rank tests train: GPT-2, or what mpi_main's --family=NAME says, so
// the same world-size, mesh and checkpoint tests run for every family (CTest registers each).
#include <stdexcept>
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
  // Heads of their own width (8, where n_embd / n_head is 16) and the q/k norms.
  if (test_family() == "qwen3")
    return {"model.family=qwen3", "model.n_kv_head=2", "model.ffn_hidden=160", "model.head_dim=8"};
  // A family the tests do not know would silently test GPT-2 instead.
  if (test_family() != "gpt2")
    throw std::invalid_argument("--family=" + test_family() + ": no overrides for this family");
  return {};
}

}  // namespace st::testing
