#pragma once
// MPI start-up and shutdown, return-code checks, job abort, and the one communication thread
// that makes every MPI call after start-up, with its watchdog.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include "core/failure_record.hpp"

#include "collectives/work.hpp"

namespace st {

// MPI_Init_thread asking for MPI_THREAD_MULTIPLE and requiring at least SERIALIZED (all calls
// come from the communication thread, the watchdog's abort aside). Safe to call twice.
void mpi_init(int* argc, char*** argv);
// Stops the communication thread and finalizes MPI.
void mpi_finalize();
bool mpi_is_initialized();
int mpi_world_rank();
int mpi_world_size();
// The MPI library's own version line (callable before MPI_Init), e.g. "Open MPI v4.1.4".
std::string mpi_library_version();
// Ranks of the world that share this rank's node (from the shared-memory split).
int mpi_ranks_on_node();
// True when more ranks run on this machine (same kernel, whatever nodes MPI sees) than it has
// cores: then waits on messages poll politely (sleeping between polls) instead of spinning,
// so a waiting rank does not take the core from the rank it waits for.
bool mpi_machine_oversubscribed();
// True when MPI granted MPI_THREAD_MULTIPLE: then every group has its own communication thread.
bool mpi_thread_multiple();

// Throws an Error carrying MPI_Error_string, the operation and the world rank.
void check_mpi(int rc, std::string_view operation);
// Prints "shardtrain: rank R: message" to stderr and ends every rank with MPI_Abort; silently
// when another rank announced first that it ends the job (its message is the one to read), or
// a lower rank did at the same time: then this rank waits a few seconds for that rank's abort
// and ends the job itself only after.
// `kind` and `error` go into this rank's failure record for shardrun (core/failure_record).
[[noreturn]] void abort_job(const std::string& message, int code = 1,
                            FailureClass kind = FailureClass::other, int error = 0);
// Called by abort_job just before MPI_Abort (the heartbeat tells the other ranks, so that they
// do not add messages of their own while being ended). One at a time; nullptr clears it.
void set_abort_notifier(void (*notify)());
// Tells the other ranks (through the notifier) that this rank is about to end the job with its
// own message; once per process, and not at all once another rank has announced (this rank's
// failure is then taken to follow from that one). abort_job does it first; a rank may do it
// earlier, before clean-up that would make the others fail in turn (removing a shared
// temporary directory).
void announce_abort_to_peers();
// The same without a message: another rank has said it.
[[noreturn]] void abort_job_quietly(int code);

// The names service threads go by (core/thread_cpu finds them: what each costs is measured).
constexpr const char* kCommThreadName = "st-comm";
constexpr const char* kWatchdogThreadName = "st-watchdog";

// A communication thread: runs the operations submitted to it one at a time, in order, with a
// watchdog. Each process group has its own (so a slow operation of one group never delays
// another's), unless MPI lacks MPI_THREAD_MULTIPLE, when all share instance().
class CommThread {
 public:
  CommThread();
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;
  // The process's first thread: group set-up and tear-down, and every group's operations
  // without MPI_THREAD_MULTIPLE.
  static CommThread& instance();
  // A thread for a new group: its own, or instance() without MPI_THREAD_MULTIPLE.
  static std::shared_ptr<CommThread> for_new_group();
  // Stops every thread (before MPI_Finalize); each finishes what was queued first.
  static void stop_all();
  // Queues `fn`; it runs on the communication thread in submission order. If it has not
  // finished `timeout_s` seconds after submission the watchdog aborts the job, naming it
  // (timeout_s <= 0: never).
  std::shared_ptr<Work> submit(std::string description, double timeout_s, std::function<void()> fn);
  // submit + wait.
  void run(std::string description, double timeout_s, std::function<void()> fn);
  // Queues `start`, which begins a non-blocking operation (MPI_Isend, MPI_Irecv) and returns
  // its test: true once the operation is done (a failure throws). The Work completes when the
  // test says so. The thread tests every started operation between queued ones and while idle,
  // so any number may be outstanding and the operations queued behind them still run (a peer's
  // send can wait on this rank's recv posted later). The watchdog covers them as it does the
  // queue.
  using Test = std::function<bool()>;
  std::shared_ptr<Work> post(std::string description, double timeout_s,
                             std::function<Test()> start);
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace st
