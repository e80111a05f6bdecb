#include "core/data/gpt2_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json_parse.hpp"
#include "core/tokenizer/unicode.hpp"

namespace st {
namespace {

// GPT-2's pre-tokenizer (encoder.py), in PCRE2 syntax.
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string read_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path))
    fail_input(
        "GPT-2 vocabulary file '{}' is missing (--vocab names the directory holding "
        "encoder.json and vocab.bpe)",
        path);
  return read_text_file(path);
}

}  // namespace

struct Gpt2Tokenizer::Impl {
  std::array<std::string, 256> byte_symbol;  // byte -> its character, UTF-8
  std::unordered_map<std::string, int32_t> encoder;
  std::vector<std::string> decoder;                     // id -> bytes
  std::unordered_map<std::string, int32_t> merge_rank;  // "left right" -> rank
  pcre2_code* pattern = nullptr;
  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;  // pre-token -> ids

  ~Impl() {
    if (pattern) pcre2_code_free(pattern);
  }

  // BPE of one pre-token's bytes, merging the lowest-ranked adjacent pair until none is left.
  std::vector<int32_t> bpe(std::string_view bytes) const {
    {
      std::lock_guard lock(cache_mutex);
      auto it = cache.find(std::string(bytes));
      if (it != cache.end()) return it->second;
    }
    std::vector<std::string> word;
    for (unsigned char b : bytes) word.push_back(byte_symbol[b]);
    while (word.size() > 1) {
      int32_t best = INT32_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        auto it = merge_rank.find(word[i] + ' ' + word[i + 1]);
        if (it != merge_rank.end() && it->second < best) {
          best = it->second;
          at = i;
        }
      }
      if (best == INT32_MAX) break;
      // Merge every occurrence of that pair, left to right.
      const std::string left = word[at], right = word[at + 1];
      std::vector<std::string> merged;
      for (size_t i = 0; i < word.size(); ++i) {
        if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
          merged.push_back(left + right);
          ++i;
        } else {
          merged.push_back(std::move(word[i]));
        }
      }
      word = std::move(merged);
    }
    std::vector<int32_t> ids;
    for (const std::string& symbol : word) {
      auto it = encoder.find(symbol);
      if (it == encoder.end())
        fail_input("GPT-2 vocabulary: the merges produce '{}', which encoder.json lacks", symbol);
      ids.push_back(it->second);
    }
    std::lock_guard lock(cache_mutex);
    cache.emplace(std::string(bytes), ids);
    return ids;
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gpt2Tokenizer::~Gpt2Tokenizer() = default;
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer&&) noexcept = default;
Gpt2Tokenizer& Gpt2Tokenizer::operator=(Gpt2Tokenizer&&) noexcept = default;

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  const auto& cp = unicode::byte_level_code_points();
  std::unordered_map<std::string, unsigned char> symbol_byte;
  for (int b = 0; b < 256; ++b) {
    unicode::append_utf8(impl->byte_symbol[size_t(b)], cp[size_t(b)]);
    symbol_byte[impl->byte_symbol[size_t(b)]] = static_cast<unsigned char>(b);
  }

  const std::string encoder_path = (std::filesystem::path(dir) / "encoder.json").string();
  // Strict: a token given twice would otherwise keep one of its two ids silently.
  const nlohmann::json encoder =
      parse_json_object(read_file(encoder_path), fmt::format("'{}'", encoder_path));
  if (encoder.empty()) fail_input("'{}' must be a JSON object mapping tokens to ids", encoder_path);
  impl->decoder.resize(encoder.size());
  std::vector<bool> seen(encoder.size(), false);
  for (auto& [token, id] : encoder.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= int64_t(encoder.size()))
      fail_input("'{}': token '{}' has id {}; ids must be 0..{} (one per entry)", encoder_path,
                 token, id.dump(), encoder.size() - 1);
    const auto index = size_t(id.get<int64_t>());
    if (seen[index]) fail_input("'{}': id {} is given twice", encoder_path, index);
    seen[index] = true;
    impl->encoder[token] = int32_t(index);
    // The token's bytes: each character maps back to one byte.
    std::string bytes;
    for (size_t i = 0; i < token.size();) {
      const unsigned char lead = static_cast<unsigned char>(token[i]);
      const size_t len = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
      auto it = symbol_byte.find(token.substr(i, len));
      if (it == symbol_byte.end())
        fail_input("'{}': token '{}' holds a character that stands for no byte", encoder_path,
                   token);
      bytes += char(it->second);
      i += len;
    }
    impl->decoder[index] = std::move(bytes);
  }

  const std::string merges_path = (std::filesystem::path(dir) / "vocab.bpe").string();
  std::istringstream merges(read_file(merges_path));
  std::string line;
  int64_t line_no = 0;
  int32_t rank = 0;
  while (std::getline(merges, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      fail_input("'{}' line {}: a merge is two symbols separated by one space, got '{}'",
                 merges_path, line_no, printable(line));
    impl->merge_rank.emplace(line, rank++);
  }
  if (rank == 0) fail_input("'{}' holds no merges", merges_path);

  int error = 0;
  PCRE2_SIZE offset = 0;
  impl->pattern =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!impl->pattern) fail("GPT-2 pre-tokenizer pattern: PCRE2 error {} at {}", error, offset);
  pcre2_jit_compile(impl->pattern, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
  return Gpt2Tokenizer(std::move(impl));
}

int64_t Gpt2Tokenizer::vocab_size() const {
  return int64_t(impl_->decoder.size());
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  auto add = [&](std::string_view piece) {
    const auto part = impl_->bpe(piece);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  // Freed however this ends (bpe throws for a byte the vocabulary lacks).
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(impl_->pattern, nullptr), &pcre2_match_data_free);
  if (!match) fail("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(impl_->pattern, subject, text.size(), at, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("PCRE2 match error {} at byte {}", rc, at);
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    // Bytes the pattern skipped (invalid UTF-8) are pre-tokens of their own.
    if (span[0] > at) add(text.substr(at, span[0] - at));
    add(text.substr(span[0], span[1] - span[0]));
    at = std::max<size_t>(span[1], span[0] + 1);
  }
  if (at < text.size()) add(text.substr(at));
  return ids;
}

std::string Gpt2Tokenizer::decode(const int32_t* ids, size_t n) const {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= int32_t(impl_->decoder.size()))
      fail_input("token {} is id {}, outside GPT-2's vocabulary of {}", i, ids[i],
                 impl_->decoder.size());
    out += impl_->decoder[size_t(ids[i])];
  }
  return out;
}

std::vector<int32_t> encode_sections(const Gpt2Tokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids;
  for (const std::string& section : text_sections(text)) {
    ids.push_back(Gpt2Tokenizer::kEndOfText);
    const auto part = tokenizer.encode(section);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace st
