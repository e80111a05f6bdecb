#pragma once
// A deterministic English-like corpus generated from a small grammar, so the default training
// run needs no data file. Same bytes on every machine and every call.
#include <string>

namespace st {

// About `bytes` bytes of text (whole sentences; 1 MiB by default).
std::string builtin_corpus(size_t bytes = 1 << 20);

}  // namespace st
