#include "simulate/engine_wire.hpp"

namespace st {

using nlohmann::json;

namespace {

json calls(const std::vector<TpCollective>& tp) {
  json j = json::array();
  for (const TpCollective& c : tp) j.push_back({int(c.op), c.bytes});
  return j;
}
std::vector<TpCollective> calls_from(const json& j) {
  std::vector<TpCollective> tp;
  for (const json& c : j) tp.push_back({TpOp(c.at(0).get<int>()), c.at(1).get<double>()});
  return tp;
}

json pipeline_json(const PipelinePlan& p) {
  json stages = json::array();
  for (const StageRange& s : p.stages) stages.push_back({s.first, s.end});
  return {p.ranks,
          int(p.schedule),
          p.virtual_stages,
          stages,
          p.boundary_bytes,
          p.weight_share,
          p.head_weight_share,
          p.optimizer,
          p.tp_shared_grad_bytes};
}
PipelinePlan pipeline_from(const json& j) {
  PipelinePlan p;
  p.ranks = j.at(0);
  p.schedule = PipeSchedule(j.at(1).get<int>());
  p.virtual_stages = j.at(2);
  for (const json& s : j.at(3)) p.stages.push_back({s.at(0).get<int>(), s.at(1).get<int>()});
  p.boundary_bytes = j.at(4);
  p.weight_share = j.at(5);
  p.head_weight_share = j.at(6);
  p.optimizer = j.at(7).get<std::vector<double>>();
  p.tp_shared_grad_bytes = j.at(8).get<std::vector<double>>();
  return p;
}

json ab(const AlphaBeta& x) {
  return {x.alpha, x.beta};
}
AlphaBeta ab_from(const json& j) {
  return {j.at(0).get<double>(), j.at(1).get<double>()};
}

}  // namespace

json request_json(const SimPlatform& p, MeshShape mesh, const StepPlan& plan, const SimOptions& o) {
  const PlatformLinks& l = p.links;
  json units = json::array();
  for (const UnitPlan& u : plan.units) units.push_back({u.padded_numel, u.shard_numel});
  return {{"platform",
           {{"nodes", p.nodes},
            {"ranks_per_node", p.ranks_per_node},
            {"nodes_per_machine", p.nodes_per_machine},
            {"machine_cores", p.machine_cores},
            {"intra", {ab(l.intra_gather), ab(l.intra_reduce)}},
            {"inter", {ab(l.inter_gather), ab(l.inter_reduce)}},
            {"shm_window", l.shm_window},
            {"shm", {ab(l.shm_gather), ab(l.shm_reduce)}},
            {"fat_tree", l.fabric == FabricKind::fat_tree},
            {"oversubscription", l.oversubscription},
            {"nic_per_rank", l.nic_per_rank},
            {"inter_cpu_per_byte", l.inter_cpu_per_byte},
            {"all_reduce", {ab(l.intra_all_reduce), ab(l.inter_all_reduce)}}}},
          {"mesh", {mesh.dp_shard, mesh.dp_replicate, mesh.tp, mesh.pp}},
          {"plan",
           {{"units", units},
            {"param_bytes", plan.param_bytes},
            {"reshard_after_forward", plan.reshard_after_forward},
            {"reshard_to", plan.reshard_to},
            {"prefetch", plan.prefetch},
            {"reduce_last", plan.accumulation == Accumulation::reduce_last},
            {"replica_sync_last", plan.replica_sync == ReplicaSync::last},
            {"replicated", plan.replicated},
            {"replicas", plan.replicas},
            {"replicas_in_place", plan.replicas_in_place},
            {"quantized",
             {plan.quantized.gather, plan.quantized.reduce_per_node, plan.quantized.replicas,
              int(plan.gather_quantization), int(plan.reduce_quantization),
              plan.codec_seconds_per_value}},
            {"micro_batches", plan.micro_batches},
            {"pipeline", pipeline_json(plan.pipeline)},
            {"tp", plan.tp},
            {"tp_calls",
             {calls(plan.tp_calls.root_forward_pre), calls(plan.tp_calls.root_forward_post),
              calls(plan.tp_calls.root_backward_pre), calls(plan.tp_calls.root_backward_post),
              calls(plan.tp_calls.block_forward), calls(plan.tp_calls.block_backward)}},
            {"tp_shared_grad_bytes", plan.tp_shared_grad_bytes},
            {"threads", plan.threads},
            {"root",
             {plan.compute.root_forward_pre, plan.compute.root_forward_post,
              plan.compute.root_backward_pre, plan.compute.root_backward_post}},
            {"block_forward", plan.compute.block_forward},
            {"block_backward", plan.compute.block_backward},
            {"optimizer", plan.optimizer},
            {"step_overhead", plan.step_overhead}}},
          {"options",
           {{"max_ring_steps", o.max_ring_steps},
            {"every_node", o.every_node},
            {"timeline_ranks", o.timeline_ranks}}}};
}

void request_from_json(const json& j, SimPlatform& p, MeshShape& mesh, StepPlan& plan,
                       SimOptions& o) {
  const json& jp = j.at("platform");
  p.nodes = jp.at("nodes");
  p.ranks_per_node = jp.at("ranks_per_node");
  p.nodes_per_machine = jp.at("nodes_per_machine");
  p.machine_cores = jp.at("machine_cores");
  PlatformLinks& l = p.links;
  l.intra_gather = ab_from(jp.at("intra").at(0));
  l.intra_reduce = ab_from(jp.at("intra").at(1));
  l.inter_gather = ab_from(jp.at("inter").at(0));
  l.inter_reduce = ab_from(jp.at("inter").at(1));
  l.shm_window = jp.at("shm_window");
  l.shm_gather = ab_from(jp.at("shm").at(0));
  l.shm_reduce = ab_from(jp.at("shm").at(1));
  l.fabric = jp.at("fat_tree").get<bool>() ? FabricKind::fat_tree : FabricKind::non_blocking;
  l.oversubscription = jp.at("oversubscription");
  l.nic_per_rank = jp.at("nic_per_rank");
  l.inter_cpu_per_byte = jp.at("inter_cpu_per_byte");
  l.intra_all_reduce = ab_from(jp.at("all_reduce").at(0));
  l.inter_all_reduce = ab_from(jp.at("all_reduce").at(1));
  mesh = {.dp_shard = j.at("mesh").at(0).get<int>(),
          .dp_replicate = j.at("mesh").at(1).get<int>(),
          .tp = j.at("mesh").at(2).get<int>(),
          .pp = j.at("mesh").at(3).get<int>()};
  const json& q = j.at("plan");
  for (const json& u : q.at("units"))
    plan.units.push_back({u.at(0).get<int64_t>(), u.at(1).get<int64_t>()});
  plan.param_bytes = q.at("param_bytes");
  plan.reshard_after_forward = q.at("reshard_after_forward");
  plan.reshard_to = q.at("reshard_to");
  plan.prefetch = q.at("prefetch");
  plan.accumulation =
      q.at("reduce_last").get<bool>() ? Accumulation::reduce_last : Accumulation::reduce_each;
  plan.replica_sync = q.at("replica_sync_last").get<bool>() ? ReplicaSync::last : ReplicaSync::each;
  plan.replicated = q.at("replicated");
  plan.replicas = q.at("replicas");
  plan.replicas_in_place = q.at("replicas_in_place");
  const json& qz = q.at("quantized");
  plan.quantized = {qz.at(0).get<bool>(), qz.at(1).get<int>(), qz.at(2).get<bool>()};
  plan.gather_quantization = Quantization(qz.at(3).get<int>());
  plan.reduce_quantization = Quantization(qz.at(4).get<int>());
  plan.codec_seconds_per_value = qz.at(5).get<double>();
  plan.micro_batches = q.at("micro_batches");
  plan.pipeline = pipeline_from(q.at("pipeline"));
  plan.tp = q.at("tp");
  const json& tc = q.at("tp_calls");
  plan.tp_calls = {calls_from(tc.at(0)), calls_from(tc.at(1)), calls_from(tc.at(2)),
                   calls_from(tc.at(3)), calls_from(tc.at(4)), calls_from(tc.at(5))};
  plan.tp_shared_grad_bytes = q.at("tp_shared_grad_bytes");
  plan.threads = q.at("threads");
  plan.compute.root_forward_pre = q.at("root").at(0);
  plan.compute.root_forward_post = q.at("root").at(1);
  plan.compute.root_backward_pre = q.at("root").at(2);
  plan.compute.root_backward_post = q.at("root").at(3);
  plan.compute.block_forward = q.at("block_forward").get<std::vector<double>>();
  plan.compute.block_backward = q.at("block_backward").get<std::vector<double>>();
  plan.optimizer = q.at("optimizer");
  plan.step_overhead = q.at("step_overhead");
  o.max_ring_steps = j.at("options").at("max_ring_steps");
  o.every_node = j.at("options").at("every_node");
  o.timeline_ranks = j.at("options").at("timeline_ranks");
}

json result_json(const SimResult& r) {
  json spans = json::array();
  for (const SimSpan& s : r.timeline) spans.push_back({s.rank, s.comm, s.name, s.begin, s.end});
  return {{"step", r.step},
          {"compute", r.compute},
          {"exposed", r.exposed},
          {"exposed_max", r.exposed_max},
          {"exposed_mean", r.exposed_mean},
          {"tp_exposed", r.tp_exposed},
          {"pp_bubble", r.pp_bubble},
          {"pp_bytes", r.pp_bytes},
          {"longest_wait", r.longest_wait},
          {"intra", r.intra_bytes},
          {"inter", r.inter_bytes},
          {"messages", r.messages},
          {"simulated_ranks", r.simulated_ranks},
          {"wall", r.wall_seconds},
          {"timeline", spans}};
}

SimResult result_from_json(const json& j) {
  SimResult r;
  r.step = j.at("step");
  r.compute = j.at("compute");
  r.exposed = j.at("exposed");
  r.exposed_max = j.at("exposed_max");
  r.exposed_mean = j.at("exposed_mean");
  r.tp_exposed = j.at("tp_exposed");
  r.pp_bubble = j.at("pp_bubble");
  r.pp_bytes = j.at("pp_bytes");
  r.longest_wait = j.at("longest_wait");
  r.intra_bytes = j.at("intra");
  r.inter_bytes = j.at("inter");
  r.messages = j.at("messages");
  r.simulated_ranks = j.at("simulated_ranks");
  r.wall_seconds = j.at("wall");
  for (const json& s : j.at("timeline"))
    r.timeline.push_back({s.at(0).get<int>(), s.at(1).get<bool>(), s.at(2).get<std::string>(),
                          s.at(3).get<double>(), s.at(4).get<double>()});
  return r;
}

}  // namespace st
