#pragma once
// safetensors files of the whole model, written and read in parallel by the ranks: each rank
// writes (pwrite) and reads (pread) only the elements of its own shards, so no rank ever holds
// the whole model. Names and layouts are the model's (for GPT: Hugging Face GPT-2's).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/fsdp/fsdp_runtime.hpp"

namespace st {

// A safetensors file's header, parsed and checked as a whole before any tensor is read.
struct SafetensorsHeader {
  nlohmann::json json;     // the tensors (and __metadata__)
  int64_t data_start = 0;  // 8 + the header's length
  int64_t file_size = 0;
};

// How a tensor is stored: F32, BF16, or F16 (IEEE half, widened to FP32 when read).
enum class StoredDtype : uint8_t { f32, bf16, f16 };
size_t stored_size(StoredDtype d);

// Where each of a model's parameters lies in a file: its first byte after data_start, and the
// dtype it is stored in; indexed like the ParamSpecs (entries of parameters another file holds
// are unset).
struct SafetensorsLayout {
  std::vector<int64_t> begin;
  std::vector<StoredDtype> dtypes;
};

// `bytes` is the start of the file `path` (at least 8 bytes plus the header; the fuzz target
// passes a whole file), `file_size` its size. Checks the length field, JSON validity and
// duplicate keys; an InputError naming `path` otherwise.
SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view bytes,
                                           int64_t file_size);

// Checks the header against the model's parameters before anything is read: every parameter
// present with its shape and an F32/BF16/F16 dtype, offsets inside the file and of the right
// length, no tensor the model lacks, no two tensors overlapping. An InputError naming the
// file and the tensor otherwise. `held` (one flag per spec; empty: all) says which parameters
// this file holds where an index spreads the model over several files.
SafetensorsLayout check_safetensors_layout(const std::string& path, const SafetensorsHeader& h,
                                           const std::vector<ParamSpec>& specs,
                                           const std::vector<bool>& held = {});

// The header of the file `path`, read (at most 100 MiB of it) and parsed.
SafetensorsHeader read_safetensors_header(const std::string& path);

// Collective. Writes the parameters `which` (indexes into the model's specs; empty: all) of
// `fsdp`'s model from the FP32 master shards, as F32 or BF16 (`dtype`), into the file `path`
// itself: a command stages it (StagedOutput) and commits it after this returns on every rank.
// `metadata` goes into the header's __metadata__ (strings).
void save_safetensors(const std::string& path, FsdpRuntime& fsdp, DType dtype,
                      const std::vector<std::pair<std::string, std::string>>& metadata,
                      const std::vector<size_t>& which = {});

// Bytes the tensors take in `dtype` (what total_size in an index counts).
int64_t tensor_bytes(const ParamSpec& spec, DType dtype);

}  // namespace st
