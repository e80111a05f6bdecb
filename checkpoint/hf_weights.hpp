#pragma once
// A model's weights as Hugging Face stores them, read by every rank for its own shards only:
// one safetensors file, or a model folder holding config.json and either model.safetensors or
// model.safetensors.index.json with the shard files its weight_map names. Written the same way:
// one file, or shards of at most a given size with their index.
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"

namespace st {

// Where each parameter is read from, checked whole before any tensor is read.
struct WeightsPlan {
  std::string source;               // the path given (a file or a folder)
  std::vector<std::string> files;   // the safetensors files, each once
  std::vector<size_t> file_of;      // per parameter: its file (index into files)
  std::vector<int64_t> offset;      // per parameter: its first byte in that file
  std::vector<StoredDtype> dtypes;  // per parameter: how it is stored
};

// The index's file name and the single file's, as transformers names them.
inline constexpr const char* kIndexName = "model.safetensors.index.json";
inline constexpr const char* kSingleFileName = "model.safetensors";

// The config.json describing `weights`: FOLDER/config.json, or the one beside a file.
std::string weights_config_json(const std::string& weights);
// The tokenizer.json of a model folder, or "" when `weights` is a file or the folder has none.
std::string weights_tokenizer_json(const std::string& weights);

// Reads the headers (and the index) of `weights` and checks them against the model's
// parameters: the index names every parameter once, each in a file present in the folder, and
// no tensor the model lacks; each file holds exactly the tensors the index assigns to it, with
// their shapes, in F32, BF16 or F16; total_size, when given, is what the tensors take. An
// InputError naming the file and the tensor otherwise. Reads no tensor.
WeightsPlan plan_weights(const std::string& weights, const std::vector<ParamSpec>& specs);

// The compute dtype a model stored so asks for: BF16 when every tensor is BF16, else FP32.
DType plan_compute_dtype(const WeightsPlan& plan);

// Collective. Fills this rank's FP32 master shards from the plan's files: each rank reads (pread)
// only the bytes of its own shards; of its TP slices', a read per run (whole rows, or a row's
// piece). A non-finite value is an InputError naming the tensor.
void load_weights(const WeightsPlan& plan, FsdpRuntime& fsdp);

// Collective: plan_weights (every rank agreeing) and load_weights.
void load_safetensors(const std::string& weights, FsdpRuntime& fsdp);

// The files a folder export writes: tensors in declaration order, a new file whenever the next
// tensor would take one past `max_shard_bytes` (a tensor larger than that alone in its file).
// Returns, per file, the parameters it holds.
std::vector<std::vector<size_t>> split_into_shards(const std::vector<ParamSpec>& specs, DType dtype,
                                                   int64_t max_shard_bytes);

// "model-00001-of-00003.safetensors", or model.safetensors when there is one file.
std::string shard_file_name(size_t index, size_t count);

// model.safetensors.index.json's text for those shards: metadata.total_size (the tensors'
// bytes) and weight_map (each tensor's file).
std::string shard_index_json(const std::vector<ParamSpec>& specs, DType dtype,
                             const std::vector<std::vector<size_t>>& shards);

// An IEEE half (F16) as FP32, exactly (subnormals, infinities and NaN included).
float half_to_float(uint16_t h);

// "5GB", "500MB", "64KiB", or bytes: Hugging Face's max_shard_size (GB = 10^9, GiB = 2^30); an
// InputError naming `flag` otherwise.
int64_t parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace st
