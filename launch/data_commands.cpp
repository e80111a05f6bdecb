// tokenize: text into llm.c token files, as bytes or under GPT-2's BPE.
#include <fmt/format.h>

#include <filesystem>

#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/token_stream.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "launch/commands.hpp"

namespace st {

int run_tokenize(const TokenizeOptions& o) {
  if (o.in.empty() || o.out.empty()) fail_input("tokenize: --in FILE and --out FILE are required");
  if (o.encoding != "bytes" && o.encoding != "gpt2")
    fail_input("tokenize: --encoding '{}' is not known; use bytes or gpt2", o.encoding);
  if (o.encoding == "gpt2" && o.vocab.empty())
    fail_input(
        "tokenize: --encoding gpt2 needs --vocab DIR (the directory holding GPT-2's "
        "encoder.json and vocab.bpe)");
  if (o.encoding == "bytes" && o.sections)
    fail_input("tokenize: --sections needs --encoding gpt2 (its end-of-text token separates them)");
  if (o.val_tokens < 0) fail_input("tokenize: --val-tokens {} must not be negative", o.val_tokens);
  if ((o.val_tokens > 0) != !o.val_out.empty())
    fail_input("tokenize: --val-tokens N and --val-out FILE go together");
  check_file_writable(o.out);
  if (!o.val_out.empty()) check_file_writable(o.val_out);
  const std::string text = read_text_file(o.in);
  std::vector<int32_t> ids;
  if (o.encoding == "bytes") {
    ids = encode_bytes(text);
  } else {
    const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(o.vocab);
    ids = o.sections ? encode_sections(tokenizer, text) : tokenizer.encode(text);
  }
  if (o.val_tokens >= int64_t(ids.size()))
    fail_input("tokenize: --val-tokens {} leaves no training tokens ('{}' gives {})", o.val_tokens,
               o.in, ids.size());
  const auto split = ids.begin() + o.val_tokens;
  if (o.val_tokens > 0) write_llmc_tokens(o.val_out, std::vector<int32_t>(ids.begin(), split));
  write_llmc_tokens(o.out, std::vector<int32_t>(split, ids.end()));
  fmt::print("tokenize: {} bytes -> {} tokens ({}){}\n", text.size(), ids.size(), o.encoding,
             o.val_tokens > 0 ? fmt::format(": {} in {}, {} in {}", o.val_tokens, o.val_out,
                                            ids.size() - size_t(o.val_tokens), o.out)
                              : fmt::format(" in {}", o.out));
  return 0;
}

}  // namespace st
