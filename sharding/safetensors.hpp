#pragma once
// safetensors files of the whole model, written and read in parallel by the ranks: each rank
// writes (pwrite) and reads (pread) only the elements of its own shards, so no rank ever holds
// the whole model. Names and layouts are the model's (for GPT: Hugging Face GPT-2's).
#include <string>

#include "sharding/fsdp_runtime.hpp"

namespace st {

// Collective. Writes every parameter of `fsdp`'s model from the FP32 master shards, as F32 or
// BF16 (`dtype`), to `path` (through `path`.tmp, renamed when complete). `metadata` goes into
// the header's __metadata__ (string values).
void save_safetensors(const std::string& path, FsdpRuntime& fsdp, DType dtype,
                      const std::vector<std::pair<std::string, std::string>>& metadata);

// Collective. Fills this rank's FP32 master shards from `path` (F32 or BF16 tensors). Every
// parameter of the model must be present with its shape; other tensors are ignored. An
// InputError naming the file and tensor otherwise. Returns the file's dtype (the first one).
DType load_safetensors(const std::string& path, FsdpRuntime& fsdp);

// The dtype of the tensors in a safetensors file (from its header alone).
DType safetensors_dtype(const std::string& path);

}  // namespace st
