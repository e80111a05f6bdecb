#pragma once
// `shardtrain --version`: what a bug report needs to name the build.
#include <string>

namespace st {

// "shardtrain 0.1.0", then the commit, compiler, oneDNN and MPI library it was built with, and
// the CPU it runs on, one per line.
std::string version_text();

}  // namespace st
