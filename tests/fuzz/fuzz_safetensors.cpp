// Fuzz target: a safetensors file (header length, JSON header, layout checked against a small
// GPT's parameters), as load_safetensors checks it before reading any tensor. Bad input must
// be an InputError, nothing else.
#include <cstdint>
#include <string_view>

#include "checkpoint/safetensors.hpp"
#include "core/error.hpp"
#include "models/gpt2/gpt.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const st::SafetensorsHeader h =
        st::parse_safetensors_header("model.safetensors", bytes, int64_t(size));
    st::check_safetensors_layout("model.safetensors", h, st::fuzzing::small_gpt().param_specs());
  } catch (const st::InputError& e) {
    st::fuzzing::refused(e);
  }
  return 0;
}
