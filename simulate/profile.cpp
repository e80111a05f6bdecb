#include "simulate/profile.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"

namespace st {

const LinkFit& CalibrationProfile::link(const std::string& name, const std::string& who,
                                        double ranks_per_core) const {
  const auto it = links.find(name);
  if (it == links.end()) {
    std::string have;
    for (const auto& [key, fit] : links) have += (have.empty() ? "" : ", ") + key;
    fail_input(
        "{} names link '{}', which the calibration profile ({}) did not measure (it has: {})", who,
        name, machine, have.empty() ? "none" : have);
  }
  const LinkFit* best = &it->second.front();
  for (const LinkFit& f : it->second)
    if (std::abs(std::log(double(f.ranks) / cores / ranks_per_core)) <
        std::abs(std::log(double(best->ranks) / cores / ranks_per_core)))
      best = &f;
  return *best;
}

namespace {

using nlohmann::json;

json own_json(const std::map<std::string, OwnValue>& own) {
  json j = json::object();
  for (const auto& kv : own) std::visit([&](auto v) { j[kv.first] = v; }, kv.second);
  return j;
}

// A family's own keys: each one the family reads, an integer, a number or a boolean.
std::map<std::string, OwnValue> own_from_json(const json& j, const std::string& family,
                                              const std::string& where) {
  if (!j.is_object()) fail_input("{} must map the family's own keys to values", where);
  const ModelFamily& f = model_family(family);
  std::map<std::string, OwnValue> own;
  for (const auto& [key, v] : j.items()) {
    if (!f.owns(key)) fail_input("{}: '{}' is not a key of model.family = {}", where, key, family);
    if (v.is_boolean())
      own[key] = v.get<bool>();
    else if (v.is_number_integer())
      own[key] = v.get<int64_t>();
    else if (v.is_number() && std::isfinite(v.get<double>()))
      own[key] = v.get<double>();
    else
      fail_input("{}.{} = {} must be a number or a boolean", where, key, v.dump());
  }
  return own;
}

json alpha_beta_json(const AlphaBeta& f) {
  return {{"alpha_us", f.alpha * 1e6}, {"beta_ns_per_byte", f.beta * 1e9}};
}

double number(const json& j, const std::string& key, const std::string& where, double lo,
              double hi) {
  if (!j.is_object() || !j.contains(key)) fail_input("{}: '{}' is missing", where, key);
  const json& v = j.at(key);
  if (!v.is_number()) fail_input("{}: '{}' must be a number", where, key);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    fail_input("{}: '{}' = {} must be in [{}, {}]", where, key, x, lo, hi);
  return x;
}

std::vector<double> seconds_array(const json& j, const std::string& key, const std::string& where,
                                  size_t count) {
  if (!j.contains(key) || !j.at(key).is_array() || j.at(key).size() != count)
    fail_input("{}: '{}' must be an array of {} times (one per block)", where, key, count);
  std::vector<double> out;
  for (size_t i = 0; i < count; ++i) {
    const json& v = j.at(key)[i];
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      fail_input("{}: '{}'[{}] must be a non-negative number of milliseconds", where, key, i);
    out.push_back(v.get<double>() / 1e3);
  }
  return out;
}

AlphaBeta alpha_beta_from(const json& j, const std::string& where) {
  return {number(j, "alpha_us", where, 0, 1e7) / 1e6,
          number(j, "beta_ns_per_byte", where, 0, 1e9) / 1e9};
}

std::vector<double> ms(const std::vector<double>& s) {
  std::vector<double> out;
  for (double x : s) out.push_back(x * 1e3);
  return out;
}

}  // namespace

std::string profile_to_json(const CalibrationProfile& p) {
  json compute = json::array();
  for (const ComputeSample& c : p.compute)
    compute.push_back({{"ranks", c.ranks},
                       {"threads", c.threads},
                       {"rows", c.rows},
                       {"root_forward_pre_ms", c.root_forward_pre * 1e3},
                       {"root_forward_post_ms", c.root_forward_post * 1e3},
                       {"root_backward_pre_ms", c.root_backward_pre * 1e3},
                       {"root_backward_post_ms", c.root_backward_post * 1e3},
                       {"block_forward_ms", ms(c.block_forward)},
                       {"block_backward_ms", ms(c.block_backward)},
                       {"matmul_share", c.matmul_share},
                       {"optimizer_ns_per_element", c.optimizer_per_element * 1e9},
                       {"step_overhead_ms", c.step_overhead * 1e3}});
  json peaks = json::object();
  for (const auto& [threads, flops] : p.matmul_peak) peaks[std::to_string(threads)] = flops / 1e9;
  json links = json::object();
  for (const auto& [name, fits] : p.links)
    for (const LinkFit& fit : fits)
      links[name].push_back({{"ranks", fit.ranks},
                             {"all_gather", alpha_beta_json(fit.all_gather)},
                             {"reduce_scatter", alpha_beta_json(fit.reduce_scatter)},
                             {"all_reduce", alpha_beta_json(fit.all_reduce)}});
  const json j = {{"version", 1},
                  {"machine", p.machine},
                  {"cores", p.cores},
                  {"cpu", p.cpu},
                  {"cpu_features", p.cpu_features},
                  {"matmul", p.matmul},
                  {"model",
                   {{"n_layer", p.model.n_layer},
                    {"n_embd", p.model.n_embd},
                    {"n_head", p.model.n_head},
                    {"vocab", p.model.vocab},
                    {"seq_len", p.model.seq_len},
                    {"activation_checkpointing", p.model.activation_checkpointing},
                    {"param_dtype", p.model.param_dtype},
                    {"family", p.model.family},
                    {"own", own_json(p.model.own)}}},
                  {"memcpy_gbps", p.memcpy_bandwidth / 1e9},
                  {"matmul_peak_gflops", peaks},
                  {"compute", compute},
                  {"links", links}};
  return j.dump(1) + "\n";
}

namespace {

// "compute": the measured micro-batches, at least one; each checked field by field.
void read_compute_samples(const json& j, const std::string& where, CalibrationProfile& p) {
  if (!j.contains("compute") || !j["compute"].is_array() || j["compute"].empty())
    fail_input("{}: 'compute' must be a non-empty array of measured micro-batches", where);
  for (size_t i = 0; i < j["compute"].size(); ++i) {
    const json& c = j["compute"][i];
    const std::string cw = fmt::format("{}: compute[{}]", where, i);
    if (!c.is_object()) fail_input("{} must be an object", cw);
    ComputeSample s;
    s.ranks = int(json_int(c.value("ranks", json()), cw + ".ranks", 1, 1 << 20));
    s.threads = int(json_int(c.value("threads", json()), cw + ".threads", 1, 4096));
    s.rows = json_int(c.value("rows", json()), cw + ".rows", 1, 1 << 24);
    s.root_forward_pre = number(c, "root_forward_pre_ms", cw, 0, 1e9) / 1e3;
    s.root_forward_post = number(c, "root_forward_post_ms", cw, 0, 1e9) / 1e3;
    s.root_backward_pre = number(c, "root_backward_pre_ms", cw, 0, 1e9) / 1e3;
    s.root_backward_post = number(c, "root_backward_post_ms", cw, 0, 1e9) / 1e3;
    s.block_forward = seconds_array(c, "block_forward_ms", cw, size_t(p.model.n_layer));
    s.block_backward = seconds_array(c, "block_backward_ms", cw, size_t(p.model.n_layer));
    s.matmul_share = number(c, "matmul_share", cw, 0, 1);
    s.optimizer_per_element = number(c, "optimizer_ns_per_element", cw, 0, 1e9) / 1e9;
    s.step_overhead = number(c, "step_overhead_ms", cw, 0, 1e9) / 1e3;
    if (!(s.total() > 0)) fail_input("{}: the measured compute is zero", cw);
    p.compute.push_back(std::move(s));
  }
}

// "links" (optional): per link class, the α-β fits of each collective at some rank counts.
void read_link_fits(const json& j, const std::string& where, CalibrationProfile& p) {
  if (j.contains("links")) {
    if (!j["links"].is_object()) fail_input("{}: 'links' must be an object", where);
    for (const auto& [name, fits] : j["links"].items()) {
      if (!fits.is_array() || fits.empty())
        fail_input("{}: links.{} must be a non-empty array of fits", where, name);
      for (size_t i = 0; i < fits.size(); ++i) {
        const json& fit = fits[i];
        const std::string lw = fmt::format("{}: links.{}[{}]", where, name, i);
        if (!fit.is_object() || !fit.contains("all_gather") || !fit.contains("reduce_scatter") ||
            !fit.contains("ranks"))
          fail_input("{} must have 'ranks', 'all_gather' and 'reduce_scatter'", lw);
        LinkFit f{int(json_int(fit["ranks"], lw + ".ranks", 1, 1 << 20)),
                  alpha_beta_from(fit["all_gather"], lw + ".all_gather"),
                  alpha_beta_from(fit["reduce_scatter"], lw + ".reduce_scatter"),
                  {}};
        if (fit.contains("all_reduce"))
          f.all_reduce = alpha_beta_from(fit["all_reduce"], lw + ".all_reduce");
        p.links[name].push_back(f);
      }
    }
  }
}

}  // namespace

CalibrationProfile profile_from_json(const std::string& text, const std::string& where) {
  const json j = parse_json_object(text, where);
  CalibrationProfile p;
  if (!j.contains("version") || json_int(j["version"], where + ": version", 1, 1) != 1)
    fail_input("{}: 'version' must be 1", where);
  p.machine = j.value("machine", std::string("unknown machine"));
  if (!j.contains("cores")) fail_input("{}: 'cores' is missing", where);
  p.cores = int(json_int(j["cores"], where + ": cores", 1, 1 << 20));
  for (auto [key, field] : {std::pair{"cpu", &CalibrationProfile::cpu},
                            std::pair{"cpu_features", &CalibrationProfile::cpu_features},
                            std::pair{"matmul", &CalibrationProfile::matmul}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) fail_input("{}: '{}' must be a string", where, key);
    p.*field = j[key].get<std::string>();
  }
  const std::string mw = where + ": model";
  if (!j.contains("model") || !j["model"].is_object()) fail_input("{}: 'model' is missing", where);
  const json& m = j["model"];
  auto dim = [&](const char* key) {
    if (!m.contains(key)) fail_input("{}.{} is missing", mw, key);
    return json_int(m[key], mw + "." + key, 1, 1 << 24);
  };
  // A word of a closed set (absent: the default): an unknown one is refused, never read as the
  // default.
  auto word = [&](const char* key, const char* fallback, std::vector<std::string> allowed) {
    if (!m.contains(key)) return std::string(fallback);
    const json& v = m[key];
    if (!v.is_string() ||
        std::find(allowed.begin(), allowed.end(), v.get<std::string>()) == allowed.end())
      fail_input("{}.{} = {} must be one of {}", mw, key, v.dump(), fmt::join(allowed, ", "));
    return v.get<std::string>();
  };
  p.model = {dim("n_layer"),
             dim("n_embd"),
             dim("n_head"),
             dim("vocab"),
             dim("seq_len"),
             word("activation_checkpointing", "none", {"none", "selective", "full"}),
             word("param_dtype", "bf16", {"bf16", "fp32"}),
             "gpt2",
             {}};
  // Profiles from before families were recorded measured GPT-2.
  if (m.contains("family")) {
    if (!m["family"].is_string()) fail_input("{}.family must be a string", mw);
    p.model.family = model_family(m["family"].get<std::string>()).name;
  }
  if (m.contains("own")) p.model.own = own_from_json(m["own"], p.model.family, mw + ".own");
  p.memcpy_bandwidth = number(j, "memcpy_gbps", where, 1e-3, 1e5) * 1e9;
  if (j.contains("matmul_peak_gflops")) {
    const json& peaks = j["matmul_peak_gflops"];
    if (!peaks.is_object())
      fail_input("{}: 'matmul_peak_gflops' must map threads to GFLOP/s", where);
    for (const auto& [threads, value] : peaks.items()) {
      int t = 0;
      try {
        t = std::stoi(threads);
      } catch (const std::exception&) {
      }
      if (t < 1 || t > 4096)
        fail_input("{}: matmul_peak_gflops key '{}' is not a thread count", where, threads);
      p.matmul_peak[t] = number(peaks, threads, where + ": matmul_peak_gflops", 1e-3, 1e9) * 1e9;
    }
  }
  read_compute_samples(j, where, p);
  read_link_fits(j, where, p);
  return p;
}

CalibrationProfile read_profile(const std::string& path) {
  return profile_from_json(read_text_file(path), "calibration profile '" + path + "'");
}

}  // namespace st
