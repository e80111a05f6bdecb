#include "simulate/engine.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "simulate/engine_wire.hpp"

extern char** environ;

namespace st {

std::string default_engine_path() {
  return (std::filesystem::path(this_executable()).parent_path() / "shardtrain-simgrid").string();
}

bool group_has_thread(const StepPlan& plan, GroupKind kind) {
  const int L = plan.quantized.reduce_per_node;
  switch (kind) {
    case GroupKind::reshard:
      return plan.reshard_to > 1;
    case GroupKind::node:
      return L > 1;
    case GroupKind::column:
      return L > 0;
    case GroupKind::tp:
      return plan.tp > 1;
    case GroupKind::pipeline:
      return false;  // point-to-point messages, posted by the compute thread
    default:
      return true;
  }
}

int pipeline_sends(const StepPlan& plan) {
  const PipelinePlan& pp = plan.pipeline;
  return pp.ranks > 1 ? 2 * plan.micro_batches * pp.virtual_stages : 0;
}

RankLayout rank_layout(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan) {
  return {platform.nodes,  platform.ranks_per_node,        mesh.dp_shard, mesh.dp_replicate,
          plan.reshard_to, plan.quantized.reduce_per_node, mesh.tp,       mesh.pp};
}

EngineFootprint engine_footprint(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                                 const SimOptions& options) {
  const int nodes = options.every_node ? platform.nodes
                                       : represented_nodes(rank_layout(platform, mesh, plan),
                                                           platform.nodes_per_machine);
  EngineFootprint f;
  f.simulated_ranks = nodes * platform.ranks_per_node;
  int threads = 1 + pipeline_sends(plan);  // the compute thread, pipeline messages in flight
  for (int k = 0; k < kGroupKinds; ++k) threads += group_has_thread(plan, GroupKind(k));
  f.actors = double(threads) * f.simulated_ranks;
  constexpr double KiB = 1024;
  f.bytes = 40 * KiB * KiB + f.simulated_ranks * 32 * KiB + f.actors * 12 * KiB;
  return f;
}

namespace {

// Writes all of `text` to `fd`.
void write_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("simulate: writing to the engine failed: {}", std::strerror(errno));
    done += size_t(n);
  }
}

std::string read_all(int fd) {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, size_t(n));
  }
  return text;
}

// The last non-empty line of the file `fd` (read from its start), or "".
std::string last_line(int fd) {
  lseek(fd, 0, SEEK_SET);
  std::string text = read_all(fd);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const size_t start = text.rfind('\n');
  return start == std::string::npos ? text : text.substr(start + 1);
}

}  // namespace

SimResult simulate_step(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                        const SimOptions& options) {
  ST_CHECK(mesh.world() == platform.world(), "mesh {}x{}x{} pp {} on {} ranks", mesh.dp_shard,
           mesh.dp_replicate, mesh.tp, mesh.pp, platform.world());
  ST_CHECK(mesh.tp == plan.tp, "a step plan for TP {} on a mesh of TP {}", plan.tp, mesh.tp);
  ST_CHECK(mesh.pp == plan.pipeline.ranks, "a step plan for PP {} on a mesh of PP {}",
           plan.pipeline.ranks, mesh.pp);
  ST_CHECK(plan.compute.block_forward.size() + 1 == plan.units.size() &&
               plan.compute.block_backward.size() + 1 == plan.units.size(),
           "a step plan has one block's times per unit after the root");
  const std::string engine = options.engine.empty() ? default_engine_path() : options.engine;
  if (access(engine.c_str(), X_OK) != 0)
    fail("simulate: the engine '{}' is not an executable (it is built beside shardtrain)", engine);
  // The request goes through a file (it may exceed a pipe's buffer while the engine has not
  // started reading), the result through a pipe.
  char request_path[] = "/tmp/shardtrain-simulate-XXXXXX";
  const int request_fd = mkstemp(request_path);
  if (request_fd < 0) fail("simulate: cannot create a temporary file: {}", std::strerror(errno));
  write_all(request_fd, request_json(platform, mesh, plan, options).dump());
  lseek(request_fd, 0, SEEK_SET);
  unlink(request_path);
  // The engine's own complaints go to a file, so a failure can quote its last line.
  char errors_path[] = "/tmp/shardtrain-simulate-XXXXXX";
  const int errors_fd = mkstemp(errors_path);
  if (errors_fd < 0) fail("simulate: cannot create a temporary file: {}", std::strerror(errno));
  unlink(errors_path);
  int out[2];
  if (pipe(out) != 0) fail("simulate: pipe failed: {}", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, request_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, errors_fd, 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  char* argv[] = {const_cast<char*>(engine.c_str()), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, engine.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(request_fd);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    close(errors_fd);
    fail("simulate: cannot start the engine '{}': {}", engine, std::strerror(spawned));
  }
  const std::string text = read_all(out[0]);
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string said = last_line(errors_fd);
  close(errors_fd);
  const std::string what =
      fmt::format("{} ranks as {}x{}", platform.world(), mesh.dp_shard, mesh.dp_replicate);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("error"))
    fail("the simulation of {} failed: {}", what, j["error"].get<std::string>());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object()) {
    const std::string how =
        WIFSIGNALED(status)
            ? fmt::format("was killed by signal {} ({})", WTERMSIG(status),
                          strsignal(WTERMSIG(status)))
            : fmt::format("exited with status {} without a result", WEXITSTATUS(status));
    fail(
        "the simulation of {} stopped: the engine '{}' {}{}. If memory ran out, simulate fewer "
        "ranks{}; otherwise this is a bug in the simulator: please report the command",
        what, engine, how, said.empty() ? "" : fmt::format(" (its last words: \"{}\")", said),
        options.every_node
            ? " or drop --all-nodes (nodes that behave alike are then simulated once)"
            : "");
  }
  return result_from_json(j);
}

}  // namespace st
