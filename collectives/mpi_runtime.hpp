#pragma once
// MPI start-up and shutdown, return-code checks, job abort, and the one communication thread
// that makes every MPI call after start-up, with its watchdog.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

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
// Ranks of the world that share this rank's node (from the shared-memory split).
int mpi_ranks_on_node();

// Throws an Error carrying MPI_Error_string, the operation and the world rank.
void check_mpi(int rc, std::string_view operation);
// Prints "shardtrain: rank R: message" to stderr and ends every rank with MPI_Abort.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

class CommThread {
 public:
  static CommThread& instance();
  // Queues `fn`; it runs on the communication thread in submission order. If it has not
  // finished `timeout_s` seconds after submission the watchdog aborts the job, naming it.
  std::shared_ptr<Work> submit(std::string description, double timeout_s, std::function<void()> fn);
  // submit + wait.
  void run(std::string description, double timeout_s, std::function<void()> fn);
  void stop();

 private:
  CommThread();
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace st
