// Fuzz target: a token file's bytes (inspect_token_file), as data.tokens reads it, in each
// format, with GPT-2's vocabulary and with bytes. Bad input must be an InputError, nothing else.
#include <cstdint>
#include <vector>

#include "core/data/token_stream.hpp"
#include "core/error.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so reading one past the end is an ASan finding.
  const std::vector<unsigned char> bytes(data, data + size);
  for (st::TokenFormat format : {st::TokenFormat::automatic, st::TokenFormat::llmc,
                                 st::TokenFormat::u16, st::TokenFormat::u32})
    for (int64_t vocab : {int64_t(256), int64_t(50257)}) {
      try {
        const st::TokenFileLayout layout =
            st::inspect_token_file("tokens.bin", bytes.data(), int64_t(size), format, vocab);
        if (layout.header_bytes + layout.token_bytes * layout.count != int64_t(size) ||
            layout.count <= 0)
          __builtin_trap();  // accepted, but not a whole file of tokens
      } catch (const st::InputError& e) {
        st::fuzzing::refused(e);
      }
    }
  return 0;
}
