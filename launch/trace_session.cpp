#include "launch/trace_session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/staged_output.hpp"

namespace st {

TraceSession::TraceSession(ProcessGroup& group, std::string path, StepRange steps)
    : group_(group), path_(std::move(path)), steps_(steps) {
  if (!enabled()) return;
  // Clock alignment: every rank reads its clock right after a barrier; the differences to
  // rank 0 are the offsets (good to the barrier's exit skew, microseconds on one node).
  group_.barrier()->wait();
  Tensor now = Tensor::zeros("trace.clock", {group_.size()}, DType::f64);
  now.data<double>()[group_.rank()] = trace_now_us();
  group_.all_reduce(now)->wait();
  origin_us_ = now.data<double>()[0];
  offset_us_ = origin_us_ - now.data<double>()[group_.rank()];
}

TraceSession::~TraceSession() {
  if (TraceRecorder::active() == &recorder_) TraceRecorder::set_active(nullptr);
}

void TraceSession::begin_step(int64_t step) {
  if (enabled() && steps_.contains(step + 1)) TraceRecorder::set_active(&recorder_);
}

void TraceSession::end_step(int64_t) {
  if (TraceRecorder::active() == &recorder_) TraceRecorder::set_active(nullptr);
}

int64_t TraceSession::write() {
  if (!enabled()) return 0;
  TraceRecorder::set_active(nullptr);
  const int rank = group_.rank(), world = group_.size();
  // This rank's events, on rank 0's clock, as one JSON array text.
  nlohmann::json events = nlohmann::json::array();
  for (const TraceSpan& s : recorder_.take())
    events.push_back({{"name", s.name},
                      {"ph", "X"},
                      {"pid", rank},
                      {"tid", int(s.track)},
                      {"ts", s.begin_us + offset_us_ - origin_us_},
                      {"dur", s.end_us - s.begin_us}});
  const std::string text = events.dump();
  // Variable-length texts travel as equal-sized byte blocks of the longest; their lengths as
  // exact integers, each rank's in its own slot.
  Tensor lengths = Tensor::zeros("trace.lengths", {world}, DType::i64);
  const int64_t* length = lengths.data<int64_t>();
  lengths.data<int64_t>()[rank] = int64_t(text.size());
  group_.all_reduce(lengths)->wait();
  const int64_t longest = *std::max_element(length, length + world);
  Tensor mine = Tensor::zeros("trace.mine", {longest}, DType::u8);
  std::memcpy(mine.raw(), text.data(), text.size());
  Tensor all = Tensor::zeros("trace.all", {longest * world}, DType::u8);
  group_.all_gather(mine, all)->wait();
  if (rank != 0) return 0;
  nlohmann::json trace = {{"traceEvents", nlohmann::json::array()},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"producer", "shardtrain"}, {"ranks", world}}}};
  auto& out = trace["traceEvents"];
  int64_t spans = 0;
  for (int r = 0; r < world; ++r) {
    out.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", r},
                   {"args", {{"name", fmt::format("rank {}", r)}}}});
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", r},
                   {"tid", 0},
                   {"args", {{"name", "compute"}}}});
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", r},
                   {"tid", 1},
                   {"args", {{"name", "communication"}}}});
    const auto* p = all.data<uint8_t>() + r * longest;
    const auto rank_events = nlohmann::json::parse(p, p + length[r]);
    for (const auto& e : rank_events) {
      out.push_back(e);
      ++spans;
    }
  }
  StagedOutput file(path_, "metrics.trace");
  write_output_text(file, trace.dump());
  return spans;
}

}  // namespace st
