#pragma once
// Pipeline stages as contiguous runs of a model's blocks: the embedding on the first stage, the
// final norm, head and loss on the last. Either balanced (each block's cost from the model's own
// work, the embedding's and the head's added to the end stages; the largest stage's cost as
// small as it can be) or as the user gives them (`parallel.pp_layers`).
#include <string>
#include <vector>

namespace st {

struct StageRange {
  int first = 0, end = 0;  // blocks [first, end)
  int count() const { return end - first; }
  bool operator==(const StageRange&) const = default;
};

// `stages` contiguous runs of block_cost.size() blocks, at least one block each, minimizing the
// largest of (the run's block costs + first_extra on stage 0 + last_extra on the last stage);
// among the splits with that largest cost, the most even (the smallest sum of squared stage
// costs; ties to the earliest cuts: the earlier stages, which hold more micro-batches in flight
// under 1F1B, get the fewer blocks). Refuses (exit 2, naming the keys) fewer blocks than stages.
std::vector<StageRange> balance_stages(const std::vector<double>& block_cost, double first_extra,
                                       double last_extra, int stages);

// The user's split (`parallel.pp_layers`): refuses (exit 2, naming the key and the numbers) a
// list whose length is not `stages`, whose sum is not n_layer, or with a stage of no blocks.
std::vector<StageRange> stages_from_layers(const std::vector<int>& pp_layers, int n_layer,
                                           int stages);

// The largest stage's cost, as balance_stages counts it.
double largest_stage_cost(const std::vector<StageRange>& split,
                          const std::vector<double>& block_cost, double first_extra,
                          double last_extra);

// "[0-3) [3-6) [6-8)": for the start-up summary and errors.
std::string describe_stages(const std::vector<StageRange>& split);

}  // namespace st
