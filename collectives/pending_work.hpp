#pragma once
// For backends only: a Work whose runner may mark it started and finish it.
#include "collectives/work.hpp"

namespace st {

class PendingWork final : public Work {
 public:
  using Work::finish;
  using Work::mark_started;
  using Work::Work;
};

}  // namespace st
