#pragma once
// metrics.trace: records the steps in metrics.trace_steps on every rank and merges the ranks'
// spans into one Chrome trace-event JSON file (one process per rank; a compute and a
// communication thread track each), with the ranks' clocks aligned at start-up.
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/process_group.hpp"
#include "core/trace.hpp"
#include "launch/config.hpp"

namespace st {

class TraceSession {
 public:
  // Collective (measures the clock offsets). An empty `path` makes a session that does nothing.
  TraceSession(ProcessGroup& group, std::string path, StepRange steps);
  ~TraceSession();
  bool enabled() const { return !path_.empty(); }
  // Around training step `step` (0-based): recording is on for the steps asked for.
  void begin_step(int64_t step);
  void end_step(int64_t step);
  // Collective: gathers every rank's spans to rank 0, which writes the file. Returns the number
  // of spans written (on rank 0).
  int64_t write();

 private:
  ProcessGroup& group_;
  std::string path_;
  StepRange steps_;
  double offset_us_ = 0;  // add to this rank's times to get rank 0's clock
  double origin_us_ = 0;  // rank 0's time at start-up: the trace's zero
  TraceRecorder recorder_;
};

}  // namespace st
