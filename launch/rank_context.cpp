#include "launch/rank_context.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "collectives/fake_process_group.hpp"
#include "collectives/mpi_process_group.hpp"
#include "collectives/mpi_runtime.hpp"

namespace st {

bool under_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

RankContext start_ranks() {
  RankContext ctx;
  if (under_mpirun()) {
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
  int code = 0;
  std::string message;
  try {
    fn();
  } catch (const InputError& e) {
    code = 2;
    message = e.what();
  } catch (const std::exception& e) {
    code = 1;
    message = e.what();
  } catch (...) {
    code = 1;
    message = "unknown exception";
  }
  // codes[r] = rank r's exit code (0: fine); one max-reduction tells every rank everything.
  Tensor codes = Tensor::zeros("startup_status", {group.size()}, DType::i64);
  codes.data<int64_t>()[group.rank()] = code;
  group.all_reduce(codes, {.op = ReduceOp::max})->wait();
  const int64_t* all = codes.data<int64_t>();
  int first_failed = -1, failed = 0;
  for (int r = 0; r < group.size(); ++r)
    if (all[r] != 0) {
      if (first_failed < 0) first_failed = r;
      ++failed;
    }
  if (failed == 0) return;
  if (group.rank() == first_failed) {
    std::fflush(stdout);
    const char* kind = code == 2 ? "error" : "failed";
    if (failed == group.size())
      fmt::print(stderr, "shardtrain: {}: {}\n", kind, message);
    else
      fmt::print(stderr, "shardtrain: {} on rank {} of {}: {}\n", kind, group.rank(), group.size(),
                 message);
    std::fflush(stderr);
  }
  throw ExitQuietly{int(all[first_failed])};
}

int run_after_startup(const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const ExitQuietly&) {
    throw;  // every rank agreed on it
  } catch (const InputError& e) {
    if (mpi_is_initialized() && mpi_world_size() > 1)
      abort_job(std::string("error: ") + e.what(), 2);
    throw;
  } catch (const std::exception& e) {
    if (mpi_is_initialized() && mpi_world_size() > 1)
      abort_job(std::string("failed: ") + e.what(), 1);
    throw;
  }
}

}  // namespace st
