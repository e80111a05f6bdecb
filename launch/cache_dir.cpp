#include "launch/cache_dir.hpp"

#include <cstdlib>

namespace st {

std::string shardtrain_cache_dir() {
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (cache && *cache) return std::string(cache) + "/shardtrain";
  if (home && *home) return std::string(home) + "/.cache/shardtrain";
  return "/tmp/shardtrain-cache";
}

}  // namespace st
