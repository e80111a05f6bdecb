#include "launch/peak_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/cpu_features.hpp"
#include "launch/cache_dir.hpp"

namespace st {
namespace {

bool sane_peak(double gflops) {
  return std::isfinite(gflops) && gflops > 0 && gflops < 1e9;
}

nlohmann::json read_peaks() {
  std::ifstream in(peak_cache_path());
  if (!in) return nlohmann::json::object();
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json peaks = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return peaks.is_object() ? peaks : nlohmann::json::object();
}

}  // namespace

std::string peak_cache_key(DType dtype, int ranks, int threads, int ranks_on_node) {
  const CpuFeatures& cpu = cpu_features();
  return fmt::format("{} | {} cores | {} | {} matmul | {} ranks, {} per node, {} threads each",
                     cpu.brand, std::thread::hardware_concurrency(), cpu.summary(),
                     dtype_name(dtype), ranks, ranks_on_node, threads);
}

std::string peak_cache_path() {
  return shardtrain_cache_dir() + "/peaks.json";
}

std::optional<double> best_known_peak(const std::string& key) {
  const nlohmann::json peaks = read_peaks();
  const auto it = peaks.find(key);
  if (it == peaks.end() || !it->is_number()) return std::nullopt;
  const double gflops = it->get<double>();
  if (!sane_peak(gflops)) return std::nullopt;
  return gflops;
}

std::string remember_peak(const std::string& key, double gflops) {
  if (!sane_peak(gflops)) return "not a rate";
  nlohmann::json peaks = read_peaks();
  const auto it = peaks.find(key);
  if (it != peaks.end() && it->is_number() && sane_peak(it->get<double>()) &&
      it->get<double>() >= gflops)
    return "";
  peaks[key] = gflops;
  namespace fs = std::filesystem;
  const std::string path = peak_cache_path();
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec)
    return fmt::format("cannot create '{}': {}", fs::path(path).parent_path().string(),
                       ec.message());
  const std::string temporary = fmt::format("{}.{}.tmp", path, ::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << peaks.dump(2) << "\n";
    if (!out.flush()) {
      fs::remove(temporary, ec);
      return fmt::format("cannot write '{}'", temporary);
    }
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    return fmt::format("cannot replace '{}': {}", path, ec.message());
  }
  return "";
}

}  // namespace st
