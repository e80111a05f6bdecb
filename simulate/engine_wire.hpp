#pragma once
// What crosses the pipe between `simulate` and the shardtrain-simgrid helper: the request
// (platform, mesh, step plan, options) and the result, as JSON.
#include <nlohmann/json.hpp>

#include "simulate/engine.hpp"

namespace st {

nlohmann::json request_json(const SimPlatform& platform, MeshShape mesh, const StepPlan& plan,
                            const SimOptions& options);
void request_from_json(const nlohmann::json& j, SimPlatform& platform, MeshShape& mesh,
                       StepPlan& plan, SimOptions& options);
nlohmann::json result_json(const SimResult& result);
SimResult result_from_json(const nlohmann::json& j);

}  // namespace st
