#include "api/rank_context.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/agreement.hpp"
#include "collectives/fake_process_group.hpp"
#include "collectives/mpi_process_group.hpp"
#include "collectives/mpi_runtime.hpp"
#include "collectives/startup_deadline.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/failure_record.hpp"
#include "core/ops/elementwise.hpp"
#include "core/ops/packed_gemm.hpp"

namespace st {

bool under_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

namespace {
// This rank as the launcher told it, before MPI can say (0 when none did).
int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return 0;
}
}  // namespace

void apply_kernel_choice_from_environment() {
  const char* value = std::getenv("SHARDTRAIN_KERNELS");
  const std::string choice = value ? value : "";
  if (choice.empty() || choice == "auto") return;
  if (choice == "avx2") {
    // What a CPU with AVX2 and no AVX-512 runs: elementwise kernels at most AVX2, conversions
    // portable (the packed GEMM has no AVX-512 path to turn off).
    set_elementwise_cap(VectorTier::avx2);
    set_bf16_kernel(Bf16Kernel::portable);
    return;
  }
  if (choice != "portable")
    fail_input("SHARDTRAIN_KERNELS = '{}' must be auto, avx2 or portable", choice);
  set_packed_gemm_portable(true);
  set_elementwise_cap(VectorTier::portable);
  set_bf16_kernel(Bf16Kernel::portable);
}

RankContext::RankContext(RankContext&& other) noexcept
    : group(std::move(other.group)),
      mpi(other.mpi),
      ranks_on_node(other.ranks_on_node),
      owns_mpi_(std::exchange(other.owns_mpi_, false)) {}

RankContext& RankContext::operator=(RankContext&& other) noexcept {
  if (this != &other) {
    group = std::move(other.group);
    mpi = other.mpi;
    ranks_on_node = other.ranks_on_node;
    owns_mpi_ = std::exchange(other.owns_mpi_, false);
  }
  return *this;
}

RankContext::~RankContext() {
  if (owns_mpi_ && std::uncaught_exceptions() > 0) {
    // Freeing MPI communicators and windows is collective, and the other ranks may be elsewhere:
    // the group is kept, as it is, for the rest of the process (which ends with the exception),
    // and never destroyed (not even at exit, which may come after MPI_Finalize).
    static auto* kept_while_unwinding = new std::vector<std::unique_ptr<ProcessGroup>>;
    kept_while_unwinding->push_back(std::move(group));
    return;
  }
  group.reset();
  if (!owns_mpi_) return;
  std::fflush(stdout);  // what the program printed, before the launcher sees the rank end
  mpi_finalize();
}

namespace {

// std::terminate's handler once ranks started: an exception that escaped the program (main
// included) is reported like the program's own errors, and ends every rank, instead of an
// abort that mpirun reports as a crash without the message.
std::terminate_handler g_previous_terminate = nullptr;

[[noreturn]] void end_job_on_uncaught_exception() {
  const std::exception_ptr e = std::current_exception();
  if (!e) {
    // Not an exception (a noexcept violation, a pure virtual call): the handler before ours,
    // or abort, so a core dump or a sanitizer's trace says where.
    if (g_previous_terminate) g_previous_terminate();
    std::abort();
  }
  std::string message;
  int code = 1, error = 0;
  FailureClass kind = FailureClass::other;
  try {
    std::rethrow_exception(e);
  } catch (const ExitQuietly& quiet) {
    // Every rank agreed on a start-up failure and one of them has said it.
    if (mpi_is_initialized()) mpi_finalize();
    std::_Exit(quiet.code);
  } catch (const InputError& x) {
    message = std::string("error: ") + x.what(), code = 2, kind = FailureClass::bad_input;
  } catch (const std::exception& x) {
    message = std::string("failed: ") + x.what(), kind = classify_failure(x, error);
  } catch (...) {
    message = "failed: an exception that is not a std::exception";
  }
  if (mpi_is_initialized() && mpi_world_size() > 1) abort_job(message, code, kind, error);
  std::fflush(stdout);
  std::fprintf(stderr, "shardtrain: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

RankContext start_ranks() {
  // First, so that even a bad SHARDTRAIN_KERNELS escaping main is one message and exit 2.
  if (std::get_terminate() != end_job_on_uncaught_exception)
    g_previous_terminate = std::set_terminate(end_job_on_uncaught_exception);
  apply_kernel_choice_from_environment();
  // A failure leaves a record for shardrun's restart decision (core/failure_record.hpp).
  if (const char* dir = std::getenv("SHARDRUN_FAILURES"); dir && *dir)
    set_failure_record_folder(dir);
  RankContext ctx;
  if (under_mpirun()) {
    ctx.owns_mpi_ = !mpi_is_initialized();  // a program that started MPI itself ends it too
    const char* stall = std::getenv("SHARDTRAIN_TEST_STARTUP_STALL");
    set_startup_identity(launcher_rank(), stall ? stall : "");
    mpi_init(nullptr, nullptr);
    ctx.group = MpiProcessGroup::world();
    ctx.mpi = true;
    ctx.ranks_on_node = mpi_ranks_on_node();
  } else {
    ctx.group = std::move(FakeProcessGroup::create(1).front());
  }
  return ctx;
}

void agree_on_startup(ProcessGroup& group, const std::function<void()>& fn) {
  // The first agreement is part of the start-up's bound (collectives/startup_deadline.hpp).
  static bool first = true;
  std::optional<RankFailure> f;
  if (first && group.size() > 1) {
    first = false;
    startup_stage("agreement", "the ranks' first agreement (reading the config, data and model)");
    struct Done {
      ~Done() { startup_done(); }
    } done;
    f = agree_on_failure(group, fn);
  } else {
    f = agree_on_failure(group, fn);
  }
  if (!f) return;
  if (group.rank() == f->rank) {
    std::fflush(stdout);
    const char* kind = f->code == 2 ? "error" : "failed";
    if (f->failed == group.size())
      fmt::print(stderr, "shardtrain: {}: {}\n", kind, f->message);
    else
      fmt::print(stderr, "shardtrain: {} on rank {} of {}: {}\n", kind, group.rank(), group.size(),
                 f->message);
    std::fflush(stderr);
  }
  throw ExitQuietly{f->code};
}

int run_after_startup(const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const ExitQuietly&) {
    throw;  // every rank agreed on it
  } catch (const AgreedError& e) {
    // Every rank failed alike: rank 0 speaks and ends the job; the others wait to be ended by
    // it (or end it themselves, silently, should it not come).
    if (mpi_is_initialized() && mpi_world_size() > 1) {
      if (mpi_world_rank() == 0)
        abort_job(std::string("failed: ") + e.what(), 1, FailureClass::non_finite);
      std::this_thread::sleep_for(std::chrono::seconds(10));
      abort_job_quietly(1);
    }
    throw;
  } catch (const InputError& e) {
    if (mpi_is_initialized() && mpi_world_size() > 1)
      abort_job(std::string("error: ") + e.what(), 2, FailureClass::bad_input);
    throw;
  } catch (const std::exception& e) {
    int error = 0;
    const FailureClass kind = classify_failure(e, error);
    if (mpi_is_initialized() && mpi_world_size() > 1)
      abort_job(std::string("failed: ") + e.what(), 1, kind, error);
    throw;
  }
}

int use_threads_per_rank(int threads, int ranks_on_node) {
  if (threads == 0) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / std::max(1, ranks_on_node));
  }
  omp_set_num_threads(threads);
  return threads;
}

}  // namespace st
