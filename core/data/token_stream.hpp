#pragma once
// A read-only sequence of token ids: bytes of a text held in memory, or one or many token
// files memory-mapped (never loaded whole) and read as one stream in the order given.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/staged_output.hpp"

namespace st {

// llm.c's token file: 256 little-endian int32 (magic, version, token count, zeros), then
// uint16 tokens. u16: the tokens alone. auto: llmc when the file starts with the magic.
enum class TokenFormat { automatic, llmc, u16 };
const char* token_format_name(TokenFormat format);

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;
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

  struct Storage;  // mapped files or owned ids, shared by slices; opaque

 private:
  std::shared_ptr<const Storage> storage_;
  std::string source_;
  int64_t begin_ = 0, size_ = 0;
};

// Where a token file's uint16 tokens are: after `header_bytes`, `count` of them.
struct TokenFileLayout {
  int64_t header_bytes = 0, count = 0;
};
// Checks a token file's bytes (`size` of them, as read from `path`): its header and size for
// `format` (auto: llmc when it starts with the magic), and every id below `vocab_size`. An
// InputError naming `path` and what is wrong otherwise.
TokenFileLayout inspect_token_file(const std::string& path, const unsigned char* bytes,
                                   int64_t size, TokenFormat format, int64_t vocab_size);

// Writes `tokens` as an llm.c token file (every id must fit 16 bits) into `output`, whose
// commit is left to the caller (a command's outputs appear together).
void write_llmc_tokens(StagedOutput& output, const std::vector<int32_t>& tokens);
// The same into `path`, committed: a failure leaves nothing behind.
void write_llmc_tokens(const std::string& path, const std::vector<int32_t>& tokens);

// Expands a path or a glob pattern to its files, sorted; an InputError naming `key` when
// nothing matches.
std::vector<std::string> expand_token_paths(const std::string& pattern, const std::string& key);

}  // namespace st
