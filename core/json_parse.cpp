#include "core/json_parse.hpp"

#include <cmath>

#include <cstdint>
#include <set>
#include <vector>

#include "core/error.hpp"

namespace st {

namespace {

// Files shardtrain reads nest a few levels; thousands are an attack or damage, refused whole.
constexpr int kMaxDepth = 64;
using Event = nlohmann::json::parse_event_t;

// The dotted path of the first key given twice in `text` (valid JSON), found with a set of the
// keys of each open object: slower than counting, so only run once counting found one.
std::string first_duplicate(std::string_view text) {
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  std::vector<std::string> path;            // the key leading to each open object
  std::string last_key, duplicate;
  auto track = [&](int, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      keys.emplace_back();
      path.push_back(last_key);
    } else if (event == Event::object_end) {
      keys.pop_back();
      path.pop_back();
    } else if (event == Event::key) {
      last_key = parsed.get<std::string>();
      if (duplicate.empty() && !keys.back().insert(last_key).second) {
        for (size_t i = 1; i < path.size(); ++i) duplicate.append(path[i]).append(".");
        duplicate.append(last_key);
      }
    }
    return true;
  };
  [[maybe_unused]] const auto parsed =
      nlohmann::json::parse(text.begin(), text.end(), track, false);
  return duplicate;
}

}  // namespace

nlohmann::json parse_json_object(std::string_view text, const std::string& where) {
  // Each object's keys counted: fewer members than keys means one was given twice (nlohmann
  // keeps one of the two values silently).
  std::vector<size_t> counts;
  bool too_deep = false, repeated = false;
  auto track = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxDepth) too_deep = true;
    if (too_deep) return false;
    if (event == Event::object_start) {
      counts.push_back(0);
    } else if (event == Event::key) {
      ++counts.back();
    } else if (event == Event::object_end) {
      repeated = repeated || parsed.size() != counts.back();
      counts.pop_back();
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), track, false);
  if (too_deep)
    fail_input("{} nests deeper than {} levels: not a file shardtrain reads", where, kMaxDepth);
  if (j.is_discarded()) fail_input("{} is not valid JSON", where);
  if (repeated)
    fail_input("{} has the key '{}' twice (which one was meant is ambiguous)", where,
               first_duplicate(text));
  if (!j.is_object()) fail_input("{} is not a JSON object", where);
  return j;
}

int64_t json_int(const nlohmann::json& j, const std::string& what, int64_t lo, int64_t hi) {
  const bool integer = j.is_number_integer() &&
                       (!j.is_number_unsigned() || j.get<uint64_t>() <= uint64_t(INT64_MAX));
  if (!integer || j.get<int64_t>() < lo || j.get<int64_t>() > hi)
    fail_input("{} = {} must be an integer in [{}, {}]", what, j.dump(), lo, hi);
  return j.get<int64_t>();
}

std::vector<int64_t> json_int_array(const nlohmann::json& j, const std::string& what, int64_t lo,
                                    int64_t hi) {
  if (!j.is_array()) fail_input("{} = {} must be an array of integers", what, j.dump());
  std::vector<int64_t> v;
  for (size_t i = 0; i < j.size(); ++i)
    v.push_back(json_int(j[i], fmt::format("{}[{}]", what, i), lo, hi));
  return v;
}

int64_t json_int_at(const nlohmann::json& j, const char* key, const std::string& where, int64_t lo,
                    int64_t hi) {
  if (!j.is_object() || !j.contains(key)) fail_input("{}: '{}' is missing", where, key);
  return json_int(j.at(key), fmt::format("{}: {}", where, key), lo, hi);
}

double json_number_at(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) fail_input("{}: '{}' is missing", where, key);
  const nlohmann::json& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    fail_input("{}: {} = {} must be a finite number", where, key, v.dump());
  return v.get<double>();
}

}  // namespace st
