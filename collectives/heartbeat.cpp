#include "collectives/heartbeat.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "collectives/mpi_runtime.hpp"
#include "core/error.hpp"
#include "core/thread_cpu.hpp"

namespace st {
namespace {

constexpr int kMaxAddresses = 6;
constexpr int kHostWords = 8;  // the host name's first 63 bytes, zero-terminated
// token, port, count, addresses, host name
constexpr int kRecordWords = 3 + kMaxAddresses + kHostWords;
constexpr int32_t kAborting = 2;

struct Beat {
  uint64_t token;  // the job's: datagrams of another job on a reused port are ignored
  int32_t rank;
  int32_t waiting;  // 0 or 1; kAborting: the sender is ending the job with its message
  int64_t step;
  uint64_t progress;
};

std::string step_text(int64_t step) {
  return step < 0 ? std::string("before training") : fmt::format("at step {}", step + 1);
}

// This host's IPv4 addresses, loopback first (ranks on one host reach each other there).
std::vector<uint32_t> local_addresses() {
  std::vector<uint32_t> out{htonl(INADDR_LOOPBACK)};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a && int(out.size()) < kMaxAddresses; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const uint32_t ip = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
    if (ip != htonl(INADDR_LOOPBACK)) out.push_back(ip);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace

std::optional<std::string> judge_peer(int peer, const PeerBeat& beat,
                                      const liveness::Snapshot& self, double now_s,
                                      double timeout_s, const std::string& peer_host) {
  if (!beat.heard) return std::nullopt;
  if (now_s - beat.last_heard_s > timeout_s)
    return fmt::format(
        "rank {}{} stopped responding {}: no heartbeat for {:.1f} s (a stopped or swapped-out "
        "process, or its host is gone{}). Ending the job (training.stall_timeout = {:g} s).",
        peer, peer_host.empty() ? "" : " on " + peer_host, step_text(beat.state.step),
        now_s - beat.last_heard_s,
        peer_host.empty() ? "" : " or unreachable: " + peer_host + "'s link or network", timeout_s);
  // Stuck means alive (its beats still come) but not moving. A peer whose beats stopped may
  // simply be stopped, and the silence above names it so once its own timeout is up, even when
  // its last progress was older still (a long compute stretch, as under a sanitizer).
  const bool still_beating = now_s - beat.last_heard_s <= kStuckNeedsABeatWithinS;
  if (still_beating && !beat.state.waiting && now_s - beat.progress_at_s > timeout_s &&
      self.waiting && now_s - self.waiting_since_s > timeout_s)
    return fmt::format(
        "rank {} is stuck {}: no progress for {:.1f} s outside any collective (a hung file read "
        "or write?) while the other ranks wait for it. Ending the job (training.stall_timeout "
        "= {:g} s).",
        peer, step_text(beat.state.step), now_s - beat.progress_at_s, timeout_s);
  return std::nullopt;
}

namespace {
std::mutex g_active_mutex;
std::shared_ptr<Heartbeat::State> g_active;  // the heartbeat abort notices go out through
void announce_abort();
}  // namespace

struct Heartbeat::State {
  int rank = 0, size = 1, prev = 0;
  std::string prev_host;  // the watched rank's host, where the ranks span several ("" if not)
  double timeout_s = 0;
  uint64_t token = 0;
  int fd = -1;
  std::vector<sockaddr_in> next;  // every address of the next rank
  std::vector<sockaddr_in> all;   // every address of every other rank (abort notices)
  std::atomic<bool> stopping{false};
  std::thread thread;

  std::atomic<int64_t> beats_sent{0}, datagrams_received{0};

  // Takes in every datagram waiting on the socket, without answering any: the beats go out on
  // this rank's own schedule, never in reply (a reply per arrival makes the ring race).
  void drain(PeerBeat& beat) {
    Beat in{};
    while (::recv(fd, &in, sizeof in, MSG_DONTWAIT) == ssize_t(sizeof in)) {
      datagrams_received.fetch_add(1, std::memory_order_relaxed);
      if (in.token != token) continue;
      if (in.waiting == kAborting) liveness::note_peer_failed(in.rank);
      if (in.rank != prev) continue;
      const double now = liveness::now_s();
      if (!beat.heard || in.progress != beat.state.progress) beat.progress_at_s = now;
      beat.heard = true;
      beat.last_heard_s = now;
      beat.state.progress = in.progress;
      beat.state.step = in.step;
      beat.state.waiting = in.waiting != 0;
    }
  }

  void send_beat() {
    const liveness::Snapshot self = liveness::snapshot();
    const Beat out{token, rank, self.waiting ? 1 : 0, self.step, self.progress};
    for (const sockaddr_in& to : next)
      ::sendto(fd, &out, sizeof out, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
               sizeof to);
    beats_sent.fetch_add(1, std::memory_order_relaxed);
  }

  void run() {
    // Signals go to the other threads: a SIGTERM handler waiting for this thread's abort
    // notice must not run on it.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    name_this_thread(kHeartbeatThreadName);
    PeerBeat beat;
    double due = liveness::now_s();  // the next beat's deadline
    while (!stopping.load()) {
      // Until the deadline, arrivals are taken in as they come (an abort notice is acted on at
      // once) but answered by nothing.
      for (double left = due - liveness::now_s(); left > 0 && !stopping.load();
           left = due - liveness::now_s()) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, std::max(1, int(std::ceil(left * 1000)))) > 0) drain(beat);
      }
      if (stopping.load()) return;
      drain(beat);
      const double now = liveness::now_s();
      if (now - due > kLateWakeS) {
        // This thread did not run for a while (its process was stopped, SIGSTOP, or starved):
        // the silence it would judge is its own. Once mpirun ended a job whose other rank named
        // this one as stopped, the continued process here blamed a live rank in a second
        // message. Judge the peer afresh from now.
        beat.last_heard_s = beat.progress_at_s = now;
      } else if (auto verdict =
                     judge_peer(prev, beat, liveness::snapshot(), now, timeout_s, prev_host)) {
        abort_job(*verdict, 1, FailureClass::lost_rank);
      }
      send_beat();
      // A fixed period; after a late wake (a stopped process resumed, a loaded machine) the
      // schedule starts again from now rather than catching up with a burst.
      due = std::max(due + kHeartbeatPeriodS, liveness::now_s());
    }
  }
};

namespace {
void announce_abort() {
  std::shared_ptr<Heartbeat::State> s;
  {
    std::lock_guard lock(g_active_mutex);
    s = g_active;
  }
  if (!s) return;
  const Beat out{s->token, s->rank, kAborting, -1, 0};
  for (const sockaddr_in& to : s->all)
    ::sendto(s->fd, &out, sizeof out, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&to),
             sizeof to);
}
}  // namespace

Heartbeat::Heartbeat(ProcessGroup& group, double timeout_s) {
  if (timeout_s <= 0 || group.size() < 2) return;
  auto s = std::make_shared<State>();
  s->rank = group.rank();
  s->size = group.size();
  s->prev = (s->rank + s->size - 1) % s->size;
  s->timeout_s = timeout_s;
  // Every rank makes its socket, whatever happens, so the exchange below always runs.
  s->fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool bound =
      s->fd >= 0 && ::bind(s->fd, reinterpret_cast<sockaddr*>(&any), sizeof any) == 0;
  socklen_t length = sizeof any;
  if (bound) ::getsockname(s->fd, reinterpret_cast<sockaddr*>(&any), &length);
  Tensor mine = Tensor::zeros("heartbeat.endpoint", {kRecordWords}, DType::i64);
  int64_t* m = mine.data<int64_t>();
  m[0] = int64_t(std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32));
  m[1] = bound ? ntohs(any.sin_port) : 0;
  const std::vector<uint32_t> addresses = local_addresses();
  m[2] = int64_t(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) m[3 + i] = addresses[i];
  char host[8 * kHostWords] = {};
  ::gethostname(host, sizeof host - 1);
  std::memcpy(m + 3 + kMaxAddresses, host, sizeof host);
  Tensor all = Tensor::zeros("heartbeat.endpoints", {kRecordWords * group.size()}, DType::i64);
  group.all_gather(mine, all)->wait();
  const int64_t* a = all.data<int64_t>();
  s->token = uint64_t(a[0]);  // rank 0's
  auto host_of = [&](int r) {
    char name[8 * kHostWords];
    std::memcpy(name, a + kRecordWords * r + 3 + kMaxAddresses, sizeof name);
    name[sizeof name - 1] = 0;
    return std::string(name);
  };
  for (int r = 0; r < s->size; ++r)
    if (host_of(r) != host_of(s->rank)) s->prev_host = host_of(s->prev);
  const int next_rank = (s->rank + 1) % s->size;
  if (!bound || a[kRecordWords * next_rank + 1] == 0) {
    if (s->fd >= 0) ::close(s->fd);
    return;  // no socket here or there: the collectives' watchdog remains
  }
  for (int r = 0; r < s->size; ++r) {
    const int64_t* n = a + kRecordWords * r;
    if (r == s->rank || n[1] == 0) continue;
    for (int64_t i = 0; i < std::min<int64_t>(n[2], kMaxAddresses); ++i) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(uint16_t(n[1]));
      to.sin_addr.s_addr = uint32_t(n[3 + i]);
      s->all.push_back(to);
      if (r == next_rank) s->next.push_back(to);
    }
  }
  s->thread = std::thread([s] { s->run(); });
  {
    std::lock_guard lock(g_active_mutex);
    g_active = s;
  }
  set_abort_notifier(announce_abort);
  state_ = std::move(s);
}

HeartbeatCounts Heartbeat::counts() const {
  if (!state_) return {};
  return {state_->beats_sent.load(), int64_t(state_->next.size()),
          state_->datagrams_received.load()};
}

Heartbeat::~Heartbeat() {
  if (!state_) return;
  set_abort_notifier(nullptr);
  {
    std::lock_guard lock(g_active_mutex);
    g_active.reset();
  }
  state_->stopping = true;
  state_->thread.join();
  ::close(state_->fd);
}

}  // namespace st
