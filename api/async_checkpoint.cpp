#include "api/async_checkpoint.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>

#include "core/thread_cpu.hpp"
#include "core/timer.hpp"
#include "core/trace.hpp"

namespace st {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int64_t AsyncCheckpointer::staging_bytes(const std::vector<UnitLayout>& units,
                                         int states_per_span) {
  int64_t elements = 0;
  for (const UnitLayout& u : units) elements += u.shard_numel;
  return elements * int64_t(sizeof(float)) * states_per_span;
}

AsyncCheckpointer::AsyncCheckpointer(ProcessGroup& world, ProcessGroup& writers,
                                     ProcessGroup* pipeline, const FsdpRuntime& fsdp,
                                     int states_per_span, double timeout_s)
    : world_(world), timeout_s_(timeout_s) {
  commit_ = writers.split(0, writers.rank(), writers.name() + "/checkpoint");
  commit_->make_interruptible();
  if (pipeline) {
    stages_ = pipeline->split(0, pipeline->rank(), pipeline->name() + "/checkpoint");
    stages_->make_interruptible();
  }
  const std::vector<ShardSpan> spans = fsdp.spans();
  for (int s = 0; s < states_per_span; ++s) {
    ShardedState copy;
    copy.name = fmt::format("staging{}", s);
    // Zeroed now, so their pages exist before the first save: faulting them in during the
    // writer's first copy made the training step beside it wait ~50 ms (tiny, 2 ranks). They
    // are in the start-up memory budget either way.
    for (const ShardSpan& span : spans)
      copy.spans.push_back(
          Tensor::zeros("checkpoint.staging." + span.name, {span.master.numel()}, DType::f32));
    staging_.push_back(std::move(copy));
  }
}

AsyncCheckpointer::~AsyncCheckpointer() {
  if (writer_.joinable()) writer_.join();
}

void AsyncCheckpointer::collect(bool wait) {
  if (!writer_.joinable() || !(wait || done_->load())) return;
  writer_.join();
  finished_.push_back({result_, writer_seconds_});
  if (result_.outcome == BackgroundSave::Outcome::abandoned) abandoned_step_ = result_.step;
  if (result_.outcome == BackgroundSave::Outcome::failed) failed_ = true;
}

bool AsyncCheckpointer::failed_save_pending() const {
  return failed_;
}

std::optional<BackgroundSave> AsyncCheckpointer::finished(bool wait) {
  collect(wait);
  if (finished_.empty()) return std::nullopt;
  const BackgroundSave done = finished_.front().first;
  last_duration_s_ = finished_.front().second;
  finished_.pop_front();
  return done;
}

double AsyncCheckpointer::settle(const std::string& root) {
  Timer waited;
  {
    TraceScope span("checkpoint wait");
    collect(true);  // its outcome stays for finished()
  }
  const double wait_ms = waited.ms();
  Tensor flag = Tensor::empty("checkpoint.abandoned", {1}, DType::i64);
  flag.data<int64_t>()[0] = abandoned_step_;
  AllReduceOptions max;
  max.op = ReduceOp::max;
  world_.all_reduce(flag, max)->wait();
  const int64_t step = flag.data<int64_t>()[0];
  if (step >= 0) {
    usable_ = false;
    if (world_.rank() == 0) remove_unfinished_save(root, step);
    abandoned_step_ = -1;
  }
  return wait_ms;
}

double AsyncCheckpointer::start(const std::string& root, int64_t step, const nlohmann::json& meta,
                                FsdpRuntime& fsdp, const std::vector<ShardedState>& states,
                                SaveOptions options) {
  ST_CHECK(!writer_.joinable(), "a background save is in flight (settle() first)");
  ST_CHECK(states.size() == staging_.size(), "{} states for {} staging buffers", states.size(),
           staging_.size());
  Timer handed;
  TraceScope span("checkpoint hand-over");
  for (size_t s = 0; s < states.size(); ++s) staging_[s].name = states[s].name;
  {
    std::lock_guard lock(staged_mutex_);
    staged_ = false;
  }
  started_s_ = now_s();
  options.deadline = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(timeout_s_));
  done_->store(false);
  // The states are the live shards: the writer copies them first (the training thread waits
  // for that before its next update), then writes and commits the copies.
  writer_ = std::thread(
      [this, root, step, meta, &fsdp, spans = fsdp.spans(), states, options, done = done_] {
        // Below the training threads: the writer takes the cores when they wait (communication,
        // the other ranks), not from them.
        ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), 19);
        name_this_thread(kCheckpointWriterThreadName);
        {
          TraceScope span("checkpoint stage");
          for (size_t s = 0; s < states.size(); ++s)
            for (size_t k = 0; k < states[s].spans.size(); ++k)
              std::memcpy(staging_[s].spans[k].raw(), states[s].spans[k].raw(),
                          states[s].spans[k].nbytes());
        }
        {
          std::lock_guard lock(staged_mutex_);
          staged_ = true;
        }
        staged_cv_.notify_all();
        result_ = save_checkpoint_in_background(root, step, meta, fsdp, spans, staging_, *commit_,
                                                stages_.get(), options);
        writer_seconds_ = now_s() - started_s_;
        timespec cpu{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        writer_cpu_s_.store(writer_cpu_s_.load() + double(cpu.tv_sec) + double(cpu.tv_nsec) * 1e-9);
        done->store(true);
      });
  return handed.ms();
}

double AsyncCheckpointer::wait_until_staged() {
  std::unique_lock lock(staged_mutex_);
  if (staged_) return 0;
  TraceScope span("checkpoint stage wait");
  Timer waited;
  staged_cv_.wait(lock, [&] { return staged_; });
  return waited.ms();
}

}  // namespace st
