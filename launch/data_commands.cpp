// tokenize: text into llm.c token files, as bytes, under GPT-2's BPE or a Hugging Face
// tokenizer.json.
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/token_stream.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/staged_output.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/unicode.hpp"
#include "launch/commands.hpp"

namespace st {

namespace {

void check_encoding(const TokenizeOptions& o) {
  if (!o.tokenizer.empty() && (!o.encoding.empty() || !o.vocab.empty()))
    fail_input("tokenize: give --tokenizer PATH or --encoding (with --vocab), not both");
  const std::string encoding = o.encoding.empty() ? "bytes" : o.encoding;
  if (!o.tokenizer.empty()) return;
  if (encoding != "bytes" && encoding != "gpt2")
    fail_input("tokenize: --encoding '{}' is not known; use bytes or gpt2 (or --tokenizer PATH)",
               o.encoding);
  if (encoding == "gpt2" && o.vocab.empty())
    fail_input(
        "tokenize: --encoding gpt2 needs --vocab DIR (the directory holding GPT-2's "
        "encoder.json and vocab.bpe)");
  if (encoding == "bytes" && o.sections)
    fail_input(
        "tokenize: --sections needs a tokenizer with a separator token (--tokenizer PATH or "
        "--encoding gpt2)");
}

// The ids of the whole text and how they were made ("gpt2", "bytes", the tokenizer's path).
std::pair<std::vector<int32_t>, std::string> encode_text(const TokenizeOptions& o,
                                                         const std::string& text) {
  if (!o.tokenizer.empty()) {
    const HfTokenizer tokenizer = HfTokenizer::load(o.tokenizer);
    const size_t bad = unicode::first_invalid_utf8(text);
    if (bad != text.size())
      fail_input("tokenize: '{}' is not UTF-8 at byte {}; a tokenizer.json tokenizer reads text",
                 o.in, bad);
    return {o.sections ? encode_sections(tokenizer, text) : tokenizer.encode(text),
            tokenizer.json_path()};
  }
  if (o.encoding == "gpt2") {
    const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(o.vocab);
    return {o.sections ? encode_sections(tokenizer, text) : tokenizer.encode(text), "gpt2"};
  }
  return {encode_bytes(text), "bytes"};
}

}  // namespace

int run_tokenize(const TokenizeOptions& o) {
  if (o.in.empty() || o.out.empty()) fail_input("tokenize: --in FILE and --out FILE are required");
  check_encoding(o);
  if (o.val_tokens < 0) fail_input("tokenize: --val-tokens {} must not be negative", o.val_tokens);
  if ((o.val_tokens > 0) != !o.val_out.empty())
    fail_input("tokenize: --val-tokens N and --val-out FILE go together");
  // Both outputs are checked before any work and appear together, or neither does.
  StagedOutput out(o.out, "tokenize --out");
  out.check_writable();
  std::optional<StagedOutput> val_out;
  if (!o.val_out.empty()) {
    val_out.emplace(o.val_out, "tokenize --val-out");
    if (!out.through() && !val_out->through() &&
        std::filesystem::weakly_canonical(o.out) == std::filesystem::weakly_canonical(o.val_out))
      fail_input("tokenize: --out and --val-out name the same file '{}'", o.out);
    val_out->check_writable();
  }
  const std::string text = read_text_file(o.in);
  const auto [ids, how] = encode_text(o, text);
  if (text.empty()) fail_input("tokenize: '{}' holds no text: nothing to tokenize", o.in);
  // (A tokenizer drops what it has no token for, when it has no unk_token or byte fallback.)
  if (ids.empty())
    fail_input(
        "tokenize: '{}' ({} bytes) encodes to no tokens with the tokenizer '{}': no token of its "
        "vocabulary matched the text",
        o.in, text.size(), how);
  if (o.val_tokens >= int64_t(ids.size()))
    fail_input("tokenize: --val-tokens {} leaves no training tokens ('{}' gives {})", o.val_tokens,
               o.in, ids.size());
  // Both files in one width: uint16 when every id fits, else uint32 (llm.c's Llama 3 format).
  const bool wide = llmc_needs_u32(ids);
  const auto split = ids.begin() + o.val_tokens;
  if (val_out) write_llmc_tokens(*val_out, std::vector<int32_t>(ids.begin(), split), wide);
  write_llmc_tokens(out, std::vector<int32_t>(split, ids.end()), wide);
  if (val_out)
    commit_together({&*val_out, &out});
  else
    out.commit();
  fmt::print("tokenize: {} bytes -> {} tokens ({}){}\n", text.size(), ids.size(), how,
             o.val_tokens > 0 ? fmt::format(": {} in {}, {} in {}", o.val_tokens, o.val_out,
                                            ids.size() - size_t(o.val_tokens), o.out)
                              : fmt::format(" in {}", o.out));
  return 0;
}

}  // namespace st
