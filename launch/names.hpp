#pragma once
// Parsing of the words that name enum values in configs and on the command line. Only launch/
// parses text; the layers below take the enums. Each failure is an InputError naming `key` and
// the accepted words.
#include <cstddef>
#include <string>
#include <string_view>

#include "collectives/mpi_algorithm.hpp"
#include "collectives/process_group.hpp"
#include "core/data/token_stream.hpp"
#include "core/dtype.hpp"
#include "core/model/model.hpp"
#include "core/ops/matmul_path.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"
#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {

// Levenshtein distance: how many one-character edits turn `a` into `b` (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b);

// "fp32" (also "f32", "float32") or "bf16" (also "bfloat16").
DType parse_float_dtype(std::string_view text, std::string_view key);
// "auto", "mpi", "ring" or "shm".
Algorithm parse_algorithm(std::string_view text, std::string_view key);
Bf16MatmulPath parse_bf16_matmul_path(std::string_view text, std::string_view key);
Fp32MatmulEngine parse_fp32_matmul_engine(std::string_view text, std::string_view key);
// "reduce_each" or "reduce_last".
Accumulation parse_accumulation(std::string_view text, std::string_view key);
// "each" or "last".
ReplicaSync parse_replica_sync(std::string_view text, std::string_view key);
// sharding.gather_quantization: none, int8; sharding.reduce_quantization: none, int8, int4.
Quantization parse_gather_quantization(std::string_view text, std::string_view key);
Quantization parse_reduce_quantization(std::string_view text, std::string_view key);
// "none", "selective" or "full".
ActivationCheckpointing parse_activation_checkpointing(std::string_view text, std::string_view key);
// "adamw" or "sgd".
OptimizerKind parse_optimizer(std::string_view text, std::string_view key);
// optimizer.schedule: "cosine", "linear", "constant" or "wsd".
ScheduleKind parse_schedule_kind(std::string_view text, std::string_view key);
// optimizer.decay_shape: "linear", "cosine" or "sqrt".
DecayShape parse_decay_shape(std::string_view text, std::string_view key);
TokenFormat parse_token_format(std::string_view text, std::string_view key);

}  // namespace st
