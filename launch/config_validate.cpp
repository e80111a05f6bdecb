// Validation of a config (ranges, and keys consistent with each other: both named), and the
// values parsed once into types (StepRange, ResumeFrom).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "launch/config.hpp"
#include "launch/names.hpp"

namespace st {

namespace {

void at_least_one(int64_t v, const char* key) {
  if (v < 1) fail_input("{} = {} must be at least 1", key, v);
}

void in_range(int64_t v, int64_t lo, int64_t hi, const char* key, const char* why) {
  if (v < lo || v > hi) fail_input("{} = {} must be in [{}, {}] ({})", key, v, lo, hi, why);
}

}  // namespace

void validate_model_config(const ModelConfig& model) {
  const ModelFamily& family = model_family(model.family);
  // Bounds far beyond any model that trains here, so every size computed from them fits
  // 64 bits; the memory check at start-up then says whether the model fits the machine.
  in_range(model.n_layer, 1, 1 << 16, "model.n_layer", "blocks");
  in_range(model.n_embd, 1, 1 << 17, "model.n_embd", "the width");
  in_range(model.n_head, 1, 1 << 17, "model.n_head", "attention heads");
  in_range(model.block_size, 1, 1 << 20, "model.block_size", "the context length");
  in_range(model.vocab_size, 1, 1 << 24, "model.vocab_size", "tokens");
  if (model.padded_vocab_size != 0 &&
      (model.padded_vocab_size < model.vocab_size || model.padded_vocab_size > (1 << 24)))
    fail_input(
        "model.padded_vocab_size = {} must be 0 (round model.vocab_size = {} up to a multiple of "
        "{}) or in [{}, {}]",
        model.padded_vocab_size, model.vocab_size, kVocabAlignment, model.vocab_size, 1 << 24);
  if (model.n_embd % model.n_head != 0)
    fail_input("model.n_embd = {} is not divisible by model.n_head = {}", model.n_embd,
               model.n_head);
  // ModelConfig::own holds every family key that was written, whichever family it belongs to.
  for (const auto& [key, value] : model.own)
    if (const auto owners = model_families_owning(key); !owners.empty() && !family.owns(key))
      fail_input("{} is a key of model.family = {}, but this run has model.family = {}", key,
                 family_names(owners), family.name);
  family.validate(model);
}

namespace {

void check_batch_splits(const Config& c, int ranks) {
  const int64_t divisor = int64_t(ranks) * c.training.micro_batches;
  if (c.training.global_batch % divisor != 0)
    fail_input(
        "training.global_batch = {} cannot be split evenly over {} rank(s) x "
        "training.micro_batches = {}; make it a multiple of {}",
        c.training.global_batch, ranks, c.training.micro_batches, divisor);
}

void validate_training(const Config& c) {
  if (!(c.data.val_fraction >= 0 && c.data.val_fraction < 1))
    fail_input("data.val_fraction = {} must be in [0, 1)", c.data.val_fraction);
  if (c.training.max_steps < 0)
    fail_input("training.max_steps = {} must not be negative", c.training.max_steps);
  in_range(c.training.global_batch, 1, 1 << 24, "training.global_batch", "sequences per step");
  in_range(c.training.micro_batches, 1, 1 << 24, "training.micro_batches", "per step");
  at_least_one(c.training.seq_len, "training.seq_len");
  if (c.training.seq_len > c.model.block_size)
    fail_input("training.seq_len = {} is longer than the model's context model.block_size = {}",
               c.training.seq_len, c.model.block_size);
  check_batch_splits(c, 1);  // at least one rank; the world's own size in validate_for_world
  if (c.training.grad_clip < 0)
    fail_input("training.grad_clip = {} must be >= 0 (0 disables clipping)", c.training.grad_clip);
  in_range(c.training.threads, 0, 1024, "training.threads",
           "OpenMP threads per rank; 0: cores / ranks on the node");
  if (c.training.seed < 0) fail_input("training.seed = {} must not be negative", c.training.seed);
  if (!(c.training.startup_timeout >= 0 && c.training.startup_timeout <= 86400))
    fail_input(
        "training.startup_timeout = {} must be in [0, 86400] seconds (how long MPI's start-up "
        "and the first agreement may take; 0: no bound)",
        c.training.startup_timeout);
  if (!(c.training.stall_timeout >= 0 && c.training.stall_timeout <= 86400))
    fail_input(
        "training.stall_timeout = {} must be in [0, 86400] seconds (how long a rank may be "
        "silent or stuck before the job ends; 0 turns the check off)",
        c.training.stall_timeout);
  if (c.training.eval_every < 0)
    fail_input(
        "training.eval_every = {} must not be negative (0: validate only after the last step)",
        c.training.eval_every);
  if (c.training.eval_tokens < 0)
    fail_input("training.eval_tokens = {} must not be negative (0: the final validation's windows)",
               c.training.eval_tokens);
  if (c.training.eval_tokens > 0 && c.training.eval_every == 0)
    fail_input(
        "training.eval_tokens = {} sizes the periodic validations, but training.eval_every = 0 "
        "asks for none: set training.eval_every = N as well, or leave eval_tokens at 0",
        c.training.eval_tokens);
}

void validate_optimizer(const Config& c) {
  if (!(c.schedule.lr > 0)) fail_input("optimizer.lr = {} must be > 0", c.schedule.lr);
  if (!(c.schedule.min_lr >= 0 && c.schedule.min_lr <= c.schedule.lr))
    fail_input("optimizer.min_lr = {} must be in [0, optimizer.lr = {}]", c.schedule.min_lr,
               c.schedule.lr);
  if (!(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1))
    fail_input("optimizer.beta1 = {} must be in [0, 1)", c.optimizer.beta1);
  if (!(c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1))
    fail_input("optimizer.beta2 = {} must be in [0, 1)", c.optimizer.beta2);
  if (!(c.optimizer.eps > 0)) fail_input("optimizer.eps = {} must be > 0", c.optimizer.eps);
  if (!(c.optimizer.weight_decay >= 0))
    fail_input("optimizer.weight_decay = {} must be >= 0", c.optimizer.weight_decay);
  if (c.schedule.warmup_steps < 0)
    fail_input("optimizer.warmup_steps = {} must not be negative", c.schedule.warmup_steps);
  if (!(c.schedule.decay_fraction > 0 && c.schedule.decay_fraction <= 1))
    fail_input(
        "optimizer.decay_fraction = {} must be in (0, 1] (the fraction of training.max_steps that "
        "optimizer.schedule = wsd spends decaying)",
        c.schedule.decay_fraction);
}

void validate_precision(const Config& c) {
  check_bf16_matmul_path(c.precision.bf16_matmul);
  if (c.precision.param_dtype == DType::f32 && c.precision.reduce_dtype == DType::bf16)
    fail_input(
        "precision.reduce_dtype = bf16 is less precise than precision.param_dtype = fp32; "
        "gradients would be reduced in less precision than the parameters they update. Use "
        "reduce_dtype = fp32");
  if (c.precision.reduce_dtype != DType::f32)
    fail_input(
        "precision.reduce_dtype = {}: only fp32 is supported (gradients are reduced and "
        "kept in FP32)",
        dtype_name(c.precision.reduce_dtype));
  if (c.precision.output_dtype != DType::f32)
    fail_input(
        "precision.output_dtype = {}: only fp32 is supported (logits feed the FP32 "
        "cross-entropy)",
        dtype_name(c.precision.output_dtype));
}

void validate_outputs(const Config& c) {
  if (c.sharding.prefetch < 0 || c.sharding.prefetch > 8)
    fail_input("sharding.prefetch = {} must be in [0, 8]", c.sharding.prefetch);
  // Refused by name whatever the world size; the product is checked once it is known.
  check_parallelism_supported(c, c.parallel.tp, c.parallel.pp);
  if (c.sharding.ranks_per_node < 0)
    fail_input("sharding.ranks_per_node = {} must be >= 0 (0: detect)", c.sharding.ranks_per_node);
  at_least_one(c.metrics.log_every, "metrics.log_every");
  if (c.checkpoint.every < 0)
    fail_input("checkpoint.every = {} must not be negative", c.checkpoint.every);
  if (c.checkpoint.keep < 1)
    fail_input("checkpoint.keep = {} must be at least 1", c.checkpoint.keep);
  if (!(c.checkpoint.async_timeout >= 1 && c.checkpoint.async_timeout <= 86400))
    fail_input("checkpoint.async_timeout = {} must be in [1, 86400] seconds",
               c.checkpoint.async_timeout);
}

}  // namespace

void validate_config(const Config& c) {
  validate_model_config(c.model);
  validate_training(c);
  validate_optimizer(c);
  validate_precision(c);
  validate_outputs(c);
}

void validate_for_world(const Config& c, int world_size) {
  ST_CHECK(world_size >= 1, "a world of {} ranks", world_size);
  // The ranks of one TP group read the same rows: the batch splits over the data-parallel ranks.
  check_batch_splits(c, mesh_shape(c, world_size).data_parallel());
  if (c.sharding.ranks_per_node > 0 && world_size % c.sharding.ranks_per_node != 0)
    fail_input("sharding.ranks_per_node = {} does not divide the {} ranks into whole nodes",
               c.sharding.ranks_per_node, world_size);
}

StepRange::StepRange(std::string_view view) {
  const std::string text(view);
  if (text.empty()) return;
  const size_t dots = text.find("..");
  try {
    if (dots == std::string::npos) throw std::invalid_argument("no '..'");
    size_t used = 0;
    first = std::stoll(text.substr(0, dots), &used);
    if (used != dots) throw std::invalid_argument("trailing characters");
    const std::string rest = text.substr(dots + 2);
    last = std::stoll(rest, &used);
    if (used != rest.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    fail_input("metrics.trace_steps = '{}': expected FIRST..LAST step numbers, e.g. '10..12'",
               text);
  }
  if (first < 1 || last < first)
    fail_input("metrics.trace_steps = '{}': need 1 <= FIRST <= LAST", text);
}

std::string StepRange::name() const {
  return first == 1 && last == INT64_MAX ? std::string() : fmt::format("{}..{}", first, last);
}

std::string ResumeFrom::name() const {
  if (newest()) return "auto";
  if (never()) return "never";
  return *path();
}

}  // namespace st
