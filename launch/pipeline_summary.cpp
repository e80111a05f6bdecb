#include "launch/pipeline_summary.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "core/memory_stats.hpp"

namespace st {

void print_pipeline_summary(Session& s) {
  const PipelineRuntime* p = s.trainer->sharded().pipeline();
  if (!p) return;
  const Model& model = s.trainer->model();
  const int M = int(s.config.training.micro_batches);
  const PipelineSchedule schedule(p->options().schedule,
                                  {p->ranks(), p->options().virtual_stages, M});
  // Equal forward, input-gradient and weight-gradient times per stage: each schedule's
  // textbook bubble (docs/parallelism.md has the formulas).
  fmt::print(
      "pipeline: {} | each stage's units gathered once a step and kept, their gradients "
      "reduced once; activations and their gradients cross stages in {}\n",
      schedule.describe(), dtype_name(p->options().wire_dtype));
  std::vector<std::string> stages;
  for (int stage = 0; stage < p->stages(); ++stage) {
    const StageBlocks b = p->blocks(stage);
    int64_t params = 0;
    for (const ParamSpec& spec : model.param_specs()) {
      const bool root = spec.unit == 0;
      const bool mine = root ? (b.first_stage || b.last_stage)
                             : spec.unit >= model.unit_of_block(b.first) &&
                                   spec.unit < model.unit_of_block(b.end - 1) + 1;
      if (mine) params += spec.numel();
    }
    std::string ends = b.first_stage ? " + embedding" : "";
    if (b.last_stage) ends += " + head and loss";
    stages.push_back(fmt::format("{}: blocks [{}-{}){} on pipeline rank {}, {:.2f}M parameters",
                                 stage, b.first, b.end, ends, stage % p->ranks(),
                                 double(params) / 1e6));
  }
  fmt::print("stages: {}\n", fmt::join(stages, " | "));
}

}  // namespace st
