#include "launch/service_cost.hpp"

#include <array>

#include "collectives/mpi_runtime.hpp"
#include "core/tensor.hpp"
#include "core/thread_cpu.hpp"

namespace st {

nlohmann::json ServiceCost::json() const {
  return {{"wall_s", wall_s},
          {"heartbeat",
           {{"cpu_s", heartbeat_cpu_s},
            {"beats_sent", beats_sent},
            {"datagrams_sent", datagrams_sent},
            {"datagrams_received", datagrams_received}}},
          {"comm_cpu_s", comm_cpu_s},
          {"watchdog_cpu_s", watchdog_cpu_s},
          {"checkpoint_writer_cpu_s", writer_cpu_s}};
}

ServiceCost this_rank_service_cost(const Heartbeat* heartbeat, double wall_s, double writer_cpu_s) {
  const std::vector<ThreadCpu> threads = thread_cpu_times();
  ServiceCost c;
  c.wall_s = wall_s;
  c.heartbeat_cpu_s = thread_cpu_seconds(threads, kHeartbeatThreadName);
  c.comm_cpu_s = thread_cpu_seconds(threads, kCommThreadName);
  c.watchdog_cpu_s = thread_cpu_seconds(threads, kWatchdogThreadName);
  c.writer_cpu_s = writer_cpu_s;
  if (heartbeat) {
    const HeartbeatCounts n = heartbeat->counts();
    c.beats_sent = double(n.beats_sent);
    c.datagrams_sent = double(n.beats_sent * n.datagrams_per_beat);
    c.datagrams_received = double(n.datagrams_received);
  }
  return c;
}

ServiceCost largest_over_ranks(ProcessGroup& world, const ServiceCost& mine) {
  ServiceCost out = mine;
  const std::array<double*, 8> fields = {
      &out.wall_s,       &out.heartbeat_cpu_s, &out.comm_cpu_s,     &out.watchdog_cpu_s,
      &out.writer_cpu_s, &out.beats_sent,      &out.datagrams_sent, &out.datagrams_received};
  Tensor t = Tensor::empty("service_cost", {int64_t(fields.size())}, DType::f64);
  for (size_t i = 0; i < fields.size(); ++i) t.data<double>()[i] = *fields[i];
  AllReduceOptions largest;
  largest.op = ReduceOp::max;
  world.all_reduce(t, largest)->wait();
  for (size_t i = 0; i < fields.size(); ++i) *fields[i] = t.data<double>()[i];
  return out;
}

}  // namespace st
