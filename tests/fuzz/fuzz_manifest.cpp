// Fuzz target: a checkpoint manifest (parse_checkpoint_manifest), then its layout checked
// against a small GPT's at the manifest's world size and the files' expected size, as loading
// does before any shard is read. Bad input must be an InputError, nothing else.
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_manifest.hpp"
#include "core/error.hpp"
#include "models/gpt2/gpt.hpp"
#include "tests/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const st::CheckpointManifest m = st::parse_checkpoint_manifest(text, "manifest.json");
    const st::GPT& model = st::fuzzing::small_gpt();
    if (m.world_size <= 16) {
      const auto units = st::layout_units(model.param_specs(), model.num_units(), m.world_size);
      st::check_manifest_layout(m, units, model.param_specs(), "manifest.json");
    }
    (void)m.file_bytes();
  } catch (const st::InputError& e) {
    st::fuzzing::refused(e);
  }
  return 0;
}
