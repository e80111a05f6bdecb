#include "checkpoint/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "collectives/agreement.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/model/param_slice.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

const char* st_dtype(DType d) {
  return d == DType::bf16 ? "BF16" : "F32";
}

// A safetensors header above this is refused before it is read (GPT-2 XL's is ~100 KiB).
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) {
  InputFile f(path);
  const int64_t file_size = f.size();
  if (file_size < 8) fail_input("'{}' is not a safetensors file (too short)", path);
  std::string bytes(8, '\0');
  f.read_at(bytes.data(), 8, 0);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n <= std::min(uint64_t(file_size - 8), kMaxHeaderBytes)) {
    bytes.resize(8 + size_t(n));
    f.read_at(bytes.data() + 8, size_t(n), 8);
  }
  return parse_safetensors_header(path, bytes, file_size);
}

namespace {

StoredDtype parse_dtype(const std::string& path, const std::string& name, const nlohmann::json& t) {
  if (!t.is_object()) fail_input("'{}': tensor '{}' is not a JSON object", path, name);
  const auto it = t.find("dtype");
  if (it == t.end() || !it->is_string())
    fail_input("'{}': tensor '{}' has dtype {} where a string (F32, BF16 or F16) belongs", path,
               name, it == t.end() ? "missing" : it->dump());
  const std::string d = it->get<std::string>();
  if (d == "F32") return StoredDtype::f32;
  if (d == "BF16") return StoredDtype::bf16;
  if (d == "F16") return StoredDtype::f16;
  fail_input("'{}': tensor '{}' has dtype '{}'; shardtrain reads F32, BF16 and F16", path, name, d);
}

}  // namespace

size_t stored_size(StoredDtype d) {
  return d == StoredDtype::f32 ? 4 : 2;
}

int64_t tensor_bytes(const ParamSpec& spec, DType dtype) {
  return spec.real_numel() * int64_t(dtype_size(dtype));
}

void save_safetensors(const std::string& path, FsdpRuntime& fsdp, DType dtype,
                      const std::vector<std::pair<std::string, std::string>>& metadata,
                      const std::vector<size_t>& which) {
  ProcessGroup& group = fsdp.group();
  const auto& specs = fsdp.model().param_specs();
  check_not_sliced(specs, "a safetensors export");
  const size_t esize = dtype_size(dtype);
  std::vector<bool> held(specs.size(), which.empty());
  for (size_t i : which) held.at(i) = true;
  // The header: tensors in declaration order, packed back to back.
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::vector<int64_t> offset(specs.size());
  int64_t data_bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!held[i]) continue;
    offset[i] = data_bytes;
    const int64_t bytes = specs[i].real_numel() * int64_t(esize);
    header[specs[i].name] = {{"dtype", st_dtype(dtype)},
                             {"shape", specs[i].real_shape()},
                             {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const int64_t data_start = 8 + int64_t(text.size());
  if (group.rank() == 0) {
    OutputFile out(path);
    const uint64_t n = text.size();
    out.write(&n, 8);
    out.write(text.data(), text.size());
    // The whole file's blocks now: a disk too small fails here, before any rank writes.
    out.reserve(data_start + data_bytes);
    out.sync_and_close();
  }
  group.barrier()->wait();
  // Each rank writes its own elements of every parameter (real rows only).
  OutputFile out(path, OutputFile::Mode::existing);
  std::vector<char> buf;
  for (const ShardSpan& span : fsdp.spans()) {
    const size_t index = span.param;
    const int64_t first = span.param_offset;
    const int64_t n = std::min(span.master.numel(), specs[index].real_numel() - first);
    if (n <= 0 || !held[index]) continue;
    buf.resize(size_t(n) * esize);
    cast(span.master.raw(), DType::f32, buf.data(), dtype, size_t(n));
    out.write_at(buf.data(), buf.size(), data_start + offset[index] + first * int64_t(esize));
  }
  out.sync_and_close();
  group.barrier()->wait();
}

SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view bytes,
                                           int64_t file_size) {
  if (file_size < 8 || bytes.size() < 8)
    fail_input("'{}' is not a safetensors file (too short)", path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > uint64_t(file_size - 8) || n > kMaxHeaderBytes || bytes.size() - 8 < n)
    fail_input("'{}': safetensors header length {} does not fit the file", path, n);
  SafetensorsHeader h;
  h.json = parse_json_object(bytes.substr(8, size_t(n)), fmt::format("'{}': the header", path));
  h.data_start = 8 + int64_t(n);
  h.file_size = file_size;
  return h;
}

SafetensorsLayout check_safetensors_layout(const std::string& path, const SafetensorsHeader& h,
                                           const std::vector<ParamSpec>& specs,
                                           const std::vector<bool>& held_given) {
  const std::vector<bool> held =
      held_given.empty() ? std::vector<bool>(specs.size(), true) : held_given;
  ST_CHECK(held.size() == specs.size(), "{} flags for {} parameters", held.size(), specs.size());
  SafetensorsLayout layout{std::vector<int64_t>(specs.size()),
                           std::vector<StoredDtype>(specs.size())};
  const int64_t data_bytes = h.file_size - h.data_start;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!held[i]) continue;
    const std::string& name = specs[i].name;
    if (!h.json.contains(name))
      fail_input("'{}' has no tensor '{}' (the model needs every parameter)", path, name);
    const auto& t = h.json.at(name);
    layout.dtypes[i] = parse_dtype(path, name, t);
    const std::string where = fmt::format("'{}': tensor '{}'", path, name);
    if (!t.contains("shape") || !t.contains("data_offsets"))
      fail_input("{} needs 'shape' and 'data_offsets'", where);
    const Shape shape = json_int_array(t["shape"], where + " shape", 0, INT64_MAX);
    if (shape != specs[i].real_shape())
      fail_input("{} has shape {} but the model needs {}", where, shape_string(shape),
                 shape_string(specs[i].real_shape()));
    const auto off = json_int_array(t["data_offsets"], where + " data_offsets", 0, data_bytes);
    const int64_t bytes = specs[i].real_numel() * int64_t(stored_size(layout.dtypes[i]));
    if (off.size() != 2 || off[1] - off[0] != bytes)
      fail_input(
          "{} has data_offsets {} where [begin, begin + {}] inside the {} data bytes "
          "belongs",
          where, t["data_offsets"].dump(), bytes, data_bytes);
    layout.begin[i] = off[0];
  }
  // Every tensor the file holds is one the model has, and their byte ranges do not overlap.
  std::vector<std::pair<int64_t, size_t>> starts;  // (begin, parameter index)
  for (auto entry = h.json.begin(); entry != h.json.end(); ++entry) {
    const std::string& name = entry.key();
    if (name == "__metadata__") continue;
    const auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const ParamSpec& s) { return s.name == name; });
    if (it == specs.end())
      fail_input("'{}' holds tensor '{}', which this model does not have (a different model?)",
                 path, name);
    if (!held[size_t(it - specs.begin())])
      fail_input("'{}' holds tensor '{}', which the index assigns to another file", path, name);
    starts.emplace_back(layout.begin[size_t(it - specs.begin())], size_t(it - specs.begin()));
  }
  std::sort(starts.begin(), starts.end());
  auto end_of = [&](size_t k) {
    const size_t i = starts[k].second;
    return starts[k].first + specs[i].real_numel() * int64_t(stored_size(layout.dtypes[i]));
  };
  for (size_t k = 1; k < starts.size(); ++k)
    if (starts[k].first < end_of(k - 1))
      fail_input("'{}': tensors '{}' and '{}' overlap in the file", path,
                 specs[starts[k - 1].second].name, specs[starts[k].second].name);
  // The format indexes its whole byte buffer: no gap between tensors, nothing after the last.
  int64_t covered = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    if (starts[k].first != covered)
      fail_input(
          "'{}': {} bytes before tensor '{}' belong to no tensor (the data must be "
          "tensors back to back)",
          path, starts[k].first - covered, specs[starts[k].second].name);
    covered = end_of(k);
  }
  if (covered != data_bytes)
    fail_input(
        "'{}' has {} bytes after its last tensor (its tensors end at data byte {} of {}): "
        "a damaged or appended-to file",
        path, data_bytes - covered, covered, data_bytes);
  return layout;
}

}  // namespace st
