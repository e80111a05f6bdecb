// tokenize: text into llm.c token files, as bytes or under GPT-2's BPE.
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/token_stream.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/staged_output.hpp"
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
  std::vector<int32_t> ids;
  if (o.encoding == "bytes") {
    ids = encode_bytes(text);
  } else {
    const Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(o.vocab);
    ids = o.sections ? encode_sections(tokenizer, text) : tokenizer.encode(text);
  }
  if (ids.empty()) fail_input("tokenize: '{}' holds no text: nothing to tokenize", o.in);
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
  fmt::print("tokenize: {} bytes -> {} tokens ({}){}\n", text.size(), ids.size(), o.encoding,
             o.val_tokens > 0 ? fmt::format(": {} in {}, {} in {}", o.val_tokens, o.val_out,
                                            ids.size() - size_t(o.val_tokens), o.out)
                              : fmt::format(" in {}", o.out));
  return 0;
}

}  // namespace st
