#pragma once
// What the services beside the training loop cost while it ran: the CPU time of each service
// thread (the heartbeat, the communication threads with the collectives they run, the
// collectives' watchdog, the background checkpoint writer) and the heartbeat's datagrams. The
// safety nets are meant to be nearly free; this is how a run shows that they were.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "collectives/heartbeat.hpp"
#include "collectives/process_group.hpp"

namespace st {

struct ServiceCost {
  double wall_s = 0;  // how long the services ran
  double heartbeat_cpu_s = 0, comm_cpu_s = 0, watchdog_cpu_s = 0, writer_cpu_s = 0;
  double beats_sent = 0, datagrams_sent = 0, datagrams_received = 0;
  // {"wall_s": ..., "heartbeat": {"cpu_s", "beats_sent", "datagrams_sent",
  // "datagrams_received"}, "comm_cpu_s": ..., "watchdog_cpu_s": ..., "checkpoint_writer_cpu_s"}
  nlohmann::json json() const;
};

// This rank's cost over `wall_s` seconds: `heartbeat` may be null (off), `writer_cpu_s` is the
// background writer's (it ends after each save, so it keeps its own count).
ServiceCost this_rank_service_cost(const Heartbeat* heartbeat, double wall_s, double writer_cpu_s);

// Collective over `world`: the largest of each figure over the ranks.
ServiceCost largest_over_ranks(ProcessGroup& world, const ServiceCost& mine);

}  // namespace st
