#pragma once
// Errors with context. InputError is "bad input" (config, data, checkpoint): exit code 2.
// Error is everything else: exit code 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace st {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

// A failure of the operating system's I/O, with its errno: a restart fixes a lost mount's EIO
// perhaps, never a full disk's ENOSPC or a permission's EACCES (launch/restart_decision).
class IoError : public Error {
 public:
  IoError(const std::string& message, int error) : Error(message), error(error) {}
  int error;
};

// A failure every rank reaches from the same all-reduced values (a non-finite global norm or
// loss): rank 0 alone reports it, so the user reads it once.
class AgreedError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void fail_agreed(fmt::format_string<Args...> format, Args&&... args) {
  throw AgreedError(fmt::format(format, std::forward<Args>(args)...));
}

// `text` as a message may quote it: control and non-ASCII bytes as \xNN, at most `max` bytes
// (then "..."), so a binary file's line never reaches the terminal raw.
inline std::string printable(std::string_view text, size_t max = 80) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f)
      out += char(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (text.size() > max) out += "...";
  return out;
}

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
[[noreturn]] void fail_io(int error, fmt::format_string<Args...> format, Args&&... args) {
  throw IoError(fmt::format(format, std::forward<Args>(args)...), error);
}

template <class... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> format, Args&&... args) {
  throw InputError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace st

// Internal invariant check: a failure is a bug in shardtrain, reported with its location.
#define ST_CHECK(cond, ...)                                                 \
  do {                                                                      \
    if (!(cond))                                                            \
      ::st::fail("{}:{}: check '{}' failed: {}", __FILE__, __LINE__, #cond, \
                 ::fmt::format(__VA_ARGS__));                               \
  } while (0)
