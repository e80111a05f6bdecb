#pragma once
// The heartbeat: finds a rank that has stopped (SIGSTOP, swapped out, its host gone) or is
// stuck outside any collective (a hung file read) while the others wait for it, and ends the
// job within its timeout, naming the rank and its step, where the collectives' watchdog would
// wait its full 300 s and then name no one.
//
// The ranks form a ring over UDP, outside MPI: a stopped rank cannot take part in MPI, and the
// beat must not wait behind a communication thread busy in a collective. A few times a second
// every rank sends its liveness snapshot (core/liveness) to the next rank and judges the
// previous one's, on a fixed period (kHeartbeatPeriodS) whatever arrives: arrivals are taken in
// as they come and never answered. A rank never heard from is not judged (UDP blocked between
// hosts): the first beat arms the check.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "collectives/process_group.hpp"
#include "core/liveness.hpp"

namespace st {

// What a rank knows of the rank it watches.
struct PeerBeat {
  bool heard = false;        // at least one beat arrived
  double last_heard_s = 0;   // when the newest arrived
  double progress_at_s = 0;  // when its progress counter last changed
  liveness::Snapshot state;  // its newest snapshot
};

// The verdict on the watched rank `peer` at time `now_s`: a message when it stopped (no beat
// for `timeout_s`) or is stuck (beats still coming, but no progress outside any wait for
// `timeout_s` while this rank, `self`, has waited that long); nullopt while it is healthy.
// `peer_host` ("" where all ranks share one host) is named in the message: a lost host's link is
// the likely cause.
std::optional<std::string> judge_peer(int peer, const PeerBeat& beat,
                                      const liveness::Snapshot& self, double now_s,
                                      double timeout_s, const std::string& peer_host = "");

constexpr double kHeartbeatPeriodS = 0.2;
// A peer is judged stuck only while its beats still come: heard within this long.
constexpr double kStuckNeedsABeatWithinS = 5 * kHeartbeatPeriodS;
// The heartbeat thread itself woken this late past its deadline was not running (its process
// stopped or starved): it judges no peer's silence over that while.
constexpr double kLateWakeS = 10 * kHeartbeatPeriodS;
constexpr const char* kHeartbeatThreadName = "st-heartbeat";

// What a heartbeat has sent and received so far (what it costs the network).
struct HeartbeatCounts {
  int64_t beats_sent = 0;          // one per period
  int64_t datagrams_per_beat = 0;  // one per address of the next rank
  int64_t datagrams_received = 0;  // every datagram taken in: beats and abort notices
};

class Heartbeat {
 public:
  // Collective over `group` (exchanges addresses). timeout_s <= 0 or a group of one: no beat.
  // On a verdict the job ends (abort_job) with its message.
  Heartbeat(ProcessGroup& group, double timeout_s);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  bool running() const { return state_ != nullptr; }
  HeartbeatCounts counts() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace st
