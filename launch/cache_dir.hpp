#pragma once
// Where shardtrain keeps what it learned about this machine between runs (calibration
// profiles, the best matmul peak): $XDG_CACHE_HOME/shardtrain, else ~/.cache/shardtrain, else
// /tmp/shardtrain-cache. Not created here.
#include <string>

namespace st {

std::string shardtrain_cache_dir();

}  // namespace st
