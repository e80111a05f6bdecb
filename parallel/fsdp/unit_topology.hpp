#pragma once
// The one unit topology FSDP assumes of a model, stated here and nowhere else: the root unit 0
// (embeddings, final norm, head) is entered first and left last, because its parameters are
// used at both ends of the model; units 1..n-1 form a chain of blocks, entered in order for the
// forward and in reverse for the backward. FsdpRuntime checks every model's hook calls against
// it, so a model that nests its units differently fails loudly instead of computing with
// parameters that were never gathered.
#include <vector>

namespace st {

struct UnitTopology {
  static constexpr int kRoot = 0;
  std::vector<int> forward;   // root, 1, 2, ..., n-1
  std::vector<int> backward;  // root, n-1, ..., 1

  // The root-and-chain topology of `num_units` units (at least 1).
  static UnitTopology root_and_chain(int num_units);
  static bool is_root(int unit) { return unit == kRoot; }
  int blocks() const { return int(forward.size()) - 1; }
  // The unit whose forward runs last: the backward starts with it, so it stays gathered.
  int last_forward() const { return forward.back(); }
};

}  // namespace st
