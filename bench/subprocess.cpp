#include "bench/subprocess.hpp"

#include <array>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/file_io.hpp"

namespace st {

namespace fs = std::filesystem;

// launch/shardrun beside this binary's source tree (build/bin/shardtrain -> launch/shardrun).
fs::path find_shardrun() {
  const fs::path exe = this_executable();
  // Installed: beside the binary. A build folder inside the source tree: launch/ above it.
  if (fs::exists(exe.parent_path() / "shardrun")) return exe.parent_path() / "shardrun";
  for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path())
    if (fs::exists(dir / "launch" / "shardrun")) return dir / "launch" / "shardrun";
  // A build folder elsewhere (cmake -B /elsewhere): the source tree it was built from.
  const fs::path source = fs::path(SHARDTRAIN_SOURCE_DIR) / "launch" / "shardrun";
  if (fs::exists(source)) return source;
  fail("cannot find shardrun beside {}, in launch/ above it, or in the source tree {}",
       exe.string(), SHARDTRAIN_SOURCE_DIR);
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out.append("'\\''");
    else
      out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

std::vector<nlohmann::json> run_for_json_lines(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) fail("cannot run '{}'", command);
  std::array<char, 8192> line{};
  std::vector<nlohmann::json> objects;
  std::string output;
  while (std::fgets(line.data(), int(line.size()), pipe.get())) {
    output += line.data();
    if (line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line.data(), nullptr, false);
    if (!j.is_discarded()) objects.push_back(std::move(j));
  }
  const int status = pclose(pipe.release());
  if (status != 0 || objects.empty()) fail("'{}' failed (status {}):\n{}", command, status, output);
  return objects;
}

nlohmann::json run_for_json(const std::string& command) {
  return run_for_json_lines(command).back();
}

}  // namespace st
