#pragma once
// Errors with context. InputError is "bad input" (config, data, checkpoint): exit code 2.
// Error is everything else: exit code 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace st {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
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
