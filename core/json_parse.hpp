#pragma once
// JSON from files written outside this process (safetensors headers, checkpoint manifests,
// config.json), parsed strictly: a duplicate key is an error, because a reader that keeps
// one of the two values silently (nlohmann's default) may not keep the one the writer meant.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace st {

// Parses `text`; an InputError naming `where` for invalid JSON, a duplicate key (named with
// its object's path), or a top level that is not an object.
nlohmann::json parse_json_object(std::string_view text, const std::string& where);

// `j` as an integer in [lo, hi], or an InputError saying "`what` = VALUE must be ..." (a
// float, a string or a number beyond 64 bits is not silently converted).
int64_t json_int(const nlohmann::json& j, const std::string& what, int64_t lo, int64_t hi);
// `j` as an array of such integers.
std::vector<int64_t> json_int_array(const nlohmann::json& j, const std::string& what, int64_t lo,
                                    int64_t hi);
// Member `key` of the object `j`, present and an integer in [lo, hi] (or a finite number);
// InputErrors start with `where`.
int64_t json_int_at(const nlohmann::json& j, const char* key, const std::string& where,
                    int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
double json_number_at(const nlohmann::json& j, const char* key, const std::string& where);

}  // namespace st
