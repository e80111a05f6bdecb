#include "checkpoint/hf_weights.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "collectives/agreement.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/model/param_slice.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

// An index lists a few thousand tensors at most (a 70B Llama's is ~70 KB): far larger is refused
// before it is read.
constexpr int64_t kMaxIndexBytes = int64_t(64) << 20;

bool is_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// An index read once: weight_map (tensor -> file name) and metadata.total_size (-1: none).
struct WeightIndex {
  std::map<std::string, std::string> map;
  int64_t total_size = -1;
};

// The index, every check that needs no header done.
WeightIndex read_weight_index(const std::string& index, const std::vector<ParamSpec>& specs) {
  std::error_code ec;
  const auto bytes = fs::file_size(index, ec);
  if (!ec && int64_t(bytes) > kMaxIndexBytes)
    fail_input("'{}' is {} bytes: not an index of safetensors files (at most {} read)", index,
               bytes, kMaxIndexBytes);
  const nlohmann::json j =
      parse_json_object(read_regular_text_file(index), fmt::format("'{}'", index));
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    fail_input("'{}' has no weight_map object (tensor name -> file)", index);
  WeightIndex w;
  std::map<std::string, std::string>& map = w.map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      fail_input("'{}': weight_map['{}'] = {} must be a file name", index, name, file.dump());
    const std::string f = file.get<std::string>();
    // A file beside the index: never a path that leaves the folder.
    if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos)
      fail_input("'{}': weight_map['{}'] = '{}' must name a file in the same folder", index, name,
                 f);
    map[name] = f;
  }
  for (const ParamSpec& s : specs)
    if (!map.count(s.name))
      fail_input("'{}' does not name tensor '{}' (the model needs every parameter)", index, s.name);
  std::set<std::string> names;
  for (const ParamSpec& s : specs) names.insert(s.name);
  for (const auto& entry : map)
    if (!names.count(entry.first))
      fail_input("'{}' names tensor '{}', which this model does not have (a different model?)",
                 index, entry.first);
  if (j.contains("metadata") && !j["metadata"].is_object())
    fail_input("'{}': metadata = {} must be an object", index, j["metadata"].dump());
  if (j.contains("metadata") && j["metadata"].contains("total_size"))
    w.total_size = json_int_at(j["metadata"], "total_size", fmt::format("'{}': metadata", index), 0,
                               INT64_MAX);
  return w;
}

// The index's total_size, when it gives one, against what the tensors take in their files.
void check_total_size(const std::string& index, int64_t given, const WeightsPlan& plan,
                      const std::vector<ParamSpec>& specs) {
  if (given < 0) return;
  int64_t bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i)
    bytes += specs[i].real_numel() * int64_t(stored_size(plan.dtypes[i]));
  if (given != bytes)
    fail_input("'{}': metadata.total_size = {} but its tensors take {} bytes", index, given, bytes);
}

void plan_one_file(WeightsPlan& plan, const std::string& file, const std::vector<ParamSpec>& specs,
                   const std::vector<bool>& held) {
  const SafetensorsHeader h = read_safetensors_header(file);
  const SafetensorsLayout layout = check_safetensors_layout(file, h, specs, held);
  const size_t k = plan.files.size();
  plan.files.push_back(file);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!held.empty() && !held[i]) continue;
    plan.file_of[i] = k;
    plan.offset[i] = h.data_start + layout.begin[i];
    plan.dtypes[i] = layout.dtypes[i];
  }
}

// `n` stored values into FP32.
void widen(const char* stored, StoredDtype dtype, float* out, size_t n) {
  if (dtype == StoredDtype::f16) {
    for (size_t k = 0; k < n; ++k) {
      uint16_t h;
      std::memcpy(&h, stored + 2 * k, 2);
      out[k] = half_to_float(h);
    }
  } else {
    cast(stored, dtype == StoredDtype::bf16 ? DType::bf16 : DType::f32, out, DType::f32, n);
  }
}

}  // namespace

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f,
                 mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = std::ldexp(float(mantissa), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exponent == 31 ? sign | 0x7f800000u | mantissa << 13
                                       : sign | (exponent + 112) << 23 | mantissa << 13;
  return std::bit_cast<float>(bits);
}

std::string weights_config_json(const std::string& weights) {
  if (is_folder(weights)) return (fs::path(weights) / "config.json").string();
  return (fs::path(weights).parent_path() / "config.json").string();
}

std::string weights_tokenizer_json(const std::string& weights) {
  if (!is_folder(weights)) return "";
  const std::string path = (fs::path(weights) / "tokenizer.json").string();
  // One that is not a regular file (a FIFO) is refused by name where it is read, not missed.
  return fs::exists(path) ? path : "";
}

WeightsPlan plan_weights(const std::string& weights, const std::vector<ParamSpec>& specs) {
  WeightsPlan plan;
  plan.source = weights;
  plan.file_of.assign(specs.size(), 0);
  plan.offset.assign(specs.size(), 0);
  plan.dtypes.assign(specs.size(), StoredDtype::f32);
  if (!is_folder(weights)) {
    plan_one_file(plan, weights, specs, {});
    return plan;
  }
  const fs::path folder(weights);
  const std::string index = (folder / kIndexName).string();
  if (!fs::exists(index)) {
    const std::string single = (folder / kSingleFileName).string();
    if (!fs::exists(single))
      fail_input("'{}' holds neither {} nor {} (a Hugging Face model folder has one of them)",
                 weights, kSingleFileName, kIndexName);
    plan_one_file(plan, single, specs, {});
    return plan;
  }
  const WeightIndex w = read_weight_index(index, specs);
  const std::map<std::string, std::string>& map = w.map;
  std::vector<std::string> names;  // the files, each once, in sorted order
  for (const auto& [tensor, file] : map) names.push_back(file);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& name : names) {
    const std::string file = (folder / name).string();
    if (!fs::is_regular_file(file))
      fail_input("'{}' names '{}', which is not a file in '{}'", index, name, weights);
    std::vector<bool> held(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) held[i] = map.at(specs[i].name) == name;
    plan_one_file(plan, file, specs, held);
  }
  check_total_size(index, w.total_size, plan, specs);
  return plan;
}

DType plan_compute_dtype(const WeightsPlan& plan) {
  const bool all_bf16 =
      !plan.dtypes.empty() && std::all_of(plan.dtypes.begin(), plan.dtypes.end(),
                                          [](StoredDtype d) { return d == StoredDtype::bf16; });
  return all_bf16 ? DType::bf16 : DType::f32;
}

void load_weights(const WeightsPlan& plan, FsdpRuntime& fsdp) {
  const auto& specs = fsdp.model().param_specs();
  ST_CHECK(plan.file_of.size() == specs.size(), "a plan of {} tensors for {} parameters",
           plan.file_of.size(), specs.size());
  // A non-finite value or a failed read is found by one rank; every rank reports it.
  run_agreed(fsdp.model_group(), [&] {
    std::vector<std::unique_ptr<InputFile>> files;
    for (const std::string& f : plan.files) files.push_back(std::make_unique<InputFile>(f));
    std::vector<char> buf;
    for (const ShardSpan& span : fsdp.spans()) {
      const size_t index = span.param;
      const ParamSpec& spec = specs[index];
      const size_t esize = stored_size(plan.dtypes[index]);
      // A slice is runs of consecutive elements of the whole tensor (rows, or a row's piece):
      // each run that lies in this span is one read of exactly its bytes.
      const SliceMap map(spec);
      float* dst = span.master.data<float>();
      for (int64_t i = 0, end = span.master.numel(); i < end;) {
        const int64_t local = span.param_offset + i, g = map.global(local);
        const int64_t len = std::min(end - i, map.run() - local % map.run());
        // Padding rows are not in the file: they stay zero.
        const int64_t n = std::clamp<int64_t>(spec.real_numel() - g, 0, len);
        std::fill(dst + i + n, dst + i + len, 0.f);
        if (n > 0) {
          buf.resize(size_t(n) * esize);
          files[plan.file_of[index]]->read_at(buf.data(), buf.size(),
                                              plan.offset[index] + g * int64_t(esize));
          widen(buf.data(), plan.dtypes[index], dst + i, size_t(n));
          for (int64_t k = 0; k < n; ++k)
            if (!std::isfinite(dst[i + k]))
              fail_input("'{}': tensor '{}' holds a non-finite value ({}) at element {}",
                         plan.files[plan.file_of[index]], spec.name, dst[i + k], g + k);
        }
        i += len;
      }
    }
  });
}

void load_safetensors(const std::string& weights, FsdpRuntime& fsdp) {
  WeightsPlan plan;
  // A rank on another node may see another file, or none.
  run_agreed(fsdp.model_group(), [&] { plan = plan_weights(weights, fsdp.model().param_specs()); });
  load_weights(plan, fsdp);
}

std::vector<std::vector<size_t>> split_into_shards(const std::vector<ParamSpec>& specs, DType dtype,
                                                   int64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const int64_t bytes = tensor_bytes(specs[i], dtype);
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
  }
  return shards;
}

std::string shard_file_name(size_t index, size_t count) {
  if (count == 1) return kSingleFileName;
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

std::string shard_index_json(const std::vector<ParamSpec>& specs, DType dtype,
                             const std::vector<std::vector<size_t>>& shards) {
  int64_t total = 0;
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k)
    for (size_t i : shards[k]) {
      map[specs[i].name] = shard_file_name(k, shards.size());
      total += tensor_bytes(specs[i], dtype);
    }
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  return index.dump(2) + "\n";
}

int64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) != 0))
    ++digits;
  const std::string unit = text.substr(digits);
  static const std::map<std::string, int64_t> units = {{"", 1},
                                                       {"B", 1},
                                                       {"KB", 1000},
                                                       {"MB", 1000000},
                                                       {"GB", 1000000000},
                                                       {"KiB", int64_t(1) << 10},
                                                       {"MiB", int64_t(1) << 20},
                                                       {"GiB", int64_t(1) << 30}};
  const auto it = units.find(unit);
  if (digits == 0 || digits > 12 || it == units.end())
    fail_input("{} = '{}' must be a size such as 5GB, 500MB, 64KiB or a number of bytes", flag,
               text);
  const int64_t count = std::stoll(text.substr(0, digits));  // at most 12 digits: no overflow
  const int64_t limit = int64_t(1) << 50;
  if (count <= 0 || count > limit / it->second)
    fail_input("{} = '{}' must be between 1 byte and 1 PiB", flag, text);
  return count * it->second;
}

}  // namespace st
