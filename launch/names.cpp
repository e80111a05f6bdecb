#include "launch/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace st {
namespace {

template <class E>
E parse_word(std::string_view text, std::string_view key,
             const std::vector<std::pair<std::string_view, E>>& words, std::string_view expected) {
  for (const auto& [word, value] : words)
    if (text == word) return value;
  fail_input("{} = '{}' must be {}", key, text, expected);
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

DType parse_float_dtype(std::string_view text, std::string_view key) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::f32;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  fail_input(
      "{}: '{}' is not a dtype shardtrain stores: the accepted ones are fp32 (f32, float32) "
      "and bf16 (bfloat16)",
      key, text);
}

Algorithm parse_algorithm(std::string_view text, std::string_view key) {
  return parse_word<Algorithm>(text, key,
                               {{"auto", Algorithm::automatic},
                                {"mpi", Algorithm::mpi},
                                {"ring", Algorithm::ring},
                                {"shm", Algorithm::shm}},
                               "auto, mpi, ring or shm");
}

Bf16MatmulPath parse_bf16_matmul_path(std::string_view text, std::string_view key) {
  return parse_word<Bf16MatmulPath>(text, key,
                                    {{"auto", Bf16MatmulPath::automatic},
                                     {"native", Bf16MatmulPath::native},
                                     {"widened", Bf16MatmulPath::widened}},
                                    "auto, native or widened");
}

Fp32MatmulEngine parse_fp32_matmul_engine(std::string_view text, std::string_view key) {
  return parse_word<Fp32MatmulEngine>(text, key,
                                      {{"auto", Fp32MatmulEngine::automatic},
                                       {"onednn", Fp32MatmulEngine::onednn},
                                       {"packed", Fp32MatmulEngine::packed}},
                                      "auto, onednn or packed");
}

Accumulation parse_accumulation(std::string_view text, std::string_view key) {
  return parse_word<Accumulation>(
      text, key,
      {{"reduce_each", Accumulation::reduce_each}, {"reduce_last", Accumulation::reduce_last}},
      "reduce_each or reduce_last");
}

ReplicaSync parse_replica_sync(std::string_view text, std::string_view key) {
  return parse_word<ReplicaSync>(
      text, key, {{"each", ReplicaSync::each}, {"last", ReplicaSync::last}}, "each or last");
}

Quantization parse_gather_quantization(std::string_view text, std::string_view key) {
  return parse_word<Quantization>(
      text, key, {{"none", Quantization::none}, {"int8", Quantization::int8}}, "none or int8");
}

Quantization parse_reduce_quantization(std::string_view text, std::string_view key) {
  return parse_word<Quantization>(
      text, key,
      {{"none", Quantization::none}, {"int8", Quantization::int8}, {"int4", Quantization::int4}},
      "none, int8 or int4");
}

ActivationCheckpointing parse_activation_checkpointing(std::string_view text,
                                                       std::string_view key) {
  return parse_word<ActivationCheckpointing>(text, key,
                                             {{"none", ActivationCheckpointing::none},
                                              {"selective", ActivationCheckpointing::selective},
                                              {"full", ActivationCheckpointing::full}},
                                             "none, selective or full");
}

OptimizerKind parse_optimizer(std::string_view text, std::string_view key) {
  return parse_word<OptimizerKind>(
      text, key, {{"adamw", OptimizerKind::adamw}, {"sgd", OptimizerKind::sgd}}, "adamw or sgd");
}

ScheduleKind parse_schedule_kind(std::string_view text, std::string_view key) {
  return parse_word<ScheduleKind>(text, key,
                                  {{"cosine", ScheduleKind::cosine},
                                   {"linear", ScheduleKind::linear},
                                   {"constant", ScheduleKind::constant},
                                   {"wsd", ScheduleKind::wsd}},
                                  "cosine, linear, constant or wsd");
}

DecayShape parse_decay_shape(std::string_view text, std::string_view key) {
  return parse_word<DecayShape>(
      text, key,
      {{"linear", DecayShape::linear}, {"cosine", DecayShape::cosine}, {"sqrt", DecayShape::sqrt}},
      "linear, cosine or sqrt");
}

TokenFormat parse_token_format(std::string_view text, std::string_view key) {
  if (text == "auto") return TokenFormat::automatic;
  if (text == "llmc") return TokenFormat::llmc;
  if (text == "u16") return TokenFormat::u16;
  if (text == "u32") return TokenFormat::u32;
  fail_input("{} = '{}' is not a token format; use auto, llmc, u16 or u32", key, text);
}

}  // namespace st
