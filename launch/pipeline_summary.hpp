#pragma once
// The start-up summary's pipeline lines (parallel.pp > 1): the schedule with its theoretical
// bubble, and each stage's blocks, parameters and rank.
#include "launch/session.hpp"

namespace st {

void print_pipeline_summary(Session& s);

}  // namespace st
