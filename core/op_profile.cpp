#include "core/op_profile.hpp"

#include <chrono>

namespace st {
namespace {

using Clock = std::chrono::steady_clock;

struct ThreadProfile {
  OpTimes ms{};
  OpKind current = OpKind::other;
  int recomputing = 0;
  Clock::time_point since = Clock::now();

  // Charges the time since the last change to the current kind; returns now.
  void charge() {
    const Clock::time_point now = Clock::now();
    ms[size_t(current)] += std::chrono::duration<double, std::milli>(now - since).count();
    since = now;
  }
};

thread_local ThreadProfile t_profile;

}  // namespace

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::other:
      return "other";
    case OpKind::matmul:
      return "matmul";
    case OpKind::attention:
      return "attention";
    case OpKind::layernorm:
      return "layernorm";
    case OpKind::gelu:
      return "gelu";
    case OpKind::rmsnorm:
      return "rmsnorm";
    case OpKind::rope:
      return "rope";
    case OpKind::swiglu:
      return "swiglu";
    case OpKind::cross_entropy:
      return "cross_entropy";
    case OpKind::embedding:
      return "embedding";
    case OpKind::bias_grad:
      return "bias_grad";
    case OpKind::cast_copy:
      return "cast_copy";
    case OpKind::optimizer:
      return "optimizer";
    case OpKind::quantize:
      return "quantize";
    case OpKind::collective_wait:
      return "collective_wait";
    case OpKind::recompute:
      return "recompute";
    case OpKind::count:
      break;
  }
  return "?";
}

OpTimes thread_op_times() {
  t_profile.charge();
  return t_profile.ms;
}

void reset_thread_op_times() {
  t_profile.ms = {};
  t_profile.since = Clock::now();
}

OpScope::OpScope(OpKind kind) : previous_(t_profile.current) {
  t_profile.charge();
  t_profile.current = t_profile.recomputing > 0 ? OpKind::recompute : kind;
}

OpScope::~OpScope() {
  t_profile.charge();
  t_profile.current = previous_;
}

RecomputeScope::RecomputeScope() : scope_(OpKind::recompute) {
  ++t_profile.recomputing;
}

RecomputeScope::~RecomputeScope() {
  --t_profile.recomputing;
}

}  // namespace st
