#include "bench/subprocess.hpp"

#include <array>
#include <cstdio>
#include <memory>

#include "core/error.hpp"

namespace st {

namespace fs = std::filesystem;

// launch/shardrun beside this binary's source tree (build/bin/shardtrain -> launch/shardrun).
fs::path find_shardrun() {
  const fs::path exe = fs::read_symlink("/proc/self/exe");
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

// Runs `command` and returns the last line of its stdout that parses as a JSON object.
nlohmann::json run_for_json(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) fail("cannot run '{}'", command);
  std::array<char, 4096> line{};
  nlohmann::json last;
  std::string output;
  while (std::fgets(line.data(), int(line.size()), pipe.get())) {
    output += line.data();
    if (line[0] == '{') last = nlohmann::json::parse(line.data(), nullptr, false);
  }
  const int status = pclose(pipe.release());
  if (status != 0 || last.is_discarded() || last.is_null())
    fail("'{}' failed (status {}):\n{}", command, status, output);
  return last;
}

}  // namespace st
