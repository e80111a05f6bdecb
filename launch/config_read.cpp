// Reading a config: a TOML file or a bundled config, then key=value overrides, each value
// checked against its key's kind.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "launch/bundled_configs.hpp"
#include "launch/config.hpp"
#include "launch/config_schema.hpp"

namespace st {
namespace {

[[noreturn]] void wrong_type(const std::string& where, const std::string& key, Kind kind,
                             const std::string& got) {
  fail_input("{}: '{}' must be {}, got {}", where, key, kind_name(kind), got);
}

Value value_from_toml(const toml::node& node, const std::string& key, Kind kind,
                      const std::string& where) {
  switch (kind) {
    case Kind::integer:
      if (auto v = node.value_exact<int64_t>()) return *v;
      break;
    case Kind::number:
      if (auto v = node.value_exact<double>()) return *v;
      if (auto v = node.value_exact<int64_t>()) return double(*v);
      break;
    case Kind::string:
      if (auto v = node.value_exact<std::string>()) return *v;
      break;
    case Kind::boolean:
      if (auto v = node.value_exact<bool>()) return *v;
      break;
    case Kind::boolean_or_integer:
      if (auto v = node.value_exact<bool>()) return *v;
      if (auto v = node.value_exact<int64_t>()) return *v;
      break;
  }
  std::ostringstream type;
  type << node.type();
  const std::string name = type.str();  // toml++'s: array, table, integer, ...
  wrong_type(
      where, key, kind,
      (std::string("aeiou").find(name.empty() ? 'x' : name[0]) == std::string::npos ? "a "
                                                                                    : "an ") +
          name);
}

Value value_from_text(const std::string& text, const std::string& key, Kind kind) {
  const std::string where = "command line";
  switch (kind) {
    case Kind::integer: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size())
        wrong_type(where, key, kind, "'" + text + "'");
      return v;
    }
    case Kind::number: {
      try {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
      }
      wrong_type(where, key, kind, "'" + text + "'");
    }
    case Kind::string:
      if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
        return text.substr(1, text.size() - 2);
      return text;
    case Kind::boolean:
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      wrong_type(where, key, kind, "'" + text + "'");
    case Kind::boolean_or_integer: {
      if (text == "true") return true;
      if (text == "false") return false;
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size())
        wrong_type(where, key, kind, "'" + text + "'");
      return v;
    }
  }
  return text;
}

void apply_toml(Config& config, const toml::table& root, const std::string& where) {
  for (const auto& [section_name, section_node] : root) {
    const std::string section(section_name.str());
    const toml::table* table = section_node.as_table();
    if (!table) {
      const std::string suggestion = closest_key(section);
      fail_input(
          "{}: '{}' is not a config section [model], [data], [training], [optimizer], "
          "[precision], [parallel], [sharding], [checkpoint] or [metrics]{}",
          where, section,
          suggestion.empty() ? "" : fmt::format("; did you mean '{}'?", suggestion));
    }
    for (const auto& [key_name, node] : *table) {
      const std::string key = section + "." + std::string(key_name.str());
      set_key(config, key, where, [&, &node = node](Kind kind, const std::string& name) {
        return value_from_toml(node, name, kind, where);
      });
    }
  }
}

}  // namespace

std::vector<std::string> bundled_config_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : bundled_configs()) names.push_back(name);
  return names;
}

Config load_config(const std::string& source_in, const std::vector<std::string>& overrides) {
  const std::string source = source_in.empty() ? "tiny" : source_in;
  const auto& bundled = bundled_configs();
  if (auto it = bundled.find(source); it != bundled.end() && !std::filesystem::exists(source))
    return parse_config(it->second, "bundled config '" + source + "'", overrides);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    fail_input("--config: '{}' is neither a readable file nor a bundled config ({})", source,
               fmt::join(bundled_config_names(), ", "));
  return parse_config(read_text_file(source), source, overrides);
}

Config parse_config(std::string_view text, const std::string& where,
                    const std::vector<std::string>& overrides) {
  Config config;
  try {
    apply_toml(config, toml::parse(text, where), where);
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}:{}: invalid TOML: {}", where, e.source().begin.line, e.source().begin.column,
               e.description());
  }
  for (const std::string& item : overrides) apply_override(config, item);
  validate_config(config);  // the world size is not known yet
  return config;
}

void apply_override(Config& config, const std::string& item) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    fail_input("command line: '{}' is not a section.key=value override", item);
  const std::string key = item.substr(0, eq);
  set_key(config, key, "command line", [&](Kind kind, const std::string& name) {
    return value_from_text(item.substr(eq + 1), name, kind);
  });
}

}  // namespace st
