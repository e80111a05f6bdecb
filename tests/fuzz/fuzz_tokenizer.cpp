// Fuzz target: any bytes through two complete tokenizers, built in memory as tokenizer.json
// files say them: a GPT-2-style byte-level BPE (ByteLevel pre-tokenizer, every byte a token, a
// few merges, a special token) and a Llama 2-style SentencePiece BPE (Prepend and Replace
// normalizers, byte fallback, Metaspace-like decoding). Text that is not UTF-8 must be an
// InputError; any other text must decode back to itself (NFC'd for the byte-level one, which
// normalizes; with "▁" read as a space for the other, as SentencePiece reads it), whatever the
// merges did. Texts holding a special token only need not crash (each side of one is
// normalized apart, as Hugging Face does).
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/unicode.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using nlohmann::json;

json byte_level_file() {
  json vocab = json::object();
  const auto& cp = st::unicode::byte_level_code_points();
  std::string symbol[256];
  for (int b = 0; b < 256; ++b) {
    st::unicode::append_utf8(symbol[b], cp[size_t(b)]);
    vocab[symbol[b]] = b;
  }
  const std::string space = symbol[size_t(' ')];
  vocab[space + "t"] = 256;
  vocab["he"] = 257;
  vocab[space + "the"] = 258;
  vocab["in"] = 259;
  return {{"added_tokens", {{{"id", 260}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {space + " t", "h e", json::array({space + "t", "he"}), "i n"}}}}};
}

json sentencepiece_file() {
  const std::string bar = "\xE2\x96\x81";
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {bar, 2}, {"a", 3}, {"b", 4}, {bar + "a", 5}, {"ab", 6}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 7 + b;
  return {{"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}}}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", bar}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", bar}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", bar}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {bar + " a", "a b"}},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", true}}}};
}

void round_trip(const st::HfTokenizer& t, const std::string& text, const std::string& want) {
  const auto ids = t.encode(text);
  if (t.decode(ids.data(), ids.size()) != want) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const st::HfTokenizer byte_level = st::HfTokenizer::from_json(
      byte_level_file(), "byte-level/tokenizer.json", json::object(), "tokenizer_config.json");
  static const st::HfTokenizer sentencepiece =
      st::HfTokenizer::from_json(sentencepiece_file(), "sentencepiece/tokenizer.json",
                                 json::object(), "tokenizer_config.json");
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (st::unicode::first_invalid_utf8(text) != text.size()) {
    for (const st::HfTokenizer* t : {&byte_level, &sentencepiece}) {
      try {
        t->encode(text);
        std::abort();  // bytes that are not UTF-8 were taken
      } catch (const st::InputError& e) {
        st::fuzzing::refused(e);
      }
    }
    return 0;
  }
  if (text.find("<|endoftext|>") != std::string::npos || text.find("<s>") != std::string::npos) {
    byte_level.encode(text);
    sentencepiece.encode(text);
    return 0;
  }
  round_trip(byte_level, text, st::unicode::normalize(text, st::unicode::Form::nfc));
  // Prepend adds one "▁" that the Strip decoder takes off again; an empty text stays empty.
  std::string spaced;
  for (size_t at = 0; at < text.size();) {
    if (text.compare(at, 3, "\xE2\x96\x81") == 0) {
      spaced += ' ';
      at += 3;
    } else {
      spaced += text[at++];
    }
  }
  round_trip(sentencepiece, text, spaced);
  return 0;
}
