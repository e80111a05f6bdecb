#include "simulate/simgrid_world.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <simgrid/s4u.hpp>
#include <tuple>

#include "core/error.hpp"
#include "simulate/replay.hpp"
#include "simulate/symmetry.hpp"

namespace st {
namespace {

namespace sg4 = simgrid::s4u;
constexpr double kSmallMessageBytes = 64 * 1024;  // the runtime's switch to MPI's algorithms

// One group a rank belongs to: its members (world ranks, of which the represented ones are
// simulated: symmetry.hpp) and the rank's place among them.
struct GroupView {
  GroupKind kind = GroupKind::shard;
  GroupShape shape;
  bool one_node = true;
  sg4::BarrierPtr barrier;  // for the shared-memory window (a one-node group is simulated whole)
  int size() const { return shape.size; }
};

struct Op {
  CollectiveCall call;
  int handle;
};

struct RankState {
  int rank = 0;
  GroupView groups[kGroupKinds];  // by GroupKind
  // One communication thread per group, as the runtime has (each ProcessGroup its own): the
  // shard group's, the replica group's and the world's queues run concurrently.
  std::deque<Op> queue[kGroupKinds];
  sg4::SemaphorePtr queued[kGroupKinds];
  sg4::MutexPtr mutex;
  sg4::ConditionVariablePtr finished;
  std::vector<char> done;
  // Pipeline receives in flight: handle -> the message's arrival.
  std::map<int, sg4::SemaphorePtr> receiving;
  double exposed = 0, tp_exposed = 0, compute = 0, end = 0;
  double pp_time = 0, pp_compute = 0;
  std::string longest_wait;
};

class World {
 public:
  World(const SimPlatform& p, MeshShape mesh, const StepPlan& plan, const SimOptions& o)
      : platform_(p),
        plan_(plan),
        options_(o),
        layout_(rank_layout(p, mesh, plan)),
        folding_(layout_,
                 o.every_node ? p.nodes : represented_nodes(layout_, p.nodes_per_machine)) {}

  SimResult run();
  // Communication actors per rank, one per group as the runtime has a thread per group: the
  // reshard groups' only with reshard_to, the node and column groups' only with hierarchical
  // quantized reductions (a node of more than one rank for the node groups).
  bool active(GroupKind kind) const { return group_has_thread(plan_, kind); }
  int comm_groups() const {
    int n = 0;
    for (int k = 0; k < kGroupKinds; ++k) n += active(GroupKind(k));
    return n;
  }

 private:
  void build_platform();
  void build_groups();
  int node_of(int rank) const { return rank / platform_.ranks_per_node; }
  // A represented rank's host (the simulated ranks are numbered apart from the job's: under
  // pipeline stages they are k nodes of every stage, not a prefix) and machine's CPU.
  sg4::Host* host_of(int rank) const { return hosts_[size_t(folding_.simulated_index(rank))]; }
  sg4::Host* cpu_of(int rank) const {
    const int node = folding_.simulated_index(rank) / platform_.ranks_per_node;
    return cpus_[size_t(node / platform_.nodes_per_machine)];
  }
  double reduce_extra(int a, int b) const {
    const PlatformLinks& l = platform_.links;
    return node_of(a) == node_of(b) ? std::max(0.0, l.intra_reduce.beta - l.intra_gather.beta)
                                    : std::max(0.0, l.inter_reduce.beta - l.inter_gather.beta);
  }
  // `seconds` of one thread's work on the rank's machine: on its shared cores when they are
  // modelled (a communication thread's copies and reductions compete with compute), else time.
  void cpu_work(int rank, double seconds) {
    if (cpus_.empty()) {
      sg4::this_actor::sleep_for(seconds);
      return;
    }
    sg4::ExecPtr exec = sg4::this_actor::exec_init(seconds);
    exec->set_host(cpu_of(rank));
    exec->start();
    exec->wait();
  }
  // The messages from one rank to another in one group, in order: a message starts once its
  // receiver has reached it (a rendezvous, as MPI's large messages), and moves between the
  // hosts of the link class it crosses.
  struct Channel {
    sg4::SemaphorePtr receiver_ready = sg4::Semaphore::create(0);
    sg4::SemaphorePtr delivered = sg4::Semaphore::create(0);
    double start = 0, finish = 0;  // of the last message
  };
  Channel& channel(int group, int from, int to) {
    return channels_.try_emplace(std::tuple(group, from, to)).first->second;
  }
  // The host a message from `a` to `b` leaves from: its own NIC when it crosses nodes and each
  // rank has one, else the rank's host.
  sg4::Host* host_for(int a, int b) const {
    return !nics_.empty() && node_of(a) != node_of(b) ? nics_[size_t(folding_.simulated_index(a))]
                                                      : host_of(a);
  }
  void comm_loop(RankState& s, int group);
  // Pipeline messages (ReplayBackend::send and recv): `handle` completes when the message has
  // arrived. A send starts once its receive is posted (MPI's rendezvous; the runtime posts its
  // receives ahead) and moves from the sender's host to the receiver's, beside everything else.
  void post_send(RankState& s, int to, int tag, double bytes, int handle);
  sg4::SemaphorePtr post_recv(RankState& s, int from, int tag);
  void run_collective(RankState& s, const CollectiveCall& call);
  // Returns the messages' own transfer time (from when both sides were ready).
  double exchange(RankState& s, const GroupView& g, int to, int from, double bytes, double extra);
  void ring(RankState& s, const GroupView& g, int steps, double chunk, int reduce_steps,
            double step_extra = 0);
  void recursive_doubling(RankState& s, const GroupView& g, double bytes, bool grows);
  void compute_actor(RankState& s);
  void record(int rank, bool comm, std::string name, double begin) {
    if (rank < options_.timeline_ranks)
      result_.timeline.push_back({rank, comm, std::move(name), begin, sg4::Engine::get_clock()});
  }

  const SimPlatform& platform_;
  const StepPlan& plan_;
  SimOptions options_;
  RankLayout layout_;
  Folding folding_;  // the nodes simulated; the others behave as they do
  std::vector<sg4::Host*> hosts_;
  std::vector<sg4::Host*> cpus_;  // one per machine, when its cores are shared
  std::vector<std::unique_ptr<RankState>> ranks_;
  SimResult result_;
  std::vector<sg4::Host*> nics_;  // one per rank, when each rank has its own NIC
  std::map<std::tuple<int, int, int>, Channel> channels_;
  struct Message {
    sg4::SemaphorePtr posted = sg4::Semaphore::create(0);
    sg4::SemaphorePtr delivered = sg4::Semaphore::create(0);
  };
  std::map<std::tuple<int, int, int>, Message> messages_;  // by (from, to, tag)
};

void World::build_platform() {
  const PlatformLinks& l = platform_.links;
  auto bandwidth = [](const AlphaBeta& ab) { return ab.beta > 0 ? 1.0 / ab.beta : 1e15; };
  auto* fabric = sg4::create_star_zone("fabric");
  // The inter-node message latency is the two rank links' plus the two node links'.
  const double node_latency = std::max(0.0, (l.inter_gather.alpha - l.intra_gather.alpha) / 2);
  const double node_bw = bandwidth(l.inter_gather);
  sg4::Link* core = nullptr;
  // The simulated nodes' share of the core: each node's flows see the same oversubscription.
  // With a NIC per rank, node_bw is each rank's NIC.
  const int nodes = folding_.nodes();
  const int links_into_core = l.nic_per_rank ? folding_.ranks() : nodes;
  if (l.fabric == FabricKind::fat_tree && platform_.nodes > 1)
    core = fabric->create_link("core", links_into_core * node_bw / l.oversubscription);
  for (int n = 0; n < nodes; ++n) {
    auto* node = sg4::create_star_zone(fmt::format("node{}", n));
    node->set_parent(fabric);
    auto* gateway = node->create_router(fmt::format("gw{}", n));
    for (int k = 0; k < platform_.ranks_per_node; ++k) {
      const int r = n * platform_.ranks_per_node + k;
      auto* host = node->create_host(fmt::format("rank{}", r), 1e9);
      auto* link =
          node->create_split_duplex_link(fmt::format("rank{}", r), bandwidth(l.intra_gather))
              ->set_latency(l.intra_gather.alpha / 2);
      node->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                      {{link, sg4::LinkInRoute::Direction::UP}}, true);
      hosts_.push_back(host);
    }
    node->seal();
    auto* nic = fabric->create_split_duplex_link(fmt::format("node{}", n), node_bw)
                    ->set_latency(node_latency);
    std::vector<sg4::LinkInRoute> up = {{nic, sg4::LinkInRoute::Direction::UP}};
    if (core) up.emplace_back(core);
    fabric->add_route(node->get_netpoint(), nullptr, gateway, nullptr, up, true);
  }
  // A NIC per rank (GPU pods: one per accelerator): messages between nodes leave from the
  // rank's NIC host, through its own link into the fabric, never through the node's links.
  if (l.nic_per_rank && platform_.nodes > 1) {
    auto* rails = sg4::create_star_zone("nics");
    rails->set_parent(fabric);
    for (int r = 0; r < folding_.ranks(); ++r) {
      auto* host = rails->create_host(fmt::format("nic{}", r), 1e9);
      auto* link = rails->create_split_duplex_link(fmt::format("nic{}", r), node_bw)
                       ->set_latency(l.inter_gather.alpha / 2);
      std::vector<sg4::LinkInRoute> up = {{link, sg4::LinkInRoute::Direction::UP}};
      if (core) up.emplace_back(core);
      rails->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, up, true);
      nics_.push_back(host);
    }
    rails->seal();
  }
  // The machines' CPUs: compute executes there, shared by the machine's ranks.
  if (platform_.machine_cores > 0) {
    auto* cpus = sg4::create_full_zone("cpus");
    cpus->set_parent(fabric);
    const int machines = (nodes + platform_.nodes_per_machine - 1) / platform_.nodes_per_machine;
    for (int m = 0; m < machines; ++m)
      cpus_.push_back(
          cpus->create_host(fmt::format("cpu{}", m), 1.0)->set_core_count(platform_.machine_cores));
    cpus->seal();
  }
  fabric->seal();
}

void World::build_groups() {
  std::map<int, sg4::BarrierPtr> barriers;  // by group id, for the groups inside one node
  for (int i = 0; i < folding_.ranks(); ++i) {
    const int r = folding_.real_rank(i);
    auto s = std::make_unique<RankState>();
    s->rank = r;
    for (int k = 0; k < kGroupKinds; ++k) {
      const GroupKind kind = GroupKind(k);
      GroupView& g = s->groups[int(kind)];
      g.kind = kind;
      g.shape = layout_.group(r, kind);
      g.one_node = node_of(g.shape.first) == node_of(g.shape.member(g.shape.size - 1));
      if (g.one_node) {
        sg4::BarrierPtr& b = barriers[g.shape.id];
        if (!b) b = sg4::Barrier::create(unsigned(g.size()));
        g.barrier = b;
      }
    }
    for (auto& q : s->queued) q = sg4::Semaphore::create(0);
    s->mutex = sg4::Mutex::create();
    s->finished = sg4::ConditionVariable::create();
    ranks_.push_back(std::move(s));
  }
}

// One message to `to` and one from `from` at once (a ring or doubling step), then the
// reduction of what arrived when `extra` (s per byte) is non-zero.
double World::exchange(RankState& s, const GroupView& g, int to, int from, double bytes,
                       double extra) {
  Channel& out = channel(g.shape.id, s.rank, to);
  Channel& in = channel(g.shape.id, from, s.rank);
  in.receiver_ready->release();
  out.receiver_ready->acquire();
  sg4::CommPtr send = sg4::Comm::sendto_init(host_for(s.rank, to), host_for(to, s.rank))
                          ->set_payload_size(uint64_t(std::llround(bytes)));
  send->start();
  // The stack's CPU work for what crosses nodes, beside the transfer, on the shared cores.
  const double stack_bytes =
      (node_of(to) != node_of(s.rank) ? bytes : 0) + (node_of(from) != node_of(s.rank) ? bytes : 0);
  sg4::ExecPtr stack;
  if (!cpus_.empty() && platform_.links.inter_cpu_per_byte > 0 && stack_bytes > 0) {
    stack = sg4::this_actor::exec_init(stack_bytes * platform_.links.inter_cpu_per_byte);
    stack->set_host(cpu_of(s.rank));
    stack->start();
  }
  send->wait();
  out.start = send->get_start_time();
  out.finish = send->get_finish_time();
  out.delivered->release();
  in.delivered->acquire();
  if (stack) stack->wait();
  const double transfer = std::max(out.finish - out.start, in.finish - in.start);
  if (extra > 0) cpu_work(s.rank, bytes * extra);
  (node_of(s.rank) == node_of(to) ? result_.intra_bytes : result_.inter_bytes) += bytes;
  result_.messages += 1;
  return transfer;
}

// `steps` ring steps of `chunk` bytes; the first `reduce_steps` reduce what they receive.
// `step_extra`: seconds each step takes beyond its transfer (MPI's all-reduce, measured).
void World::ring(RankState& s, const GroupView& g, int steps, double chunk, int reduce_steps,
                 double step_extra) {
  const int right = folding_.ring_right(s.rank, g.kind), left = folding_.ring_left(s.rank, g.kind);
  const double extra = reduce_extra(left, s.rank);
  const int simulated =
      options_.max_ring_steps > 0 ? std::min(steps, std::max(2, options_.max_ring_steps)) : steps;
  double transfer = 0;
  for (int k = 0; k < simulated; ++k) {
    transfer += exchange(s, g, right, left, chunk, k < reduce_steps ? extra : 0);
    if (step_extra > 0) sg4::this_actor::sleep_for(step_extra);
  }
  if (simulated < steps) {
    // The steps not simulated move the same bytes over the same links while the same flows
    // share them: each takes the simulated steps' mean transfer time (waits for a late
    // neighbour excluded: they would compound from one operation to the next), and its
    // reduction if it reduces.
    const int rest = steps - simulated, rest_reducing = std::max(0, reduce_steps - simulated);
    sg4::this_actor::sleep_for((transfer / simulated + step_extra) * rest);
    if (rest_reducing > 0) cpu_work(s.rank, rest_reducing * chunk * extra);
    (node_of(s.rank) == node_of(right) ? result_.intra_bytes : result_.inter_bytes) += chunk * rest;
  }
}

// ceil(log2 p) rounds with partner index ^ 2^k (skipped past the group's end); an all-gather
// doubles what it sends each round, an all-reduce sends the whole buffer.
void World::recursive_doubling(RankState& s, const GroupView& g, double bytes, bool grows) {
  const int p = g.size();
  double chunk = grows ? bytes / p : bytes;
  for (int bit = 1; bit < p; bit <<= 1) {
    const int peer = folding_.doubling_peer(s.rank, g.kind, bit);
    if (peer >= 0) exchange(s, g, peer, peer, chunk, 0);
    if (grows) chunk *= 2;
  }
}

void World::run_collective(RankState& s, const CollectiveCall& call) {
  const GroupView& g = s.groups[int(call.group)];
  const int p = g.size();
  if (p == 1) return;
  const double n = call.bytes;
  // The runtime's all-to-all: at step k each rank sends its piece for rank + k and receives
  // from rank - k, whatever the size; as ring steps of a piece each (the same bytes per link
  // and step on a non-blocking or fat-tree fabric).
  if (call.kind == CollectiveKind::all_to_all) {
    ring(s, g, p - 1, n / p, 0);
    return;
  }
  const PlatformLinks& l = platform_.links;
  // The replica sync's all-reduce of shards (or partial sums) in symmetric memory, whatever
  // its size: each rank sums its part of every peer's in place and copies the others' sums (a
  // reduce-scatter and an all-gather).
  const bool shm_all_reduce = call.kind == CollectiveKind::all_reduce &&
                              call.group == GroupKind::replicas && plan_.replicas_in_place &&
                              l.shm_window && g.one_node;
  if (n < kSmallMessageBytes && !shm_all_reduce) {
    recursive_doubling(s, g, n, call.kind != CollectiveKind::all_reduce);
    return;
  }
  // Folded per stage, the world group's ring neighbours are not mutual (symmetry.hpp): it
  // carries only the loss's and the norm's few bytes, by recursive doubling.
  ST_CHECK(g.kind != GroupKind::world || layout_.pp == 1 || !folding_.folds(),
           "a world collective of {} bytes under folded pipeline stages", n);
  if ((call.kind != CollectiveKind::all_reduce && l.shm_window && g.one_node) || shm_all_reduce) {
    g.barrier->wait();  // every rank has written its part into the window
    const double share = n * 2.0 * (p - 1) / p;
    double seconds = 0;  // copies and sums: CPU
    if (call.kind != CollectiveKind::all_gather)
      seconds += l.shm_reduce.alpha + share * l.shm_reduce.beta;
    if (call.kind != CollectiveKind::reduce_scatter)
      seconds += l.shm_gather.alpha + share * l.shm_gather.beta;
    cpu_work(s.rank, seconds);
    result_.intra_bytes += n * (p - 1) / p * (shm_all_reduce ? 2 : 1);
    return;
  }
  switch (call.kind) {
    case CollectiveKind::all_gather:
      ring(s, g, p - 1, n / p, 0);
      break;
    case CollectiveKind::reduce_scatter:
      ring(s, g, p - 1, n / p, p - 1);
      break;
    case CollectiveKind::all_to_all:
      break;  // above
    case CollectiveKind::all_reduce: {
      const AlphaBeta& mpi = g.one_node ? l.intra_all_reduce : l.inter_all_reduce;
      if (mpi.alpha > 0 || mpi.beta > 0) {  // MPI's measured algorithm: its reduction included
        const AlphaBeta& link = g.one_node ? l.intra_gather : l.inter_gather;
        const double step_extra =
            std::max(0.0, mpi.alpha - link.alpha) + n / p * std::max(0.0, mpi.beta - link.beta);
        ring(s, g, 2 * (p - 1), n / p, 0, step_extra);
      } else {
        ring(s, g, 2 * (p - 1), n / p, p - 1);
      }
      break;
    }
  }
}

void World::comm_loop(RankState& s, int group) {
  for (;;) {
    s.queued[group]->acquire();
    const Op op = s.queue[group].front();
    s.queue[group].pop_front();
    const double begin = sg4::Engine::get_clock();
    // A collective between nodes takes CPU from compute for as long as it is in flight (the
    // spinning start of each wait, MPI's TCP progress at every poll, the kernel's work): on
    // modelled shared cores, one thread's work for its duration. Empirical, nothing fitted:
    // with it FSDP's rows across 2 emulated hosts of 2 cores went from 11-26% fast to -15% to
    // +9% (docs/simulate.md). A core to spare per thread leaves compute as fast as before.
    sg4::ExecPtr poll;
    if (!cpus_.empty() && !s.groups[group].one_node && s.groups[group].size() > 1) {
      poll = sg4::this_actor::exec_init(1e12);  // seconds of one thread: cancelled when done
      poll->set_host(cpu_of(s.rank));
      poll->start();
    }
    run_collective(s, op.call);
    if (poll) poll->cancel();
    record(s.rank, true, op.call.label(), begin);
    std::unique_lock lock(*s.mutex);
    s.done[size_t(op.handle)] = 1;
    s.finished->notify_all();
  }
}

void World::post_send(RankState& s, int to, int tag, double bytes, int handle) {
  Message& m = messages_[{s.rank, to, tag}];
  sg4::Actor::create(
      fmt::format("send{}.{}", s.rank, tag), host_of(s.rank),
      [this, &s, &m, to, tag, bytes, handle] {
        m.posted->acquire();
        const double begin = sg4::Engine::get_clock();
        sg4::CommPtr comm = sg4::Comm::sendto_init(host_for(s.rank, to), host_for(to, s.rank))
                                ->set_payload_size(uint64_t(std::llround(bytes)));
        comm->start();
        // Between nodes, each end's TCP stack copies the bytes on its machine's shared cores
        // beside the transfer, as a ring step's do (exchange).
        std::vector<sg4::ExecPtr> stacks;
        if (!cpus_.empty() && platform_.links.inter_cpu_per_byte > 0 &&
            node_of(s.rank) != node_of(to))
          for (int end : {s.rank, to}) {
            stacks.push_back(
                sg4::this_actor::exec_init(bytes * platform_.links.inter_cpu_per_byte));
            stacks.back()->set_host(cpu_of(end));
            stacks.back()->start();
          }
        comm->wait();
        for (sg4::ExecPtr& stack : stacks) stack->wait();
        (node_of(s.rank) == node_of(to) ? result_.intra_bytes : result_.inter_bytes) += bytes;
        result_.pp_bytes += bytes;
        result_.messages += 1;
        record(s.rank, true, fmt::format("send to rank {} (tag {})", to, tag), begin);
        m.delivered->release();
        std::unique_lock lock(*s.mutex);
        s.done[size_t(handle)] = 1;
        s.finished->notify_all();
      });
}

sg4::SemaphorePtr World::post_recv(RankState& s, int from, int tag) {
  Message& m = messages_[{from, s.rank, tag}];
  m.posted->release();
  return m.delivered;
}

class SimBackend final : public ReplayBackend {
 public:
  SimBackend(RankState& s, sg4::Host* cpu, int threads,
             std::function<void(std::string, double)> record,
             std::function<void(int, int, double, int)> send,
             std::function<sg4::SemaphorePtr(int, int)> recv)
      : s_(s),
        cpu_(cpu),
        threads_(threads),
        record_(std::move(record)),
        send_(std::move(send)),
        recv_(std::move(recv)) {}
  int issue(const CollectiveCall& call) override {
    const int handle = new_handle();
    s_.queue[int(call.group)].push_back({call, handle});
    s_.queued[int(call.group)]->release();
    return handle;
  }
  int send(int peer, int tag, double bytes) override {
    const int handle = new_handle();
    send_(s_.groups[int(GroupKind::pipeline)].shape.member(peer), tag, bytes, handle);
    return handle;
  }
  int recv(int peer, int tag, double) override {
    const int handle = new_handle();
    s_.receiving[handle] = recv_(s_.groups[int(GroupKind::pipeline)].shape.member(peer), tag);
    return handle;
  }
  bool is_completed(int handle) override {
    const auto it = s_.receiving.find(handle);
    return s_.done[size_t(handle)] != 0 || (it != s_.receiving.end() && !it->second->would_block());
  }
  void wait(int handle) override {
    const double begin = now();
    if (const auto it = s_.receiving.find(handle); it != s_.receiving.end()) {
      it->second->acquire();
      s_.receiving.erase(it);
      s_.done[size_t(handle)] = 1;
    }
    std::unique_lock lock(*s_.mutex);
    while (!s_.done[size_t(handle)]) s_.finished->wait(lock);
    if (now() > begin) record_("wait", begin);
  }
  void compute(double seconds, const char* what, int unit) override {
    if (!(seconds > 0)) return;
    const double begin = now();
    if (cpu_) {  // `seconds` of each of `threads` threads' work on the shared cores
      sg4::ExecPtr exec = sg4::this_actor::exec_init(seconds);
      exec->set_host(cpu_);
      exec->set_thread_count(threads_);
      exec->start();
      exec->wait();
    } else {
      sg4::this_actor::sleep_for(seconds);
    }
    s_.compute += now() - begin;
    record_(unit < 0 ? std::string(what) : fmt::format("{} unit {}", what, unit), begin);
  }
  double now() override { return sg4::Engine::get_clock(); }

 private:
  int new_handle() {
    s_.done.push_back(0);
    return int(s_.done.size()) - 1;
  }
  RankState& s_;
  sg4::Host* cpu_;
  int threads_;
  std::function<void(std::string, double)> record_;
  std::function<void(int, int, double, int)> send_;
  std::function<sg4::SemaphorePtr(int, int)> recv_;
};

void World::compute_actor(RankState& s) {
  sg4::Host* cpu = cpus_.empty() ? nullptr : cpu_of(s.rank);
  SimBackend backend(
      s, cpu, plan_.threads,
      [this, &s](std::string name, double begin) { record(s.rank, false, std::move(name), begin); },
      [this, &s](int to, int tag, double bytes, int handle) {
        post_send(s, to, tag, bytes, handle);
      },
      [this, &s](int from, int tag) { return post_recv(s, from, tag); });
  RankReplay replay(plan_, backend, s.groups[int(GroupKind::pipeline)].shape.index);
  replay.run_step();
  s.pp_time = replay.pipeline_time();
  s.pp_compute = replay.pipeline_compute();
  s.exposed = replay.exposed();
  s.tp_exposed = replay.tp_exposed();
  s.longest_wait = replay.longest_wait();
  s.end = sg4::Engine::get_clock();
}

// The kernel's limit on a process's memory mappings.
long max_map_count() {
  FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r");
  long limit = 65530;
  if (f) {
    if (std::fscanf(f, "%ld", &limit) != 1) limit = 65530;
    std::fclose(f);
  }
  return limit;
}

SimResult World::run() {
  build_groups();
  // CM02 without correction factors or cross traffic: a message of n bytes over a free route
  // takes exactly Σ latency + n / min bandwidth, the α-β model the links were fitted to.
  std::vector<std::string> args = {"shardtrain-simulate", "--log=root.thres:critical",
                                   "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                                   "--cfg=network/TCP-gamma:0"};
  // Each actor's stack is a mapping, and its guard page another: beyond the kernel's limit
  // on mappings (vm.max_map_count, often 65,530) SimGrid aborts. Guard pages are dropped when
  // they would not fit (the actors' call depth is shallow and fixed).
  // A group of one keeps its actor: as the runtime's communication thread, it completes even
  // a copy asynchronously, which the compute thread's non-blocking drain sees.
  const double actors = double(comm_groups() + 1 + pipeline_sends(plan_)) * double(ranks_.size());
  if (2.0 * actors + 8192 > double(max_map_count())) args.push_back("--cfg=contexts/guard-size:0");
#ifdef SHARDTRAIN_SANITIZED
  // AddressSanitizer cannot follow SimGrid's own stack switching; system threads it can.
  args.push_back("--cfg=contexts/factory:thread");
#endif
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = int(argv.size());
  sg4::Engine engine(&argc, argv.data());
  build_platform();
  for (auto& s : ranks_) {
    RankState* state = s.get();
    for (int group = 0; group < kGroupKinds; ++group)
      if (active(GroupKind(group)))
        sg4::Actor::create(fmt::format("comm{}.{}", s->rank, group), host_of(s->rank),
                           [this, state, group] { comm_loop(*state, group); })
            ->daemonize();
    sg4::Actor::create(fmt::format("compute{}", s->rank), host_of(s->rank),
                       [this, state] { compute_actor(*state); });
  }
  const auto wall = std::chrono::steady_clock::now();
  engine.run();
  result_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  double exposed_sum = 0, pp_compute_sum = 0, pp_longest = 0;
  for (auto& s : ranks_) {
    pp_compute_sum += s->pp_compute;
    pp_longest = std::max(pp_longest, s->pp_time);
    result_.step = std::max(result_.step, s->end);
    exposed_sum += s->exposed;
    result_.exposed_max = std::max(result_.exposed_max, s->exposed);
  }
  // The nodes not simulated send what the simulated ones do.
  const double unfolded = double(platform_.nodes) / folding_.nodes();
  result_.intra_bytes *= unfolded;
  result_.inter_bytes *= unfolded;
  result_.pp_bytes *= unfolded;
  result_.simulated_ranks = folding_.ranks();
  result_.exposed = ranks_[0]->exposed;
  result_.tp_exposed = ranks_[0]->tp_exposed;
  result_.exposed_mean = exposed_sum / double(ranks_.size());
  if (pp_longest > 0) result_.pp_bubble = 1 - pp_compute_sum / double(ranks_.size()) / pp_longest;
  result_.compute = ranks_[0]->compute;
  result_.longest_wait = ranks_[0]->longest_wait;
  return result_;
}

}  // namespace

SimResult run_simgrid_world(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                            const SimOptions& options) {
  return World(platform, mesh, plan, options).run();
}

}  // namespace st
