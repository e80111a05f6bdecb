#pragma once
// The SimGrid side of the engine (engine.hpp), built only into the shardtrain-simgrid helper:
// libsimgrid also exports MPI's symbols (SMPI), so it must never be linked into a program that
// runs Open MPI.
#include "simulate/engine.hpp"

namespace st {

SimResult run_simgrid_world(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                            const SimOptions& options);

}  // namespace st
