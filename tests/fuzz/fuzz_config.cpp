// Fuzz target: the config, through parse_config (what `train` runs after reading the file).
// Input: TOML text, then optionally a NUL byte and newline-separated key=value overrides (empty
// lines skipped); a config that parses is then checked at world sizes 1 to 4. Bad input must be an
// InputError; anything else (a crash, another exception, a sanitizer report) is a defect.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "launch/config.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (!rest.empty()) {
      const size_t eol = rest.find('\n');
      if (eol != 0) overrides.emplace_back(rest.substr(0, eol));
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    }
  }
  st::Config c;
  try {
    c = st::parse_config(input.substr(0, nul), "fuzz.toml", overrides);
    st::describe_config(c);
  } catch (const st::InputError& e) {
    st::fuzzing::refused(e);
    return 0;
  }
  for (int world = 1; world <= 4; ++world) try {
      st::validate_for_world(c, world);
    } catch (const st::InputError& e) {
      st::fuzzing::refused(e);
    }
  return 0;
}
