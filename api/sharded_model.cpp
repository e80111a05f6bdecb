#include "api/sharded_model.hpp"

#include <algorithm>
#include <cmath>

#include "api/evaluate.hpp"
#include "collectives/agreement.hpp"
#include "core/error.hpp"
#include "core/model/param_slice.hpp"
#include "core/op_profile.hpp"
#include "optim/clip.hpp"
#include "optim/optim_param.hpp"
#include "parallel/tensor_parallel.hpp"

namespace st {

ShardedModel::ShardedModel(Model& model, ProcessGroup& group, const ShardPolicy& policy)
    : ShardedModel(model, std::make_unique<DeviceMesh>(group, MeshShape{.dp_shard = group.size()}),
                   nullptr, policy) {}

ShardedModel::ShardedModel(Model& model, DeviceMesh& mesh, const ShardPolicy& policy)
    : ShardedModel(model, nullptr, &mesh, policy) {}

ShardedModel::ShardedModel(Model& model, std::unique_ptr<DeviceMesh> own_mesh, DeviceMesh* mesh,
                           const ShardPolicy& policy)
    : model_(model),
      own_mesh_(std::move(own_mesh)),
      mesh_(mesh ? *mesh : *own_mesh_),
      group_(mesh_.world()),
      policy_(policy) {
  if (!(policy.grad_clip >= 0))
    fail_input("ShardPolicy: grad_clip = {} must be >= 0 (0: off)", policy.grad_clip);
  if (ProcessGroup* tp = mesh_.tp_group()) {
    tensor_parallel_ = std::make_unique<GroupTensorParallel>(*tp, policy.fsdp.symmetric_memory);
    model.set_tensor_parallel(tensor_parallel_.get());  // refuses a model not built of slices
  }
  FsdpOptions fsdp = policy.fsdp;
  if (ProcessGroup* pp = mesh_.pipeline_group()) {
    PipelineOptions options = policy.pipeline;
    options.timeout_s = policy.fsdp.timeout_s;
    pipeline_ = std::make_unique<PipelineRuntime>(
        model, *pp, options, pipeline_split(model, pp->size(), options, policy.seq_len));
    fsdp.held_units = pipeline_->held_units();
    for (int u = 0; u < model.num_units(); ++u)
      fsdp.unit_owner.push_back(pipeline_->rank_of_unit(u));
    fsdp.accumulation = Accumulation::reduce_last;  // each unit reduced once a step
  }
  fsdp_ = std::make_unique<FsdpRuntime>(model, mesh_, fsdp, policy.seed);
  // The root unit lives on the first and the last stage alike: the norm counts the first's.
  const bool root_counted_elsewhere =
      pipeline_ && pipeline_->holds_last_stage() && !pipeline_->holds_first_stage();
  std::vector<OptimParam> params;
  for (ShardSpan& s : fsdp_->spans()) {
    params.push_back(make_optim_param(s.name, s.master, s.grad, s.weight_decay));
    // Every TP rank holds a parameter that TP does not split, and several a shared slice: the
    // norm counts the first holder's.
    const ParamSpec& spec = model.param_specs()[s.param];
    params.back().norm_counted_elsewhere =
        (spec.tp_ranks > 1 && spec.tp_rank % spec.tp_replicas != 0) ||
        (s.unit == 0 && root_counted_elsewhere);
  }
  std::vector<std::pair<size_t, Tensor>> grads;
  for (ShardSpan& s : fsdp_->spans()) grads.emplace_back(s.param, s.grad);
  tp_grad_sums_ =
      std::make_unique<TpGradientSums>(model.param_specs(), model.tp_partial_grads(), grads);
  optimizer_ = make_optimizer(std::move(params), policy.optimizer);
}

ShardedModel::~ShardedModel() = default;

std::unique_ptr<ShardedModel> fully_shard(Model& model, ProcessGroup& group,
                                          const ShardPolicy& policy) {
  return std::make_unique<ShardedModel>(model, group, policy);
}

StepResult ShardedModel::step(const std::vector<Batch>& micro_batches, int64_t loss_terms, float lr,
                              StepObserver* observer) {
  const double loss_sum = accumulate_gradients(micro_batches, loss_terms, observer);
  return apply_update(loss_sum, loss_terms, lr, observer);
}

double ShardedModel::accumulate_gradients(const std::vector<Batch>& micro_batches,
                                          int64_t loss_terms, StepObserver* observer) {
  if (micro_batches.empty()) fail_input("ShardedModel::step: no micro-batches");
  if (loss_terms <= 0) fail_input("ShardedModel::step: loss_terms = {} must be > 0", loss_terms);
  StepObserver none;
  StepObserver& watch = observer ? *observer : none;
  fsdp_->reset_comm();
  if (tensor_parallel_) tensor_parallel_->reset_stats();
  fsdp_->reset_memory_peak();
  fsdp_->begin_step(int(micro_batches.size()));
  double loss_sum = 0;
  if (pipeline_) {
    loss_sum = pipelined_gradients(micro_batches, loss_terms);
    watch.before(StepPhase::finish_backward);
  } else {
    for (size_t m = 0; m < micro_batches.size(); ++m) {
      loss_sum += forward_backward(int(m), micro_batches[m], loss_terms,
                                   watch.micro_batch_hooks(int(m), *fsdp_));
      watch.after_micro_batch(int(m));
    }
    watch.before(StepPhase::finish_backward);
  }
  fsdp_->finish_backward();
  if (pipeline_) {
    fsdp_->reshard_all();
    sum_root_gradient();
  }
  // The parts TP ranks computed of some gradients (shared KV heads, the norms under sequence
  // parallelism), summed now: the gradient shards are final when this returns.
  if (tensor_parallel_ && !tp_grad_sums_->empty()) {
    OpScope wait(OpKind::collective_wait);
    tp_grad_sums_->sum(*tensor_parallel_);
  }
  watch.after(StepPhase::finish_backward);
  return loss_sum;
}

StepResult ShardedModel::apply_update(double loss_sum, int64_t loss_terms, float lr,
                                      StepObserver* observer) {
  if (loss_terms <= 0) fail_input("ShardedModel::step: loss_terms = {} must be > 0", loss_terms);
  StepObserver none;
  StepObserver& watch = observer ? *observer : none;
  watch.before(StepPhase::update);
  StepResult r = update(loss_sum, loss_terms, lr);
  watch.after(StepPhase::update);
  r.comm = fsdp_->comm();
  if (tensor_parallel_) {
    const TpCommStats& tp = tensor_parallel_->stats();
    r.comm.tp_exposed_ms = tp.ms, r.comm.tp_bytes = tp.bytes, r.comm.tp_collectives = tp.calls;
  }
  r.memory = fsdp_->memory();
  if (pipeline_) r.pipeline = pipeline_->stats();
  return r;
}

double ShardedModel::forward_backward(int micro, const Batch& batch, int64_t loss_terms,
                                      UnitHooks& hooks) {
  fsdp_->begin_micro_batch(micro);
  return model_.forward_backward(batch, 1.0f / float(loss_terms), hooks);
}

double ShardedModel::pipelined_gradients(const std::vector<Batch>& micro_batches,
                                         int64_t loss_terms) {
  fsdp_->hold_for_step(true);
  const double loss = pipeline_->train(micro_batches, 1.0f / float(loss_terms));
  fsdp_->reduce_held_units();
  return loss;
}

void ShardedModel::sum_root_gradient() {
  // The first stage's embedding gradient and the last stage's head and final norm gradients
  // (both, with tied embeddings) are parts of one root unit's: each end sends its shard to the
  // other and adds what it receives. a + b and b + a are the same floats, so both ends keep the
  // same gradient, and the optimizer the same weights (Megatron's embedding all-reduce).
  ProcessGroup& pp = *mesh_.pipeline_group();
  const bool first = pipeline_->holds_first_stage(), last = pipeline_->holds_last_stage();
  if (first == last) return;  // a middle stage, or one rank holding both ends
  const Tensor& grad = fsdp_->grad_shard(0);
  Tensor theirs = Tensor::empty("root_grad.peer", {grad.numel()}, DType::f32);
  const int peer = first ? pp.size() - 1 : 0;
  const P2POptions options{.tag = 0, .timeout_s = policy_.fsdp.timeout_s};
  OpScope wait(OpKind::collective_wait);
  auto got = pp.recv(theirs, peer, options);
  pp.send(grad, peer, options)->wait();
  got->wait();
  float* mine = grad.data<float>();
  const float* other = theirs.data<float>();
  for (int64_t i = 0; i < grad.numel(); ++i) mine[i] += other[i];
}

double ShardedModel::pipelined_loss(const Batch& batch) {
  fsdp_->hold_for_step(false);
  return pipeline_->forward_only({batch});
}

double ShardedModel::loss_share(double loss_sum) const {
  return mesh_.tp_rank() == 0 ? loss_sum : 0.0;
}

StepResult ShardedModel::update(double loss_sum, int64_t loss_terms, float lr) {
  const int64_t step = optimizer_->steps_taken() + 1;
  // The norm is summed over the model group (dp_shard x tp; the shard group without TP), whose
  // gradient shards (all-reduced across replicas) together are the whole gradient once; the
  // loss over the world, each data-parallel place's once. Without replicas the model group is
  // the world and the loss rides along in the norm's all-reduce.
  double riders[] = {loss_share(loss_sum)};
  const bool replicated = mesh_.replica_group() != nullptr;
  if (replicated) {
    Tensor loss = Tensor::empty("step_loss", {1}, DType::f64);
    loss.data<double>()[0] = riders[0];
    OpScope wait(OpKind::collective_wait);
    group_.all_reduce(loss)->wait();
    riders[0] = loss.data<double>()[0];
  }
  StepResult r;
  r.grad_norm = global_grad_norm(optimizer_->params(), mesh_.whole_model_group(),
                                 replicated ? std::span<double>() : std::span<double>(riders),
                                 fmt::format("step {}", step));
  r.loss = riders[0] / double(loss_terms);
  if (!std::isfinite(r.loss)) fail_agreed("step {}: the loss ({}) is not finite", step, r.loss);
  // Clipping happens inside the optimizer's pass (no separate pass over the gradients).
  optimizer_->step(lr, clip_factor(r.grad_norm, policy_.grad_clip));
  return r;
}

double ShardedModel::evaluate(const Batch& batch, int64_t loss_terms) {
  const double loss = pipeline_ ? pipelined_loss(batch) : model_.forward_loss(batch, *fsdp_);
  return sum_over_group(loss_share(loss), *fsdp_, group_) / double(loss_terms);
}

double ShardedModel::loss_sum_over_windows(int64_t windows, int64_t chunk,
                                           const std::function<Batch(int64_t, int64_t)>& batch) {
  if (!pipeline_) return sharded_loss_sum(model_, *fsdp_, windows, chunk, batch);
  // Every stage's shard group splits the windows alike; the last stage's losses (each TP
  // group's once) summed over the ranks holding one copy of the model.
  const auto forward = [this](const Batch& b) { return loss_share(pipelined_loss(b)); };
  return sharded_loss_sum(forward, fsdp_->group(), windows, chunk, batch, *fsdp_,
                          mesh_.whole_model_group());
}

Tensor ShardedModel::whole_master(size_t index) {
  const ParamSpec& spec = model_.param_specs()[index];
  if (pipeline_) {
    // Gathered on the stage that holds it, then sent to every stage.
    const int owner = pipeline_->rank_of_unit(spec.unit);
    ProcessGroup& pp = *mesh_.pipeline_group();
    Tensor whole = pp.rank() == owner ? gathered_master(index)
                                      : Tensor::empty(spec.name, spec.whole_shape(), DType::f32);
    pp.broadcast(whole, owner)->wait();
    return whole;
  }
  return gathered_master(index);
}

Tensor ShardedModel::gathered_master(size_t index) {
  Tensor slice = fsdp_->gather_master(index);
  const ParamSpec& spec = model_.param_specs()[index];
  ProcessGroup* tp = mesh_.tp_group();
  if (!tp || !spec.sliced()) return slice;
  const int64_t n = slice.numel();
  Tensor all = Tensor::empty(spec.name + ".slices", {tp->size() * n}, DType::f32);
  tp->all_gather(slice, all)->wait();
  Tensor whole = Tensor::empty(spec.name, spec.whole_shape(), DType::f32);
  for (int t = 0; t < tp->size(); ++t) {
    const SliceMap map(spec.whole_shape(), spec.placement, t, tp->size());
    const float* from = all.data<float>() + t * n;
    for (int64_t k = 0; k < n; ++k) whole.data<float>()[map.global(k)] = from[k];
  }
  return whole;
}

nlohmann::json ShardedModel::checkpoint_meta(int64_t step, const nlohmann::json& extra) const {
  nlohmann::json hyper = nlohmann::json::object();
  for (const auto& [key, value] : model_.hyperparameters()) hyper[key] = value;
  nlohmann::json meta = {
      {"model", hyper},
      {"optimizer",
       {{"name", optimizer_name(policy_.optimizer.kind)},
        {"steps_taken", optimizer_->steps_taken()}}},
      {"precision", {{"param_dtype", std::string(dtype_name(policy_.fsdp.param_dtype))}}},
      {"schedule", {{"step", step}}}};
  if (extra.is_object()) meta.update(extra);
  return meta;
}

void ShardedModel::check_checkpoint(const CheckpointInfo& info, const nlohmann::json& want) const {
  check_saved_sections(info.path, info.meta, want, {"model", "optimizer"});
  check_checkpoint_layout(info, *fsdp_);
}

void ShardedModel::load(const CheckpointInfo& info) {
  load_checkpoint(info, *fsdp_, optimizer_checkpoint_states(*optimizer_));
  optimizer_->set_steps_taken(info.step);
}

std::string ShardedModel::save(const std::string& root, int64_t step, int keep) {
  SaveOptions options;
  options.keep = keep;
  return save_checkpoint(root, step, checkpoint_meta(step), *fsdp_,
                         optimizer_checkpoint_states(*optimizer_), options);
}

int64_t ShardedModel::resume(const std::string& root) {
  std::string path;
  CheckpointInfo info;
  run_agreed(group_, [&] {
    path = latest_checkpoint(root);
    if (path.empty()) return;
    info = read_checkpoint_info(path);
    check_checkpoint(info, checkpoint_meta(info.step));
  });
  if (path.empty()) return 0;
  load(info);
  return info.step;
}

std::vector<ShardedState> optimizer_checkpoint_states(Optimizer& optimizer) {
  std::vector<ShardedState> states{{"master", {}}};
  for (const OptimParam& p : optimizer.params()) states[0].spans.push_back(p.master);
  // Optimizer state comes as "<span name>.<state>" per span, spans in order.
  const auto& params = optimizer.params();
  size_t k = 0;
  for (auto& [name, tensor] : optimizer.state()) {
    while (k < params.size() && name.rfind(params[k].name + ".", 0) != 0) ++k;
    ST_CHECK(k < params.size(), "optimizer state '{}' matches no parameter span", name);
    const std::string kind = name.substr(params[k].name.size() + 1);
    auto it = std::find_if(states.begin(), states.end(),
                           [&](const ShardedState& s) { return s.name == kind; });
    if (it == states.end()) it = states.insert(states.end(), ShardedState{kind, {}});
    it->spans.push_back(tensor);
  }
  return states;
}

void check_saved_sections(const std::string& path, const nlohmann::json& saved_meta,
                          const nlohmann::json& want, const std::vector<std::string>& sections) {
  for (const std::string& section : sections)
    for (auto& [key, value] : want[section].items()) {
      // The family is checked before, naming both (absent in manifests older than it).
      if (key == "steps_taken" || key == "family") continue;
      const nlohmann::json& saved = saved_meta.value(section, nlohmann::json::object());
      if (!saved.is_object() || !saved.contains(key) || saved[key] != value)
        fail_input("checkpoint '{}' was saved with {}.{} = {}, this run has {}", path, section, key,
                   saved.is_object() && saved.contains(key) ? saved[key].dump() : "nothing",
                   value.dump());
    }
}

}  // namespace st
