#include "collectives/mpi_runtime.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/pending_work.hpp"
#include "collectives/startup_deadline.hpp"
#include "core/error.hpp"
#include "core/liveness.hpp"
#include "core/thread_cpu.hpp"

namespace st {
namespace {
int g_ranks_on_node = 1;
bool g_thread_multiple = false;
bool g_oversubscribed = false;

// This kernel's boot id, hashed: ranks with equal ids share one machine (and its cores), even
// when MPI sees them as different nodes with different host names (emulated hosts).
long long machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return (long long)(std::hash<std::string>{}(id)&0x7fffffffffffffffULL);
}

// Ranks of the world running on this machine, from their machine ids.
int ranks_on_machine() {
  int size = 1;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  const long long mine = machine_id();
  std::vector<long long> ids(size_t(size), 0);
  check_mpi(MPI_Allgather(&mine, 1, MPI_LONG_LONG, ids.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD),
            "MPI_Allgather");
  return int(std::count(ids.begin(), ids.end(), mine));
}
}  // namespace

void mpi_init(int* argc, char*** argv) {
  int already = 0;
  MPI_Initialized(&already);
  if (already) return;
  int provided = 0;
  // A large point-to-point message (a pipeline boundary's activation) moves in fragments, only
  // 3 in flight per send by default: each further 3 wait for the sender's communication thread
  // to poll again (up to 1 ms apart while its rank computes), so a 1 MiB boundary over shared
  // memory took ~13 ms. With 64 in flight it takes ~2 ms (small at pp 2: 915 -> 850 ms a step,
  // on the 2-core AMD EPYC; FSDP's steps unchanged). A value set in the environment (or by
  // mpirun's --mca / -x) wins; one in an mca-params.conf file does not (it ranks below this).
  // Only ob1 reads it (not UCX or cm, whose transports pipeline on their own).
  setenv("OMPI_MCA_pml_ob1_send_pipeline_depth", "64", 0);
  startup_stage("mpi_init", "MPI_Init_thread (Open MPI's start-up)");
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "shardtrain: MPI_Init_thread failed with code %d\n", rc);
    std::exit(1);
  }
  g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
  if (provided < MPI_THREAD_SERIALIZED)
    abort_job(
        fmt::format("MPI granted thread level {} but shardtrain needs at least "
                    "MPI_THREAD_SERIALIZED ({}) for its communication thread",
                    provided, int(MPI_THREAD_SERIALIZED)));
  // Errors come back as return codes, which check_mpi turns into exceptions with context.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm node;
  startup_stage("node_split", "MPI_Comm_split_type (finding the ranks that share a node)");
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_size(node, &g_ranks_on_node), "MPI_Comm_size");
  MPI_Comm_free(&node);
  g_oversubscribed = ranks_on_machine() > int(std::max(1u, std::thread::hardware_concurrency()));
  startup_done();
}

bool mpi_machine_oversubscribed() {
  return g_oversubscribed;
}

bool mpi_thread_multiple() {
  return g_thread_multiple;
}

void mpi_finalize() {
  if (!mpi_is_initialized()) return;
  CommThread::stop_all();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

bool mpi_is_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int mpi_world_rank() {
  int r = 0;
  if (mpi_is_initialized()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string line(text, size_t(length));
  line = line.substr(0, line.find_first_of("\r\n"));
  return line.substr(0, line.find(", package"));
}

int mpi_world_size() {
  int n = 1;
  if (mpi_is_initialized()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int mpi_ranks_on_node() {
  return g_ranks_on_node;
}

void check_mpi(int rc, std::string_view operation) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail("{} failed on rank {}: {}", operation, mpi_world_rank(),
       std::string_view(text, size_t(length)));
}

namespace {
std::atomic<void (*)()> g_abort_notifier{nullptr};
constexpr int kAnnouncedAbortGraceS = 5;
constexpr int kLowerRankFirstMs = 1000;
std::atomic<bool> g_first_to_fail{false};  // announced before hearing of another's failure
}  // namespace

void set_abort_notifier(void (*notify)()) {
  g_abort_notifier.store(notify);
}

void announce_abort_to_peers() {
  static std::atomic<bool> announced{false};
  if (announced.exchange(true)) return;
  // A rank that heard another's notice first fails because of it: that one speaks.
  if (liveness::peer_failed()) return;
  g_first_to_fail.store(true);
  if (auto notify = g_abort_notifier.load()) notify();
}

void abort_job(const std::string& message, int code, FailureClass kind, int error) {
  announce_abort_to_peers();
  // Ranks that fail alike at the same moment (a shared file truncated under them) each announce
  // before hearing the others: a rank above 0 gives a lower one a moment to be heard first,
  // so the job prints one message, the lowest rank's (cli.token_file_truncated saw two).
  if (g_first_to_fail.load() && mpi_world_rank() > 0)
    for (int waited_ms = 0;
         waited_ms < kLowerRankFirstMs && !liveness::peer_failed_below(mpi_world_rank());
         waited_ms += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!g_first_to_fail.load() || liveness::peer_failed_below(mpi_world_rank())) {
    // The rank that announced its abort is about to print why and call MPI_Abort. Aborting
    // first here would let mpirun kill it before its message is out (cli.disk_full saw no
    // message at all), so give it time; end the job quietly only if it never does.
    std::this_thread::sleep_for(std::chrono::seconds(kAnnouncedAbortGraceS));
    abort_job_quietly(code);
  }
  record_failure(kind, error, message, mpi_world_rank());
  std::fflush(stdout);
  std::fprintf(stderr, "shardtrain: rank %d: %s\n", mpi_world_rank(), message.c_str());
  std::fflush(stderr);
  if (mpi_is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void abort_job_quietly(int code) {
  std::fflush(stdout);
  if (mpi_is_initialized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

struct CommThread::State {
  using Clock = std::chrono::steady_clock;
  struct Task {
    std::shared_ptr<PendingWork> work;
    std::function<void()> fn;
    std::function<Test()> start;  // set for a posted operation (fn is then empty)
    Clock::time_point deadline;
  };
  struct Started {
    std::shared_ptr<PendingWork> work;
    Test test;
    Clock::time_point deadline;
  };
  std::mutex mutex;
  std::condition_variable wake;   // new task or stop
  std::condition_variable watch;  // the watchdog's periodic wait
  std::deque<Task> queue;         // front is running or next
  std::vector<Started> started;   // posted operations not yet done, in posting order
  bool stopping = false;
  std::thread worker, watchdog;

  void stop() {
    {
      std::lock_guard lock(mutex);
      if (stopping) return;
      stopping = true;
    }
    wake.notify_all();
    watch.notify_all();
    if (worker.joinable()) worker.join();
    if (watchdog.joinable()) watchdog.join();
  }

  // Done when stopping and nothing is queued or outstanding (under the mutex).
  bool finished() const { return stopping && queue.empty() && started.empty(); }

  // Runs a queued task (not under the mutex): its function, or the start of a posted
  // operation, which joins `started` unless it failed to start.
  void run_task(Task& task) {
    std::exception_ptr error;
    task.work->mark_started();
    Test test;
    try {
      if (task.start)
        test = task.start();
      else
        task.fn();
    } catch (...) {
      error = std::current_exception();
    }
    const bool outstanding = test && !error;
    {
      std::lock_guard lock(mutex);
      queue.pop_front();
      if (outstanding) started.push_back({task.work, std::move(test), task.deadline});
    }
    if (!outstanding) task.work->finish(error);
  }

  // Tests every outstanding operation once; true when one finished.
  bool test_started() {
    std::vector<Started> now;
    {
      std::lock_guard lock(mutex);
      now = started;
    }
    std::vector<std::pair<std::shared_ptr<PendingWork>, std::exception_ptr>> done;
    for (Started& s : now) {
      try {
        if (s.test()) done.push_back({s.work, nullptr});
      } catch (...) {
        done.push_back({s.work, std::current_exception()});
      }
    }
    if (done.empty()) return false;
    {
      std::lock_guard lock(mutex);
      for (const auto& d : done)
        std::erase_if(started, [&](const Started& s) { return s.work == d.first; });
    }
    for (auto& [work, error] : done) work->finish(error);
    return true;
  }

  void work_loop() {
    name_this_thread(kCommThreadName);
    // While operations are outstanding, the idle thread tests them at growing intervals
    // (10 us to 1 ms, back to 10 us once one finishes or a task arrives).
    auto pause = std::chrono::microseconds(10);
    for (;;) {
      Task task;
      bool have_task = false;
      {
        std::unique_lock lock(mutex);
        const auto ready = [&] { return stopping || !queue.empty(); };
        if (started.empty())
          wake.wait(lock, ready);
        else if (!ready())
          wake.wait_for(lock, pause, ready);
        if (queue.empty() && finished()) return;
        if (!queue.empty()) {
          task = queue.front();  // stays queued (for the watchdog) until it ran
          have_task = true;
        }
      }
      if (have_task) {
        run_task(task);
        pause = std::chrono::microseconds(10);
      }
      bool outstanding = false;
      {
        std::lock_guard lock(mutex);
        outstanding = !started.empty();
      }
      if (!outstanding) continue;
      if (test_started())
        pause = std::chrono::microseconds(10);
      else if (!have_task)
        pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  void watchdog_loop() {
    name_this_thread(kWatchdogThreadName);
    std::unique_lock lock(mutex);
    while (!finished()) {
      watch.wait_for(lock, std::chrono::milliseconds(50));
      const auto now = Clock::now();
      auto check = [&](const std::shared_ptr<PendingWork>& work, Clock::time_point deadline) {
        if (now > deadline)
          abort_job(fmt::format("watchdog: {} did not complete within its timeout; a rank is "
                                "missing from it, hung or dead. Aborting the job.",
                                work->description()),
                    1, FailureClass::timeout);
      };
      for (const Task& t : queue) check(t.work, t.deadline);
      for (const Started& s : started) check(s.work, s.deadline);
    }
  }
};

namespace {
// Every communication thread of the process, so MPI_Finalize comes after all have stopped.
std::mutex g_threads_mutex;
std::vector<std::weak_ptr<CommThread::State>>& all_threads() {
  static std::vector<std::weak_ptr<CommThread::State>> threads;
  return threads;
}
}  // namespace

CommThread::CommThread() : state_(std::make_shared<State>()) {
  state_->worker = std::thread([s = state_] { s->work_loop(); });
  state_->watchdog = std::thread([s = state_] { s->watchdog_loop(); });
  std::lock_guard lock(g_threads_mutex);
  all_threads().push_back(state_);
}

CommThread::~CommThread() {
  stop();
}

CommThread& CommThread::instance() {
  static CommThread thread;
  return thread;
}

std::shared_ptr<CommThread> CommThread::for_new_group() {
  if (mpi_thread_multiple()) return std::make_shared<CommThread>();
  // Without MPI_THREAD_MULTIPLE only one thread may call MPI: every group shares it.
  return std::shared_ptr<CommThread>(&instance(), [](CommThread*) {});
}

void CommThread::stop_all() {
  std::vector<std::shared_ptr<State>> live;
  {
    std::lock_guard lock(g_threads_mutex);
    for (auto& w : all_threads())
      if (auto s = w.lock()) live.push_back(std::move(s));
    all_threads().clear();
  }
  for (auto& s : live) s->stop();
}

namespace {
CommThread::State::Clock::time_point deadline_after(double timeout_s) {
  using Clock = CommThread::State::Clock;
  // timeout_s <= 0: no watchdog (the caller waits with a deadline of its own: Work::wait_for).
  if (timeout_s <= 0) return Clock::time_point::max();
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}
}  // namespace

std::shared_ptr<Work> CommThread::submit(std::string description, double timeout_s,
                                         std::function<void()> fn) {
  liveness::note_progress();
  auto work = std::make_shared<PendingWork>(std::move(description));
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) fail("{}: the communication thread has stopped", work->description());
    state_->queue.push_back({work, std::move(fn), nullptr, deadline_after(timeout_s)});
  }
  state_->wake.notify_one();
  return work;
}

std::shared_ptr<Work> CommThread::post(std::string description, double timeout_s,
                                       std::function<Test()> start) {
  liveness::note_progress();
  auto work = std::make_shared<PendingWork>(std::move(description));
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stopping) fail("{}: the communication thread has stopped", work->description());
    state_->queue.push_back({work, nullptr, std::move(start), deadline_after(timeout_s)});
  }
  state_->wake.notify_one();
  return work;
}

void CommThread::run(std::string description, double timeout_s, std::function<void()> fn) {
  submit(std::move(description), timeout_s, std::move(fn))->wait();
}

void CommThread::stop() {
  state_->stop();
}

}  // namespace st
