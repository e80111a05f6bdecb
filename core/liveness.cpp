#include "core/liveness.hpp"

#include <atomic>
#include <chrono>
#include <limits>

namespace st::liveness {
namespace {
std::atomic<uint64_t> g_progress{0};
std::atomic<int64_t> g_step{-1};
std::atomic<int64_t> g_steps_done{0};
std::atomic<int> g_waiting_depth{0};
std::atomic<double> g_waiting_since{0};
}  // namespace

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void note_progress() {
  g_progress.fetch_add(1, std::memory_order_relaxed);
}

void set_step(int64_t step) {
  g_step.store(step, std::memory_order_relaxed);
  note_progress();
}

void set_steps_done(int64_t steps) {
  g_steps_done.store(steps, std::memory_order_relaxed);
}

int64_t steps_done() {
  return g_steps_done.load(std::memory_order_relaxed);
}

WaitingScope::WaitingScope() {
  if (g_waiting_depth.fetch_add(1) == 0) g_waiting_since.store(now_s());
}

WaitingScope::~WaitingScope() {
  g_waiting_depth.fetch_sub(1);
  note_progress();  // the wait ended: the rank moves on
}

namespace {
constexpr int kNoRank = std::numeric_limits<int>::max();
std::atomic<int> g_lowest_failed_peer{kNoRank};
static_assert(std::atomic<int>::is_always_lock_free);
}  // namespace

void note_peer_failed(int rank) {
  int seen = g_lowest_failed_peer.load();
  while (rank < seen && !g_lowest_failed_peer.compare_exchange_weak(seen, rank)) {
  }
}

bool peer_failed() {
  return g_lowest_failed_peer.load() != kNoRank;
}

bool peer_failed_below(int rank) {
  return g_lowest_failed_peer.load() < rank;
}

Snapshot snapshot() {
  Snapshot s;
  s.progress = g_progress.load(std::memory_order_relaxed);
  s.step = g_step.load(std::memory_order_relaxed);
  s.waiting = g_waiting_depth.load() > 0;
  s.waiting_since_s = g_waiting_since.load();
  return s;
}

}  // namespace st::liveness
