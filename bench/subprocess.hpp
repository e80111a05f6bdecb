#pragma once
// Benchmarks that run other shardtrain processes (under launch/shardrun) and collect their JSON.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace st {

// launch/shardrun beside this binary's source tree (build/bin/shardtrain -> launch/shardrun).
std::filesystem::path find_shardrun();
// `s` in single quotes for a shell command line.
std::string quote(const std::string& s);
// Runs `command` and returns every line of its stdout that parses as a JSON object, in order;
// an Error with the whole output when it fails or prints none.
std::vector<nlohmann::json> run_for_json_lines(const std::string& command);
// The last of them.
nlohmann::json run_for_json(const std::string& command);

}  // namespace st
