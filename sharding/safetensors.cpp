#include "sharding/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/file_io.hpp"
#include "core/ops/elementwise.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

const char* st_dtype(DType d) {
  return d == DType::bf16 ? "BF16" : "F32";
}

struct Header {
  nlohmann::json json;
  int64_t data_start = 0;  // 8 + header length
  int64_t file_size = 0;
};

Header read_header(const std::string& path) {
  InputFile f(path);
  Header h;
  h.file_size = f.size();
  uint64_t n = 0;
  if (h.file_size < 8) fail_input("'{}' is not a safetensors file (too short)", path);
  f.read_at(&n, 8, 0);
  if (n > uint64_t(h.file_size - 8) || n > (uint64_t(100) << 20))
    fail_input("'{}': safetensors header length {} does not fit the file", path, n);
  std::string text(size_t(n), '\0');
  f.read_at(text.data(), text.size(), 8);
  h.json = nlohmann::json::parse(text, nullptr, false);
  if (h.json.is_discarded() || !h.json.is_object())
    fail_input("'{}': the safetensors header is not a JSON object", path);
  h.data_start = 8 + int64_t(n);
  return h;
}

DType parse_dtype(const std::string& path, const std::string& name, const nlohmann::json& t) {
  const std::string d = t.value("dtype", "");
  if (d == "F32") return DType::f32;
  if (d == "BF16") return DType::bf16;
  fail_input("'{}': tensor '{}' has dtype '{}'; shardtrain reads F32 and BF16", path, name, d);
}

}  // namespace

void save_safetensors(const std::string& path, FsdpRuntime& fsdp, DType dtype,
                      const std::vector<std::pair<std::string, std::string>>& metadata) {
  ProcessGroup& group = fsdp.group();
  const auto& specs = fsdp.model().param_specs();
  const size_t esize = dtype_size(dtype);
  // The header: tensors in declaration order, packed back to back.
  nlohmann::ordered_json header;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  std::vector<int64_t> offset(specs.size());
  int64_t data_bytes = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    offset[i] = data_bytes;
    const int64_t bytes = specs[i].numel() * int64_t(esize);
    header[specs[i].name] = {{"dtype", st_dtype(dtype)},
                             {"shape", specs[i].shape},
                             {"data_offsets", {data_bytes, data_bytes + bytes}}};
    data_bytes += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const int64_t data_start = 8 + int64_t(text.size());
  const std::string tmp = path + ".tmp";
  try {
    if (group.rank() == 0) {
      OutputFile out(tmp);
      const uint64_t n = text.size();
      out.write(&n, 8);
      out.write(text.data(), text.size());
      out.sync_and_close();
      fs::resize_file(tmp, uint64_t(data_start + data_bytes));
    }
    group.barrier()->wait();
    // Each rank writes its own elements of every parameter.
    OutputFile out(tmp, OutputFile::Mode::existing);
    std::vector<char> buf;
    for (const ShardSpan& span : fsdp.spans()) {
      const size_t index = span.param;
      const int64_t first = span.param_offset;
      const int64_t n = span.master.numel();
      buf.resize(size_t(n) * esize);
      cast(span.master.raw(), DType::f32, buf.data(), dtype, size_t(n));
      out.write_at(buf.data(), buf.size(), data_start + offset[index] + first * int64_t(esize));
    }
    out.sync_and_close();
  } catch (...) {
    std::error_code ec;  // no partial file is left behind
    fs::remove(tmp, ec);
    throw;
  }
  group.barrier()->wait();
  if (group.rank() == 0) fs::rename(tmp, path);
  group.barrier()->wait();
}

DType safetensors_dtype(const std::string& path) {
  const Header h = read_header(path);
  for (auto& [name, t] : h.json.items())
    if (name != "__metadata__") return parse_dtype(path, name, t);
  fail_input("'{}' holds no tensors", path);
}

DType load_safetensors(const std::string& path, FsdpRuntime& fsdp) {
  const Header h = read_header(path);
  const auto& specs = fsdp.model().param_specs();
  DType file_dtype = DType::f32;
  bool first_dtype = true;
  // Check every parameter's entry before reading anything.
  std::vector<int64_t> begin(specs.size());
  std::vector<DType> dtypes(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    if (!h.json.contains(name))
      fail_input("'{}' has no tensor '{}' (the model needs every parameter)", path, name);
    const auto& t = h.json[name];
    dtypes[i] = parse_dtype(path, name, t);
    if (first_dtype) file_dtype = dtypes[i], first_dtype = false;
    Shape shape;
    try {
      shape = t.at("shape").get<Shape>();
      const auto off = t.at("data_offsets").get<std::vector<int64_t>>();
      if (off.size() != 2) throw std::runtime_error("data_offsets needs two numbers");
      begin[i] = off[0];
      const int64_t bytes = specs[i].numel() * int64_t(dtype_size(dtypes[i]));
      if (shape == specs[i].shape &&
          (off[1] - off[0] != bytes || off[0] < 0 || h.data_start + off[1] > h.file_size))
        fail_input("'{}': tensor '{}' has data_offsets [{}, {}] outside the file or not {} bytes",
                   path, name, off[0], off[1], bytes);
    } catch (const std::exception& e) {
      if (dynamic_cast<const InputError*>(&e)) throw;
      fail_input("'{}': tensor '{}': {}", path, name, e.what());
    }
    if (shape != specs[i].shape)
      fail_input("'{}': tensor '{}' has shape {} but the model needs {}", path, name,
                 shape_string(shape), shape_string(specs[i].shape));
  }
  // Every tensor the file holds is one the model has, and their byte ranges do not overlap.
  std::vector<std::pair<int64_t, std::string>> starts;
  for (auto& [name, t] : h.json.items()) {
    if (name == "__metadata__") continue;
    const auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const ParamSpec& s) { return s.name == name; });
    if (it == specs.end())
      fail_input("'{}' holds tensor '{}', which this model does not have (a different model?)",
                 path, name);
    starts.emplace_back(begin[size_t(it - specs.begin())], name);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t k = 1; k < starts.size(); ++k) {
    const auto& [prev_begin, prev_name] = starts[k - 1];
    const auto it = std::find_if(specs.begin(), specs.end(),
                                 [&](const ParamSpec& s) { return s.name == prev_name; });
    const size_t i = size_t(it - specs.begin());
    const int64_t prev_end = prev_begin + specs[i].numel() * int64_t(dtype_size(dtypes[i]));
    if (starts[k].first < prev_end)
      fail_input("'{}': tensors '{}' and '{}' overlap in the file", path, prev_name,
                 starts[k].second);
  }
  InputFile f(path);
  std::vector<char> buf;
  for (const ShardSpan& span : fsdp.spans()) {
    const size_t index = span.param;
    const int64_t first = span.param_offset;
    const int64_t n = span.master.numel();
    const size_t esize = dtype_size(dtypes[index]);
    buf.resize(size_t(n) * esize);
    f.read_at(buf.data(), buf.size(), h.data_start + begin[index] + first * int64_t(esize));
    cast(buf.data(), dtypes[index], span.master.raw(), DType::f32, size_t(n));
    const float* v = span.master.data<float>();
    for (int64_t k = 0; k < n; ++k)
      if (!std::isfinite(v[k]))
        fail_input("'{}': tensor '{}' holds a non-finite value ({}) at element {}", path,
                   specs[index].name, v[k], first + k);
  }
  fsdp.group().barrier()->wait();
  return file_dtype;
}

}  // namespace st
