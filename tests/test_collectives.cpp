// Collectives under mpirun (1 to 4 ranks): every value is computable from (rank, index), and
// sums of small integers are exact in FP32, so results are compared exactly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "collectives/heartbeat.hpp"
#include "collectives/mpi_process_group.hpp"
#include "collectives/mpi_runtime.hpp"
#include "core/bf16.hpp"
#include "core/thread_cpu.hpp"
#include "core/timer.hpp"
#include "tests/support/p2p_checks.hpp"

namespace st {
namespace {

const std::vector<Algorithm> kAlgorithms = {Algorithm::mpi, Algorithm::ring, Algorithm::shm,
                                            Algorithm::automatic};
const std::vector<int64_t> kSizes = {0, 1, 7, 1000, 100003};

MpiProcessGroup& world() {
  static auto group = MpiProcessGroup::world();
  return *group;
}

float value(int rank, int64_t i) {
  return float((rank * 31 + i) % 97);
}  // exact in BF16 too

Tensor filled(const std::string& name, int64_t n, DType dtype, int rank) {
  Tensor t = Tensor::empty(name, {n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::f32)
      t.data<float>()[i] = value(rank, i);
    else
      t.data<bf16>()[i] = f32_to_bf16(value(rank, i));
  }
  return t;
}

float read(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f32 ? t.data<float>()[i] : bf16_to_f32(t.data<bf16>()[i]);
}

// send/recv between MPI processes (at 2-4 ranks; a one-rank world has no peer): see
// tests/support/p2p_checks.hpp.
TEST(Collectives, PointToPointRingExchange) {
  ASSERT_GE(world().size(), 2);
  p2p_checks::ring_exchange(world());
}
TEST(Collectives, PointToPointOrderingAndTags) {
  ASSERT_GE(world().size(), 2);
  p2p_checks::ordering_and_tags(world());
}
TEST(Collectives, PointToPointRefusals) {
  ASSERT_GE(world().size(), 2);
  p2p_checks::refusals(world());
}
// Beside a group's collectives: a recv outstanding does not hold up the all-gathers queued
// after it on the same group, and completes when its message comes.
TEST(Collectives, PointToPointOutstandingBesideCollectives) {
  auto& g = world();
  ASSERT_GE(g.size(), 2);
  const int r = g.rank(), n = g.size();
  Tensor got = Tensor::zeros("got", {64}, DType::f32);
  auto received = g.recv(got, (r + n - 1) % n, {.tag = 3});
  Tensor in = filled("in", 100, DType::f32, r);
  Tensor out = Tensor::zeros("out", {100 * n}, DType::f32);
  g.all_gather(in, out)->wait();  // queued behind the recv, done before its message is sent
  EXPECT_FALSE(received->is_completed());
  g.barrier()->wait();  // every rank looked before any message goes
  Tensor sent = p2p_checks::message(r, 3, 64, DType::f32);
  g.send(sent, (r + 1) % n, {.tag = 3})->wait();
  received->wait();
  EXPECT_EQ(p2p_checks::wrong_values(got, (r + n - 1) % n, 3), 0);
  for (int q = 0; q < n; ++q) EXPECT_EQ(read(out, q * 100 + 7), value(q, 7));
}

// A BF16 reduce-scatter output is the FP32 sum rounded once, whatever the algorithm. The
// inputs' sums are exact in FP32 (whatever their order), and need more bits than BF16 keeps.
TEST(Collectives, ReduceScatterIntoBf16RoundsTheFp32SumOnce) {
  auto& g = world();
  const int n = g.size();
  auto x = [](int rank, int64_t i) {
    return 1 + float(i % 5) / 64 + float(rank) / 256 + 1.0f / 1024;
  };
  int compared = 0;
  for (Algorithm a : kAlgorithms) {
    if (a == Algorithm::shm && !g.single_node()) continue;
    const int64_t per_rank = 70000;  // above the small-message cut: ring and shm really run
    Tensor in = Tensor::empty("grads", {per_rank * n}, DType::f32);
    for (int64_t i = 0; i < per_rank * n; ++i) in.data<float>()[i] = x(g.rank(), i);
    Tensor out = Tensor::zeros("shard", {per_rank}, DType::bf16);
    g.reduce_scatter(in, out, a)->wait();
    for (int64_t i = 0; i < per_rank; i += 997) {
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += x(q, g.rank() * per_rank + i);
      ASSERT_EQ(bf16_to_f32(out.data<bf16>()[i]), round_to_bf16(sum))
          << algorithm_name(a) << " i=" << i;
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(Collectives, AllGatherEveryAlgorithmDtypeAndSize) {
  auto& g = world();
  for (Algorithm a : kAlgorithms)
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t n : kSizes) {
        Tensor in = filled("in", n, dtype, g.rank());
        Tensor out = Tensor::zeros("out", {n * g.size()}, dtype);
        g.all_gather(in, out, a)->wait();
        for (int r = 0; r < g.size(); ++r)
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(read(out, r * n + i), value(r, i))
                << algorithm_name(a) << " " << dtype_name(dtype) << " n=" << n << " r=" << r;
      }
}

// The algorithm is a construction option: a group reports it (automatic resolved), groups split
// from it inherit it, and their operations run with it.
TEST(Collectives, TheGroupsAlgorithmIsReportedAndInherited) {
  auto& g = world();
  auto automatic = g.split(0, g.rank());
  auto& a = dynamic_cast<MpiProcessGroup&>(*automatic);
  const size_t big = size_t(1) << 20;
  EXPECT_EQ(a.transport(OpType::all_gather, big),
            algorithm_name(a.choose(OpType::all_gather, big)));
  auto copy = g.split(0, g.rank(), "ring", {.algorithm = Algorithm::ring});
  auto& c = *copy;
  EXPECT_EQ(c.transport(OpType::reduce_scatter, big), "ring");
  EXPECT_EQ(c.transport(OpType::all_reduce, big), "mpi");  // MPI's own: no other
  auto sub = c.split(0, g.rank());
  EXPECT_EQ(sub->transport(OpType::all_gather, big), "ring");
  const int64_t n = 1000;
  Tensor in = filled("in", n, DType::bf16, g.rank());
  Tensor out = Tensor::zeros("out", {n * g.size()}, DType::bf16);
  sub->all_gather(in, out)->wait();
  for (int r = 0; r < g.size(); ++r)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(read(out, r * n + i), value(r, i));
}

TEST(Collectives, AllGatherInPlace) {
  auto& g = world();
  for (Algorithm a : kAlgorithms) {
    const int64_t n = 1001;
    Tensor out = Tensor::zeros("out", {n * g.size()}, DType::bf16);
    Tensor mine = out.slice(g.rank() * n, (g.rank() + 1) * n);
    for (int64_t i = 0; i < n; ++i) mine.data<bf16>()[i] = f32_to_bf16(value(g.rank(), i));
    g.all_gather(mine, out, a)->wait();
    for (int r = 0; r < g.size(); ++r)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(read(out, r * n + i), value(r, i)) << algorithm_name(a);
  }
}

TEST(Collectives, ReduceScatterSumAndAverageEveryAlgorithm) {
  auto& g = world();
  for (Algorithm a : kAlgorithms)
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t n : kSizes)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
          Tensor in = filled("grad", n * g.size(), dtype, g.rank());
          Tensor out = Tensor::zeros("shard", {n}, DType::f32);
          g.reduce_scatter(in, out, a, {op})->wait();
          for (int64_t i = 0; i < n; ++i) {
            float sum = 0;
            for (int r = 0; r < g.size(); ++r) sum += value(r, g.rank() * n + i);
            const float want = op == ReduceOp::avg ? sum / float(g.size()) : sum;
            ASSERT_EQ(out.data<float>()[i], want)
                << algorithm_name(a) << " " << dtype_name(dtype) << " n=" << n << " i=" << i;
          }
        }
}

TEST(Collectives, LargeBuffersOver256MiB) {
  auto& g = world();
  // 64 Mi FP32 elements = 256 MiB of reduce-scatter input per rank, 128 MiB of BF16 gathered.
  const int64_t total = int64_t(64) << 20;
  const int64_t n = total / g.size();
  Tensor in = Tensor::empty("big", {n * g.size()}, DType::f32);
  for (int64_t i = 0; i < n * g.size(); ++i) in.data<float>()[i] = float((g.rank() + i) % 8);
  Tensor out = Tensor::empty("big_shard", {n}, DType::f32);
  // Element j of the sum is sum over r of (r + j) % 8: it depends on j % 8 alone.
  float want_by_residue[8] = {};
  for (int64_t j = 0; j < 8; ++j)
    for (int r = 0; r < g.size(); ++r) want_by_residue[j] += float((r + j) % 8);
  for (Algorithm a : {Algorithm::ring, Algorithm::automatic}) {
    g.reduce_scatter(in, out, a)->wait();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i)
      wrong += out.data<float>()[i] != want_by_residue[(g.rank() * n + i) % 8];
    EXPECT_EQ(wrong, 0) << algorithm_name(a);
  }
  Tensor piece = Tensor::empty("piece", {n}, DType::bf16);
  for (int64_t i = 0; i < n; ++i) piece.data<bf16>()[i] = f32_to_bf16(float((g.rank() + i) % 64));
  Tensor gathered = Tensor::empty("gathered", {n * g.size()}, DType::bf16);
  g.all_gather(piece, gathered)->wait();
  int64_t wrong = 0;
  for (int r = 0; r < g.size(); ++r)
    for (int64_t i = 0; i < n; ++i)
      wrong += bf16_to_f32(gathered.data<bf16>()[r * n + i]) != float((r + i) % 64);
  EXPECT_EQ(wrong, 0);
}

TEST(Collectives, AllReduceBroadcastBarrier) {
  auto& g = world();
  Tensor f = Tensor::empty("norm", {3}, DType::f32);
  Tensor d = Tensor::empty("sum", {2}, DType::f64);
  f.data<float>()[0] = float(g.rank() + 1);
  f.data<float>()[1] = 2.0f;
  f.data<float>()[2] = -float(g.rank());
  d.data<double>()[0] = 0.5 * g.rank();
  d.data<double>()[1] = 1e-300;
  g.all_reduce(f)->wait();
  g.all_reduce(d)->wait();
  const int n = g.size();
  EXPECT_EQ(f.data<float>()[0], float(n * (n + 1) / 2));
  EXPECT_EQ(f.data<float>()[1], 2.0f * n);
  EXPECT_EQ(d.data<double>()[0], 0.25 * n * (n - 1));
  EXPECT_EQ(d.data<double>()[1], 1e-300 * n);
  Tensor m = Tensor::empty("m", {1}, DType::f32);
  m.data<float>()[0] = float(g.rank());
  g.all_reduce(m, {ReduceOp::max})->wait();
  EXPECT_EQ(m.data<float>()[0], float(n - 1));
  Tensor a = Tensor::empty("a", {1}, DType::f32);
  a.data<float>()[0] = float(g.rank());
  g.all_reduce(a, {ReduceOp::avg})->wait();
  EXPECT_EQ(a.data<float>()[0], float(n * (n - 1) / 2) / float(n));
  Tensor b = Tensor::empty("b", {5}, DType::i32);
  for (int i = 0; i < 5; ++i) b.data<int32_t>()[i] = g.rank() == n - 1 ? 40 + i : -1;
  g.broadcast(b, n - 1)->wait();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.data<int32_t>()[i], 40 + i);
  g.barrier()->wait();
}

TEST(Collectives, SubGroupsWorkBesideTheWorld) {
  auto& g = world();
  auto sub = g.split(g.rank() % 2, g.rank());
  EXPECT_EQ(sub->size(), (g.size() + 1 - g.rank() % 2) / 2);
  EXPECT_EQ(sub->rank(), g.rank() / 2);
  const int64_t n = 5000;
  Tensor win = filled("w", n, DType::f32, g.rank());
  Tensor wout = Tensor::zeros("wout", {n * g.size()}, DType::f32);
  Tensor s = Tensor::empty("s", {1}, DType::f32);
  s.data<float>()[0] = float(g.rank());
  auto w1 = g.all_gather(win, wout);
  auto w2 = sub->all_reduce(s);
  w2->wait();
  w1->wait();
  float want = 0;
  for (int r = g.rank() % 2; r < g.size(); r += 2) want += float(r);
  EXPECT_EQ(s.data<float>()[0], want);
  for (int r = 0; r < g.size(); ++r) ASSERT_EQ(wout.data<float>()[r * n + 7], value(r, 7));
}

// Each group has its own communication thread: while one group's barrier waits for a late rank
// (1.5 s), another group's all-reduce, submitted after it, completes. With one shared thread
// the all-reduce would queue behind the barrier and finish after it.
// The other ranks' barrier on `slow` waits for the last rank, which enters it only after the
// fast group's all-reduce and a second fast barrier that the others join after checking: the
// fast group's operations complete while the slow group's barrier is pending (no sleeps).
TEST(Collectives, ASlowGroupDoesNotDelayAnother) {
  auto& g = world();
  ASSERT_GE(g.size(), 2);
  EXPECT_TRUE(mpi_thread_multiple()) << "MPI did not grant MPI_THREAD_MULTIPLE";
  auto slow = g.split(0, g.rank());
  auto fast = g.split(0, g.rank());
  Tensor x = Tensor::empty("x", {1}, DType::f64);
  x.data<double>()[0] = 1;
  if (g.rank() == g.size() - 1) {
    fast->all_reduce(x)->wait();
    fast->barrier()->wait();  // the others have looked at their pending barrier
    slow->barrier()->wait();
  } else {
    auto barrier = slow->barrier();
    fast->all_reduce(x)->wait();
    EXPECT_FALSE(barrier->is_completed());  // the last rank has not entered it yet
    fast->barrier()->wait();
    barrier->wait();
  }
  EXPECT_EQ(x.data<double>()[0], double(g.size()));
}

// Work::wait_for gives up at its deadline and the operation goes on; abort() ends an operation
// waiting for a rank that never comes, refuses later ones, and leaves the other groups working.
TEST(Collectives, WaitForADeadlineThenAbortTheGroup) {
  auto& g = world();
  auto group = g.split(0, g.rank(), "background");
  group->make_interruptible();
  Tensor x = Tensor::empty("x", {1}, DType::i64);
  x.data<int64_t>()[0] = 1;
  AllReduceOptions no_watchdog;
  no_watchdog.timeout_s = 0;
  // A barrier the last rank joins only once the others have seen it unfinished (they tell it
  // over the world group, which has a communication thread of its own): not done at 50 ms
  // however slow the machine, done within 10 s of the last rank joining. Events, not sleeps.
  ASSERT_TRUE(mpi_thread_multiple()) << "a group of its own needs MPI_THREAD_MULTIPLE";
  const bool late = g.size() > 1 && g.rank() == g.size() - 1;
  if (late) g.barrier()->wait();  // the others have looked
  BarrierOptions barrier_options;
  barrier_options.timeout_s = 0;
  auto barrier = group->barrier(barrier_options);
  if (!late && g.size() > 1) {
    EXPECT_FALSE(barrier->wait_for(0.05));
    g.barrier()->wait();
  }
  EXPECT_TRUE(barrier->wait_for(10));
  // An all-reduce the last rank never joins: rank 0 gives up at its deadline and aborts.
  if (!late) {
    auto reduce = group->all_reduce(x, no_watchdog);
    if (g.size() > 1) {
      EXPECT_FALSE(reduce->wait_for(0.2));
      group->abort("a test gave up");
      try {
        reduce->wait();
        ADD_FAILURE() << "an aborted all-reduce completed";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
      }
    } else {
      EXPECT_TRUE(reduce->wait_for(10));
      group->abort("a test gave up");
    }
  } else {
    group->abort("a test gave up");
  }
  EXPECT_TRUE(group->aborted());
  try {
    group->all_reduce(x, no_watchdog)->wait();
    ADD_FAILURE() << "an aborted group ran an operation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group 'background' was aborted (a test gave up)"),
              std::string::npos)
        << e.what();
  }
  // The world goes on.
  Tensor y = Tensor::empty("y", {1}, DType::f64);
  y.data<double>()[0] = 1;
  g.all_reduce(y)->wait();
  EXPECT_EQ(y.data<double>()[0], double(g.size()));
}

// The heartbeat beats on its period whatever arrives (a beat sent in answer to each arrival
// races round the ring, thousands a second), and an idle process's service threads (the
// heartbeat, the communication thread waiting for work, the watchdog) cost a sliver of a core.
// The bounds are an order of magnitude above the design; counts and CPU time, never wall time.
TEST(Heartbeat, BeatsOnItsPeriodAndIdleServicesAreCheap) {
  auto& g = world();
  g.barrier()->wait();  // the communication thread exists and has run
  const std::vector<ThreadCpu> before = thread_cpu_times();
  HeartbeatCounts counts;
  std::vector<ThreadCpu> after;
  Timer clock;
  double wall_s = 0;
  {
    Heartbeat heartbeat(g, 30);
    EXPECT_EQ(heartbeat.running(), g.size() > 1);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    counts = heartbeat.counts();
    after = thread_cpu_times();  // while the heartbeat's thread is still there
    wall_s = clock.seconds();
    g.barrier()->wait();  // no rank stops beating while another judges it
  }
  const double design = wall_s / kHeartbeatPeriodS + 1;  // beats one rank sends in wall_s
  if (g.size() > 1) {
    EXPECT_GE(counts.beats_sent, 2) << "the heartbeat did not beat";
    EXPECT_LE(double(counts.beats_sent), 10 * design) << "beats in " << wall_s << " s";
    EXPECT_GE(counts.datagrams_per_beat, 1);
    EXPECT_LE(double(counts.datagrams_received),
              10 * design * double(std::max<int64_t>(1, counts.datagrams_per_beat)))
        << "datagrams received in " << wall_s << " s";
  } else {
    EXPECT_EQ(counts.beats_sent, 0);  // a world of one has no one to watch
  }
  for (const char* name : {kHeartbeatThreadName, kCommThreadName, kWatchdogThreadName}) {
    const double used = thread_cpu_seconds(after, name) - thread_cpu_seconds(before, name);
    EXPECT_LE(used, 0.05 * wall_s)
        << name << " used " << used << " s of CPU in " << wall_s << " s of idling";
  }
}

// split() records which node each rank is on; a ranks-per-node override splits one host into
// pretend nodes, and a group spanning them never takes the shared-memory path.
TEST(Collectives, NodeMapAndAnOverride) {
  auto& g = world();
  for (int n : g.nodes()) EXPECT_EQ(n, 0);  // one host under CTest
  EXPECT_TRUE(g.single_node());
  if (g.size() % 2 != 0) return;  // a node map of pairs needs an even world
  auto copy = g.split(0, g.rank());
  auto& pairs = dynamic_cast<MpiProcessGroup&>(*copy);
  std::vector<int> two_per_node(static_cast<size_t>(g.size()));
  for (int r = 0; r < g.size(); ++r) two_per_node[size_t(r)] = r / 2;
  pairs.set_node_map(two_per_node);
  EXPECT_EQ(pairs.nodes(), two_per_node);
  EXPECT_EQ(pairs.single_node(), g.size() == 2);
  EXPECT_EQ(pairs.choose(OpType::all_gather, 1 << 20),
            g.size() == 2 ? Algorithm::shm : Algorithm::ring);
  auto within = pairs.split(g.rank() / 2, g.rank());  // one pretend node each
  auto across = pairs.split(g.rank() % 2, g.rank());  // one rank of every pretend node
  EXPECT_FALSE(within->spans_nodes());
  EXPECT_EQ(across->spans_nodes(), g.size() > 2);
  auto& w = dynamic_cast<MpiProcessGroup&>(*within);
  auto& a = dynamic_cast<MpiProcessGroup&>(*across);
  EXPECT_TRUE(w.single_node());
  EXPECT_EQ(a.single_node(), g.size() == 2);
  if (g.size() == 2) return;
  EXPECT_THROW(
      a.all_gather(Tensor::zeros("i", {1 << 16}, DType::f32),
                   Tensor::zeros("o", {int64_t(a.size()) << 16}, DType::f32), Algorithm::shm),
      Error)
      << "shm across nodes must be refused";
  Tensor v = Tensor::zeros("v", {1 << 16}, DType::f32);
  Tensor out = Tensor::zeros("out", {int64_t(a.size()) << 16}, DType::f32);
  a.all_gather(v, out)->wait();  // auto: ring across the pretend nodes
}

TEST(Collectives, ManyInFlightCompleteInOrder) {
  auto& g = world();
  std::vector<Tensor> ins, outs;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 8; ++k) {
    ins.push_back(filled("in", 3000 + k, DType::bf16, g.rank() + k));
    outs.push_back(Tensor::zeros("out", {(3000 + k) * g.size()}, DType::bf16));
    works.push_back(g.all_gather(ins.back(), outs.back(), kAlgorithms[size_t(k) % 4]));
  }
  works.back()->wait();
  for (auto& w : works) EXPECT_TRUE(w->is_completed());  // queued in order, so all are done
  for (int k = 0; k < 8; ++k)
    for (int r = 0; r < g.size(); ++r)
      ASSERT_EQ(read(outs[size_t(k)], r * (3000 + k) + 11), value(r + k, 11));
}

TEST(Collectives, CallingThreadComputesWhileInFlight) {
  auto& g = world();
  const int64_t n = int64_t(32) << 20;  // 128 MiB of FP32 input per rank
  Tensor in = filled("in", n, DType::f32, g.rank());
  Tensor out = Tensor::zeros("out", {n / g.size()}, DType::f32);
  // The machine is shared and noisy: a preempted caller can miss one operation entirely, so
  // overlap must be seen in at least one of five attempts (every rank agrees via all_reduce).
  Tensor overlapped = Tensor::zeros("overlapped", {1}, DType::f32);
  for (int attempt = 0; attempt < 5 && overlapped.data<float>()[0] == 0.f; ++attempt) {
    auto work = g.reduce_scatter(in.slice(0, (n / g.size()) * g.size()), out, Algorithm::ring);
    int64_t iterations = 0;
    volatile double sink = 0;
    while (!work->is_completed()) {
      for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(double(i));
      ++iterations;
    }
    work->wait();
    overlapped.data<float>()[0] = iterations > 0 ? 1.f : 0.f;
    g.all_reduce(overlapped, {ReduceOp::max})->wait();
  }
  EXPECT_EQ(overlapped.data<float>()[0], 1.f)
      << "no compute ran while a reduce-scatter was in flight";
}

TEST(Collectives, WrongInputFailsBeforeCommunicating) {
  auto& g = world();
  Tensor in = Tensor::zeros("layer.0.shard", {10}, DType::bf16);
  Tensor small = Tensor::zeros("layer.0.unsharded", {10 * g.size() - 1}, DType::bf16);
  try {
    g.all_gather(in, small);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.0.unsharded"), std::string::npos) << e.what();
  }
  Tensor f32out = Tensor::zeros("out32", {10 * g.size()}, DType::f32);
  EXPECT_THROW(g.all_gather(in, f32out), Error);  // mismatched dtype
  Tensor i32out = Tensor::zeros("grad_shard", {10}, DType::i32);
  EXPECT_THROW(g.reduce_scatter(Tensor::zeros("g", {10 * g.size()}, DType::f32), i32out), Error);
  EXPECT_THROW(g.all_reduce(Tensor::zeros("i", {1}, DType::i32)), Error);
  EXPECT_THROW(g.broadcast(in, g.size()), Error);
  g.barrier()->wait();  // the group is still usable: nothing was sent
}

// Symmetric memory (collectives/symmetric_heap.hpp): each test splits a group of its own, so its
// heap is fresh. At one rank there is no peer and no heap: everything is ordinary memory.

// Not small integers: sums round, so only the same order of additions gives the same bits.
float inexact(int rank, int64_t i, int salt) {
  return std::sin(float(rank * 7919 + i * 13 + salt)) * 3.7f;
}

void fill_inexact(const Tensor& t, int rank, int salt) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = inexact(rank, i, salt);
    if (t.dtype() == DType::f32)
      t.data<float>()[i] = v;
    else
      t.data<bf16>()[i] = f32_to_bf16(v);
  }
}

std::unique_ptr<MpiProcessGroup> own_group(const std::string& name) {
  auto group = world().split(0, world().rank(), name);
  return std::unique_ptr<MpiProcessGroup>(dynamic_cast<MpiProcessGroup*>(group.release()));
}

TEST(SymmetricMemory, CollectivesReadPeersInPlaceBitForBitAsStaged) {
  auto g = own_group("symmetric");
  const int rank = g->rank(), size = g->size();
  const int64_t n = 70001;  // per rank: above the small-message cut, and odd
  g->reserve_symmetric(size_t(n) * size_t(size) * 2 * (2 + 4) + 4096);  // the four buffers
  EXPECT_EQ(g->symmetric_capacity() > 0, size > 1);
  uint64_t in_place = 0;
  for (DType dtype : {DType::bf16, DType::f32}) {
    // FSDP's all-gather: in place, into a symmetric output.
    Tensor full = g->symmetric_empty("unsharded", n * size, dtype);
    fill_inexact(full.slice(rank * n, (rank + 1) * n), rank, 1);
    g->all_gather(full.slice(rank * n, (rank + 1) * n), full, Algorithm::shm)->wait();
    in_place += 1;
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; i += 101)
        ASSERT_EQ(read(full, r * n + i),
                  dtype == DType::f32 ? inexact(r, i, 1) : round_to_bf16(inexact(r, i, 1)))
            << dtype_name(dtype) << " rank " << r << " i " << i;
    // FSDP's reduce-scatter: from a symmetric input, into FP32 and BF16, sum and average; the
    // same bits as the staged path's from ordinary memory.
    Tensor grads = g->symmetric_empty("unsharded_grad", n * size, dtype);
    Tensor ordinary = Tensor::empty("grads", {n * size}, dtype);
    fill_inexact(grads, rank, 2);
    fill_inexact(ordinary, rank, 2);
    for (DType out_dtype : {DType::f32, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        Tensor got = Tensor::zeros("shard", {n}, out_dtype);
        Tensor want = Tensor::zeros("staged", {n}, out_dtype);
        g->reduce_scatter(grads, got, Algorithm::shm, {op})->wait();
        g->reduce_scatter(ordinary, want, Algorithm::shm, {op})->wait();
        in_place += 1;
        ASSERT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0)
            << dtype_name(dtype) << " into " << dtype_name(out_dtype);
      }
  }
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? in_place : 0) << "the in-place path did not run";
}

TEST(SymmetricMemory, OneRankOutsideItsHeapStagesTheOperationForAll) {
  auto g = own_group("symmetric-mixed");
  const int rank = g->rank(), size = g->size();
  const int64_t n = 40000;
  g->reserve_symmetric(size_t(n) * size_t(size) * 4 * 8);
  // Operations in flight together, alternating: every rank in its heap, then rank 0 outside.
  std::vector<Tensor> outs;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 6; ++k) {
    const bool outside = k % 2 == 1 && rank == 0;
    Tensor full = outside ? Tensor::empty("ordinary", {n * size}, DType::f32)
                          : g->symmetric_empty("symmetric", n * size, DType::f32);
    fill_inexact(full.slice(rank * n, (rank + 1) * n), rank, k);
    works.push_back(g->all_gather(full.slice(rank * n, (rank + 1) * n), full, Algorithm::shm));
    outs.push_back(full);
  }
  for (auto& w : works) w->wait();
  for (int k = 0; k < 6; ++k)
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; i += 97)
        ASSERT_EQ(read(outs[size_t(k)], r * n + i), inexact(r, i, k)) << "op " << k;
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? 3u : 0u);
  // Empty operations (which the staged path does without waiting on peers) between in-place
  // ones leave the ranks agreeing on which operation is which.
  Tensor none = g->symmetric_empty("empty", 0, DType::f32);
  for (int k = 0; k < 3; ++k) {
    g->all_gather(none, none, Algorithm::shm)->wait();
    g->reduce_scatter(none, none, Algorithm::shm)->wait();
  }
  g->all_gather(outs[0].slice(rank * n, (rank + 1) * n), outs[0], Algorithm::shm)->wait();
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? 4u : 0u);
}

TEST(SymmetricMemory, BuffersAreReusableOnceTheOperationCompletes) {
  auto g = own_group("symmetric-reuse");
  const int rank = g->rank(), size = g->size();
  const int64_t n = 30000;
  g->reserve_symmetric(size_t(n) * size_t(size) * 4);
  Tensor full = g->symmetric_empty("unsharded", n * size, DType::f32);
  Tensor mine = full.slice(rank * n, (rank + 1) * n);
  // Each operation overwrites this rank's slot at once: a peer still reading the last one
  // would see the next one's values.
  for (int step = 0; step < 20; ++step) {
    fill_inexact(mine, rank, step);
    g->all_gather(mine, full, Algorithm::shm)->wait();
    for (int r = 0; r < size; ++r)
      ASSERT_EQ(read(full, r * n + (step * 977) % n), inexact(r, (step * 977) % n, step))
          << "step " << step;
  }
  // The heap has room for one such buffer: once it is gone, the next one fits again.
  full = mine = Tensor();
  Tensor next = g->symmetric_empty("next model's", n * size, DType::f32);
  const uint64_t before = g->symmetric_ops();
  g->all_gather(next.slice(rank * n, (rank + 1) * n), next, Algorithm::shm)->wait();
  EXPECT_EQ(g->symmetric_ops(), before + (size > 1 ? 1 : 0));
}

TEST(SymmetricMemory, AllGatherIntoASymmetricOutputAndAllReduceReadPeersInPlace) {
  auto g = own_group("symmetric-tp");
  const int rank = g->rank(), size = g->size();
  const int64_t n = 50003;
  // Room for the gathered rows, the sums (one element more: the owners' ranges differ in
  // length) and the mixed case's buffer.
  g->reserve_symmetric(size_t(n) * size_t(size) * 4 * 2 + size_t(n) * 4 + 4096);
  // TP's gathered residual gradient: the input in ordinary memory, the output symmetric.
  Tensor rows = Tensor::empty("rows", {n}, DType::f32);
  Tensor whole = g->symmetric_empty("whole", n * size, DType::f32);
  fill_inexact(rows, rank, 3);
  g->all_gather(rows, whole, Algorithm::shm)->wait();
  for (int r = 0; r < size; ++r)
    for (int64_t i = 0; i < n; i += 89) ASSERT_EQ(read(whole, r * n + i), inexact(r, i, 3));
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? 1u : 0u) << "the output's slot was not read in place";
  // TP's row-parallel sums: every element the FP32 sum in rank order, the same on every rank.
  const int64_t total = n * size + 1;
  Tensor sums = g->symmetric_empty("partial sums", total, DType::f32);
  Tensor part = Tensor::empty("a rank's part", {total}, DType::f32);
  Tensor want = Tensor::zeros("sum in rank order", {total}, DType::f32);
  for (int r = 0; r < size; ++r) {
    fill_inexact(part, r, 4);  // the very values rank r fills in (vectorized sin and all)
    for (int64_t i = 0; i < total; ++i) want.data<float>()[i] += part.data<float>()[i];
  }
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
    fill_inexact(sums, rank, 4);
    g->all_reduce(sums, {.op = op})->wait();
    const float by = op == ReduceOp::avg ? float(size) : 1.0f;
    for (int64_t i = 0; i < total; ++i)
      ASSERT_EQ(read(sums, i), want.data<float>()[i] / by) << "element " << i << " op " << int(op);
  }
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? 3u : 0u);
  // One rank's buffer outside its heap: MPI sums it, the same values to rounding.
  const size_t used = g->symmetric_used();
  Tensor mixed = rank == 0 ? Tensor::empty("ordinary", {n}, DType::f32)
                           : g->symmetric_empty("symmetric", n, DType::f32);
  if (rank > 0 && size > 1) {
    ASSERT_GT(g->symmetric_used(), used) << "the heap lacks room for the mixed case";
  }
  fill_inexact(mixed, rank, 5);
  g->all_reduce(mixed)->wait();
  for (int64_t i = 0; i < n; i += 13) {
    double want = 0;
    for (int r = 0; r < size; ++r) want += inexact(r, i, 5);
    ASSERT_NEAR(read(mixed, i), want, 1e-5 * size) << "element " << i;
  }
  EXPECT_EQ(g->symmetric_ops(), size > 1 ? 3u : 0u);
  // Room too small is replaced once nothing is in it, and kept while anything is.
  const size_t before = g->symmetric_capacity();
  g->reserve_symmetric(before * 2);
  EXPECT_EQ(g->symmetric_capacity(), before) << "replaced while buffers live";
  rows = whole = sums = mixed = Tensor();
  g->reserve_symmetric(before * 2);
  EXPECT_EQ(g->symmetric_capacity(), size > 1 ? before * 2 : 0u);
}

TEST(SymmetricMemory, AFullHeapOrAGroupAcrossNodesGivesOrdinaryMemory) {
  auto g = own_group("symmetric-full");
  const int size = g->size();
  g->reserve_symmetric(4096);
  Tensor fits = g->symmetric_empty("fits", 1024, DType::f32);
  Tensor too_big = g->symmetric_empty("too-big", 40000 * size, DType::f32);
  fill_inexact(too_big.slice(g->rank() * 40000, (g->rank() + 1) * 40000), g->rank(), 5);
  g->all_gather(too_big.slice(g->rank() * 40000, (g->rank() + 1) * 40000), too_big)->wait();
  for (int r = 0; r < size; ++r) ASSERT_EQ(read(too_big, r * 40000 + 7), inexact(r, 7, 5));
  EXPECT_EQ(g->symmetric_ops(), 0u) << "a buffer outside the heap cannot be read in place";
  // The segments' names are gone once mapped: nothing is left in /dev/shm.
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_EQ(entry.path().filename().string().find("shardtrain-" + std::to_string(getpid())),
              std::string::npos)
        << entry.path();
  if (size == 1) return;
  auto across = own_group("symmetric-across");
  std::vector<int> one_node_each(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) one_node_each[size_t(r)] = r;
  across->set_node_map(one_node_each);
  across->reserve_symmetric(1 << 20);
  EXPECT_EQ(across->symmetric_capacity(), 0u) << "peers on other nodes cannot map this memory";
}

}  // namespace
}  // namespace st
