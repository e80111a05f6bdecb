// shardtrain-simgrid: the network engine as its own program (see simgrid_world.hpp for why).
// Reads one request (engine_wire.hpp) on stdin, prints the result on stdout; a failure prints
// {"error": message} and exits 1.
#include <malloc.h>

#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "simulate/engine_wire.hpp"
#include "simulate/simgrid_world.hpp"

int main() {
  // Every actor's stack is an 8 MiB allocation. glibc raises its threshold for serving such
  // blocks by mmap once one is freed, after which stacks come from the heap and the pages each
  // touched stay resident after its actor ends: the pipeline's short-lived message actors then
  // grew the engine to 1.3 GB at 1,024 ranks (260 MB with a fixed threshold). A fixed
  // threshold keeps stacks mapped and unmapped whole.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  try {
    const std::string text{std::istreambuf_iterator<char>(std::cin),
                           std::istreambuf_iterator<char>()};
    st::SimPlatform platform;
    st::MeshShape mesh;
    st::StepPlan plan;
    st::SimOptions options;
    st::request_from_json(nlohmann::json::parse(text), platform, mesh, plan, options);
    std::cout << st::result_json(st::run_simgrid_world(platform, mesh, plan, options)).dump()
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cout << nlohmann::json{{"error", e.what()}}.dump() << "\n";
    return 1;
  }
}
