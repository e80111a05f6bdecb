#pragma once
// A read-only sequence of token ids: bytes of a text held in memory, or one or many token
// files read where needed (never loaded whole, never mapped) as one stream in the order given.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/staged_output.hpp"

namespace st {

// llm.c's token files: 256 little-endian int32 (magic, version, token count, zeros), then the
// tokens: GPT-2's (magic 20240520, version 1) uint16, Llama 3's (magic 20240801, version 7)
// uint32. u16, u32: the little-endian tokens alone. auto: llmc when the file starts with either
// magic, else u16 (raw files carry no width: say u32 for those).
enum class TokenFormat { automatic, llmc, u16, u32 };
const char* token_format_name(TokenFormat format);

constexpr int32_t kLlmcMagic = 20240520;  // uint16 tokens
constexpr int32_t kLlmcVersion = 1;
constexpr int32_t kLlmcMagicU32 = 20240801;  // uint32 tokens
constexpr int32_t kLlmcVersionU32 = 7;
constexpr int64_t kLlmcHeaderInts = 256;

class TokenStream {
 public:
  TokenStream() = default;
  // Tokens held in memory (text encoded as bytes, or a test's ids).
  static TokenStream in_memory(std::string source, std::vector<int32_t> tokens);
  // Token files, concatenated in the order given. Every header is checked (magic, version,
  // count against the file's size) and every id against `vocab_size`: an InputError names the
  // file and, for an id, its index and byte offset.
  static TokenStream from_files(const std::vector<std::string>& paths, TokenFormat format,
                                int64_t vocab_size);

  int64_t size() const { return size_; }
  const std::string& source() const { return source_; }
  int32_t at(int64_t index) const;
  // Tokens [begin, begin + count) into `out` (int32 [count]).
  void read(int64_t begin, int64_t count, int32_t* out) const;
  // Tokens [begin, end) as a stream sharing this one's memory.
  TokenStream slice(int64_t begin, int64_t end) const;
  std::vector<int32_t> to_vector() const;

  struct Storage;  // open files or owned ids, shared by slices; opaque

 private:
  std::shared_ptr<const Storage> storage_;
  std::string source_;
  int64_t begin_ = 0, size_ = 0;
};

// Where a token file's tokens are: after `header_bytes`, `count` of them, `token_bytes` (2 or
// 4) each.
struct TokenFileLayout {
  int64_t header_bytes = 0, count = 0, token_bytes = 2;
};
// Checks a token file's bytes (`size` of them, as read from `path`): its header and size for
// `format` (auto: llmc when it starts with the magic), and every id below `vocab_size`. An
// InputError naming `path` and what is wrong otherwise.
TokenFileLayout inspect_token_file(const std::string& path, const unsigned char* bytes,
                                   int64_t size, TokenFormat format, int64_t vocab_size);

// Whether `ids` need llm.c's uint32 file (some id above 65,535); a negative id is an InputError.
bool llmc_needs_u32(const std::vector<int32_t>& ids);
// Writes `tokens` as an llm.c token file into `output`, whose commit is left to the caller (a
// command's outputs appear together): uint16 (GPT-2's format) when `wide` is false, where every
// id must fit 16 bits, else uint32 (Llama 3's format).
void write_llmc_tokens(StagedOutput& output, const std::vector<int32_t>& tokens, bool wide);
// The same into `path`, committed (a failure leaves nothing behind), uint16 when every id fits.
void write_llmc_tokens(const std::string& path, const std::vector<int32_t>& tokens);

// Expands a path or a glob pattern to its files, sorted; an InputError naming `key` when
// nothing matches.
std::vector<std::string> expand_token_paths(const std::string& pattern, const std::string& key);

}  // namespace st
