#pragma once
// checkpoint.async: a save hands the shards to a writer thread through staging copies and
// training goes on. The writer makes the copies itself, while the next step's forward and
// backward run (they only read the masters and moments); the step waits for the copies, if
// they are not done yet, before its optimizer update changes them (wait_until_staged). The writer
// writes this rank's files and commits the checkpoint over a group made for it at start-up (its own
// communicator and communication thread, as torchtitan gives async saves their own gloo group), so
// the commit's collectives never wait behind, or hold up, the training group's. Never two saves in
// flight: the next save waits for the previous.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "collectives/process_group.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {

constexpr const char* kCheckpointWriterThreadName = "st-ckpt-writer";

class AsyncCheckpointer {
 public:
  // Collective over `world` (every rank makes a commit group of its `writers`, the ranks that
  // hold one copy of the model: FsdpRuntime::model_group(), or under pipeline stages every
  // stage's, DeviceMesh::whole_model_group(); with replicas only replica 0's write). Under
  // stages it also makes a copy of `pipeline` (the training's pipeline group) for the shards
  // the other stages send pipeline rank 0's writers. The staging buffers hold
  // `states_per_span` FP32 copies of this rank's shard (the master and the optimizer's
  // moments). `timeout_s`: checkpoint.async_timeout.
  AsyncCheckpointer(ProcessGroup& world, ProcessGroup& writers, ProcessGroup* pipeline,
                    const FsdpRuntime& fsdp, int states_per_span, double timeout_s);
  ~AsyncCheckpointer();  // waits for a save in flight
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // The staging buffers' bytes on this rank, for the memory budget.
  static int64_t staging_bytes(const std::vector<UnitLayout>& units, int states_per_span);

  // Collective over the world, at a step boundary: waits for the save in flight, then agrees
  // whether any rank gave one up; if so, rank 0 removes its temporaries under `root` and
  // background saves end for this job (usable() turns false on every rank: later saves are
  // synchronous). Returns the ms spent waiting for the writer.
  double settle(const std::string& root);
  bool usable() const { return usable_; }
  // A save failed (every rank agrees): no new save starts, since the job is about to end with
  // that failure (reported by the lowest failing rank, the others waiting for its abort).
  bool failed_save_pending() const;

  // Starts the writer (after settle()): it copies `states` into the staging buffers, then
  // writes and commits them. Returns the ms the hand-over took.
  double start(const std::string& root, int64_t step, const nlohmann::json& meta, FsdpRuntime& fsdp,
               const std::vector<ShardedState>& states, SaveOptions options);
  // Before anything changes the states handed over (the optimizer update, a load): waits until
  // the writer has copied them. Returns the ms waited (0 when no copy is pending).
  double wait_until_staged();

  // The save that finished since the last call, once (wait: block until the one in flight ends).
  std::optional<BackgroundSave> finished(bool wait);
  // Seconds from start() to the writer's end, for the save finished() last returned.
  double last_duration_s() const { return last_duration_s_; }
  // The CPU seconds every writer of this job has used, those that ended.
  double writer_cpu_seconds() const { return writer_cpu_s_.load(); }

 private:
  ProcessGroup& world_;
  std::unique_ptr<ProcessGroup> commit_;
  std::unique_ptr<ProcessGroup> stages_;  // under pipeline stages, else null
  std::vector<ShardedState> staging_;     // states_per_span copies of the shard, span by span
  double timeout_s_;
  bool usable_ = true;
  std::thread writer_;
  std::shared_ptr<std::atomic<bool>> done_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex staged_mutex_;
  std::condition_variable staged_cv_;
  bool staged_ = true;     // the states handed over are copied (false while the writer copies)
  BackgroundSave result_;  // the writer's, read once it is joined
  // Joined saves not yet returned by finished(), with their writer's seconds.
  std::deque<std::pair<BackgroundSave, double>> finished_;
  int64_t abandoned_step_ = -1;  // a save given up here, not yet settled
  bool failed_ = false;          // a save failed: the job is ending
  // Joins the writer when it is done (or, with `wait`, once it is) and queues its outcome.
  void collect(bool wait);

  double started_s_ = 0, last_duration_s_ = 0;
  double writer_seconds_ = 0;  // set by the writer before it signals done
  std::atomic<double> writer_cpu_s_{0};
};

}  // namespace st
