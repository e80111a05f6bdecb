// A deliberately unmatched collective: rank 0 enters a barrier nobody else joins. The watchdog
// must abort the whole job within the timeout, naming the operation.
#include <chrono>
#include <thread>

#include "collectives/mpi_process_group.hpp"
#include "collectives/mpi_runtime.hpp"

int main(int argc, char** argv) {
  st::mpi_init(&argc, &argv);
  auto world = st::MpiProcessGroup::world();
  if (world->rank() == 0) {
    st::BarrierOptions options;
    options.timeout_s = 2;
    world->barrier(options)->wait();
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  st::mpi_finalize();
  return 0;  // reaching here means the watchdog failed
}
