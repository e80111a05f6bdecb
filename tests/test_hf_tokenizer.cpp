// tokenizer.json tokenizers against Hugging Face's: the committed fixtures (real GPT-2, Llama 2,
// Llama 3 and Qwen3 tokenizer.json files cut down to what the test texts use) encode
// tests/tokenizers/texts.json to the ids Hugging Face's tokenizers.js gave (expected.json, made
// by tests/tokenizers/regenerate) and decode them back to its text.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/tokenizer/decoder.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/normalizer.hpp"
#include "core/tokenizer/pre_tokenizer.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

const std::string kDir = SHARDTRAIN_TOKENIZER_FIXTURES;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

class HfTokenizerMatches : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerMatches, HuggingFaceIdsOnEveryText) {
  const auto texts = read_json(kDir + "/texts.json");
  const auto expected = read_json(kDir + "/fixtures/expected.json")[GetParam()];
  const HfTokenizer tokenizer = HfTokenizer::load(kDir + "/fixtures/" + GetParam());
  ASSERT_EQ(texts.size(), expected["ids"].size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const auto want = expected["ids"][i].get<std::vector<int32_t>>();
    const auto got = tokenizer.encode(text);
    EXPECT_EQ(got, want) << GetParam() << " text " << i << ": " << text;
    EXPECT_EQ(tokenizer.decode(want.data(), want.size()), expected["decoded"][i].get<std::string>())
        << GetParam() << " text " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(RealFiles, HfTokenizerMatches,
                         ::testing::Values("gpt2", "llama2", "llama3", "qwen3"));

}  // namespace
}  // namespace st

namespace st {
namespace {

using nlohmann::json;

std::vector<std::string> pieces(const json& config, std::string_view text, bool first = true) {
  const auto pre = make_pre_tokenizer(config, "pre_tokenizer");
  std::vector<std::string> out;
  pre->split(text, first, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

json split(const char* regex, const char* behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", behavior},
          {"invert", invert}};
}

using Pieces = std::vector<std::string>;

// Hand-computed from Hugging Face's definitions: "a-b--c" cut at "-".
TEST(PreTokenizer, SplitBehaviours) {
  EXPECT_EQ(pieces(split("-", "Isolated"), "a-b--c"), (Pieces{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pieces(split("-", "Removed"), "a-b--c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(pieces(split("-", "MergedWithPrevious"), "a-b--c"), (Pieces{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pieces(split("-", "MergedWithNext"), "a-b--c"), (Pieces{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces(split("-", "Contiguous"), "a-b--c"), (Pieces{"a", "-", "b", "--", "c"}));
  // invert: the pattern says what the pieces are; Removed then keeps only the matches.
  EXPECT_EQ(pieces(split("[a-z]", "Removed", true), "a-b--c"), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(pieces(split("-", "Isolated"), "---"), (Pieces{"-", "-", "-"}));
}

TEST(PreTokenizer, OnigurumaSpaceClassIncludesNextLine) {
  // Oniguruma's \s holds U+0085 (NEL), which PCRE2's does not without the rewrite.
  EXPECT_EQ(pieces(split(R"(\s+)", "Removed"),
                   "a\xC2\x85"
                   "b\xC2\xA0"
                   "c"),
            (Pieces{"a", "b", "c"}));
  EXPECT_EQ(pieces(split(R"([^\s]+)", "Isolated"), "x\xC2\x85y"), (Pieces{"x", "\xC2\x85", "y"}));
}

TEST(PreTokenizer, DigitsAndMetaspace) {
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", true}}, "ab123c"),
            (Pieces{"ab", "1", "2", "3", "c"}));
  EXPECT_EQ(pieces({{"type", "Digits"}, {"individual_digits", false}}, "ab123c4"),
            (Pieces{"ab", "123", "c", "4"}));
  const std::string bar = "\xE2\x96\x81";
  const json always = {{"type", "Metaspace"}, {"replacement", bar}, {"prepend_scheme", "always"}};
  EXPECT_EQ(pieces(always, "Hey  you"), (Pieces{bar + "Hey", bar, bar + "you"}));
  const json first = {{"type", "Metaspace"}, {"replacement", bar}, {"prepend_scheme", "first"}};
  EXPECT_EQ(pieces(first, "Hey", true), (Pieces{bar + "Hey"}));
  EXPECT_EQ(pieces(first, "Hey", false), (Pieces{"Hey"}));
  const json no_split = {
      {"type", "Metaspace"}, {"replacement", bar}, {"split", false}, {"prepend_scheme", "never"}};
  EXPECT_EQ(pieces(no_split, "a b"), (Pieces{"a" + bar + "b"}));
}

TEST(PreTokenizer, ByteLevelMapsBytesAndSplitsLikeGpt2) {
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  // A prefix space, GPT-2's pattern, and bytes as their visible characters (space: U+0120 Ġ).
  EXPECT_EQ(pieces(byte_level, "Hi there's"), (Pieces{"\xC4\xA0Hi", "\xC4\xA0there", "'s"}));
  EXPECT_EQ(pieces({{"type", "ByteLevel"}, {"use_regex", false}}, "a b"), (Pieces{"a\xC4\xA0"
                                                                                  "b"}));
}

std::string normalized(const json& config, const std::string& text) {
  return make_normalizer(config, "normalizer")(text);
}

TEST(Normalizer, FormsCaseAndSequences) {
  EXPECT_EQ(normalized({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(normalized({{"type", "NFD"}}, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(normalized({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");  // the ligature U+FB01
  EXPECT_EQ(normalized({{"type", "Lowercase"}},
                       "\xC3\x89"
                       "COLE \xC4\xB0"),
            "\xC3\xA9"
            "cole i\xCC\x87");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "_"}}, "a"), "_a");
  EXPECT_EQ(normalized({{"type", "Prepend"}, {"prepend", "_"}}, ""), "");
  EXPECT_EQ(
      normalized({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "_"}}, "a b  c"),
      "a_b__c");
  EXPECT_EQ(normalized({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", " "}},
                       "a  b   c"),
            "a b c");
  EXPECT_EQ(normalized({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                       " \t a b \xE3\x80\x80"),
            "a b");
  EXPECT_EQ(normalized({{"type", "Sequence"},
                        {"normalizers",
                         {{{"type", "Lowercase"}}, {{"type", "Prepend"}, {"prepend", "#"}}}}},
                       "AB"),
            "#ab");
}

std::string decoded(const json& config, std::vector<std::string> tokens) {
  std::string out;
  for (const std::string& t : make_decoder(config, "decoder")(std::move(tokens))) out += t;
  return out;
}

TEST(Decoder, EachKind) {
  EXPECT_EQ(decoded({{"type", "ByteFallback"}}, {"a", "<0xE2>", "<0x82>", "<0xAC>", "b"}),
            "a\xE2\x82\xAC"
            "b");
  // Bytes that are not UTF-8: one U+FFFD per byte.
  EXPECT_EQ(decoded({{"type", "ByteFallback"}}, {"<0xE2>", "<0x82>", "x"}),
            "\xEF\xBF\xBD\xEF\xBF\xBDx");
  EXPECT_EQ(decoded({{"type", "ByteLevel"}}, {"\xC4\xA0Hi", "!"}), " Hi!");
  const std::string bar = "\xE2\x96\x81";
  EXPECT_EQ(decoded({{"type", "Metaspace"}, {"replacement", bar}, {"prepend_scheme", "always"}},
                    {bar + "Hey", bar + "you"}),
            "Hey you");
  EXPECT_EQ(
      decoded({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}, {"  a", " b"}),
      " ab");
  EXPECT_EQ(decoded({{"type", "Sequence"},
                     {"decoders",
                      {{{"type", "Replace"}, {"pattern", {{"String", bar}}}, {"content", " "}},
                       {{"type", "Fuse"}}}}},
                    {bar + "a", bar + "b"}),
            " a b");
}

// A tokenizer.json written into a temporary folder.
struct TokenizerFile {
  testing::ScopedTempDir dir;
  HfTokenizer load(const json& j) {
    write(j);
    return HfTokenizer::load(dir.dir());
  }
  void write(const json& j) { std::ofstream(dir.path("tokenizer.json")) << j.dump(); }
};

json bpe_file(json model, json added = json::array()) {
  model["type"] = "BPE";
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", model}};
}

TEST(BpeModel, MergesByRankLeftmostFirst) {
  TokenizerFile f;
  // "aaa": the pair (a, a) twice; the leftmost merges first: (aa)(a), as Hugging Face's heap.
  const auto t = f.load(bpe_file({{"vocab", {{"a", 0}, {"b", 1}, {"aa", 2}, {"ab", 3}, {"aab", 4}}},
                                  {"merges", {"a a", json::array({"a", "b"}), "aa b"}}}));
  EXPECT_EQ(t.encode("aaa"), (std::vector<int32_t>{2, 0}));
  // (a, a) ranks before (a, b): "aab" -> (aa) b -> aab.
  EXPECT_EQ(t.encode("aab"), (std::vector<int32_t>{4}));
  EXPECT_EQ(t.encode("ab"), (std::vector<int32_t>{3}));
}

TEST(BpeModel, UnknownsByteFallbackAndIgnoreMerges) {
  TokenizerFile f;
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}};
  const auto unk =
      f.load(bpe_file({{"vocab", vocab}, {"merges", {"a b"}}, {"unk_token", "<unk>"}}));
  EXPECT_EQ(unk.encode("axyb"), (std::vector<int32_t>{1, 0, 0, 2}));
  const auto fused = f.load(bpe_file(
      {{"vocab", vocab}, {"merges", {"a b"}}, {"unk_token", "<unk>"}, {"fuse_unk", true}}));
  EXPECT_EQ(fused.encode("axyb"), (std::vector<int32_t>{1, 0, 2}));
  const auto dropped = f.load(bpe_file({{"vocab", vocab}, {"merges", {"a b"}}}));
  // No unk_token: x is dropped, and a and b, now neighbours, merge.
  EXPECT_EQ(dropped.encode("axb"), (std::vector<int32_t>{3}));
  vocab["<0xC3>"] = 4;
  vocab["<0xA9>"] = 5;
  const auto bytes =
      f.load(bpe_file({{"vocab", vocab}, {"merges", {"a b"}}, {"byte_fallback", true}}));
  EXPECT_EQ(bytes.encode("a\xC3\xA9"
                         "b"),
            (std::vector<int32_t>{1, 4, 5, 2}));
  EXPECT_EQ(bytes.decode(std::vector<int32_t>{1, 4, 5, 2}.data(), 4), "a <0xC3> <0xA9> b");
  // ignore_merges: a word in the vocabulary is its token even where merges would not reach it.
  json direct = {{"a", 0}, {"b", 1}, {"c", 2}, {"abc", 3}, {"ab", 4}};
  const auto whole =
      f.load(bpe_file({{"vocab", direct}, {"merges", {"a b"}}, {"ignore_merges", true}}));
  EXPECT_EQ(whole.encode("abc"), (std::vector<int32_t>{3}));
  const auto merged = f.load(bpe_file({{"vocab", direct}, {"merges", {"a b"}}}));
  EXPECT_EQ(merged.encode("abc"), (std::vector<int32_t>{4, 2}));
}

TEST(BpeModel, SubwordPrefixAndWordSuffix) {
  TokenizerFile f;
  const auto t = f.load(bpe_file({{"vocab", {{"a", 0}, {"##b", 1}, {"##c</w>", 2}, {"ab", 3}}},
                                  {"merges", {"a ##b"}},
                                  {"continuing_subword_prefix", "##"},
                                  {"end_of_word_suffix", "</w>"}}));
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{3, 2}));
}

TEST(AddedTokens, StripsAndSingleWords) {
  TokenizerFile f;
  json vocab = {{"a", 0}, {" ", 1}, {"b", 2}};
  const json tokens = json::array(
      {{{"id", 3}, {"content", "<m>"}, {"lstrip", true}, {"rstrip", true}, {"special", true}},
       {{"id", 4}, {"content", "w"}, {"single_word", true}}});
  const auto t = f.load(bpe_file({{"vocab", vocab}, {"merges", json::array()}}, tokens));
  // lstrip/rstrip: the spaces beside <m> are part of its match.
  EXPECT_EQ(t.encode("a  <m>  b"), (std::vector<int32_t>{0, 3, 2}));
  // single_word: "w" between spaces is the token; inside "awb" it is not (and is dropped, as
  // the model has no "w" and no unk_token).
  EXPECT_EQ(t.encode("a w b"), (std::vector<int32_t>{0, 1, 4, 1, 2}));
  EXPECT_EQ(t.encode("awb"), (std::vector<int32_t>{0, 2}));
}

TEST(HfTokenizerFile, RefusesWhatItDoesNotImplementByName) {
  TokenizerFile f;
  const auto refused = [&](json j, const std::string& message) {
    f.write(j);
    try {
      HfTokenizer::load(f.dir.dir());
      ADD_FAILURE() << "loaded: " << j.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  json ok = bpe_file({{"vocab", {{"a", 0}}}, {"merges", json::array()}});
  json j = ok;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  refused(j, "tokenizer.json: pre_tokenizer type 'Whitespace' is not supported");
  j = ok;
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}};
  refused(j, "tokenizer.json: normalizer.normalizers[1] type 'Precompiled' is not supported");
  j = ok;
  j["decoder"] = {{"type", "WordPiece"}};
  refused(j, "tokenizer.json: decoder type 'WordPiece' is not supported");
  j = ok;
  j["model"]["type"] = "Unigram";
  refused(j, "tokenizer.json: model type 'Unigram' is not supported");
  j = ok;
  j["model"]["merges"] = {"a z"};
  refused(j, "model.merges[0] = 'a z': 'z' is not in the vocab");
  j = ok;
  j["model"]["dropout"] = 0.1;
  refused(j, "model.dropout = 0.1 is not supported");
  j = ok;
  j["pre_tokenizer"] = split("(", "Isolated");
  refused(j, "pre_tokenizer.pattern: the regex '(' does not compile");
  j = ok;
  j["surprise"] = 1;
  refused(j, "the key 'surprise' is not one tokenizer.json has");
  f.write(ok);
  const auto t = HfTokenizer::load(f.dir.dir());
  EXPECT_THROW(t.encode("a\xFF"), InputError);              // not UTF-8
  const std::vector<int32_t> with_missing = {0, 7, -1, 0};  // skipped, as Hugging Face does
  EXPECT_EQ(t.decode(with_missing.data(), with_missing.size()), "a a");
}

// The InputError `f` throws, holding every fragment of `expected`.
template <class F>
void expect_refused(F f, const std::vector<std::string>& expected) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    for (const auto& want : expected)
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

// An id far beyond any real vocabulary (10^9 once ended in std::bad_alloc: memory went with the
// largest id) is refused naming the file, the token and its id; so is an id two tokens share.
// Ids need not be dense (the fixtures above keep real ids), nor cost memory for their gaps.
TEST(HfTokenizerFile, IdsAreBoundedAndUnique) {
  TokenizerFile f;
  const std::string file = f.dir.path("tokenizer.json");
  expect_refused(
      [&] {
        f.load(bpe_file({{"vocab", {{"a", 0}, {"b", 1000000000}}}, {"merges", json::array()}}));
      },
      {file, "model.vocab['b'] has id 1000000000, beyond any real vocabulary",
       "below 16777216 (2^24; this file holds 2 entries)"});
  expect_refused(
      [&] {
        f.load(bpe_file({{"vocab", {{"a", 0}}}, {"merges", json::array()}},
                        json::array({{{"id", 100000000}, {"content", "<x>"}}})));
      },
      {file, "added_tokens[0] '<x>' has id 100000000"});
  expect_refused(
      [&] {
        f.load(bpe_file({{"vocab", {{"a", 0}, {"b", 1}, {"c", 1}}}, {"merges", json::array()}}));
      },
      {file, "model.vocab['b'] and vocab['c'] both have id 1"});
  // Added tokens that repeat vocabulary entries (Llama 2's <s>), and a gap up to 2^24 - 1.
  const auto t =
      f.load(bpe_file({{"vocab", {{"<s>", 0}, {"a", 16777215}}}, {"merges", json::array()}},
                      json::array({{{"id", 0}, {"content", "<s>"}}})));
  EXPECT_EQ(t.vocab_size(), 16777216);
  EXPECT_EQ(t.encode("<s>a"), (std::vector<int32_t>{0, 16777215}));
  const std::vector<int32_t> ids = {16777215, 5, 0};
  EXPECT_EQ(t.decode(ids.data(), ids.size()), "a <s>");
}

// A regex that backtracks without end on the text (a nested repetition on a long run) hits
// PCRE2's match limit: an InputError naming the file, the pattern and the limit.
TEST(HfTokenizerFile, CatastrophicBacktrackingNamesThePattern) {
  TokenizerFile f;
  const std::string text = std::string(10000, 'a') + "b";
  json j = bpe_file({{"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array()}});
  j["pre_tokenizer"] = split("(a+)+$", "Isolated");
  expect_refused([&] { f.load(j).encode(text); },
                 {f.dir.path("tokenizer.json") + ": pre_tokenizer.pattern: the regex '(a+)+$'",
                  "PCRE2's match limit (catastrophic backtracking)", "10001 bytes"});
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"content", "x"}};
  expect_refused([&] { f.load(j).encode(text); },
                 {"tokenizer.json: normalizer.pattern: the regex '(a+)+$'", "match limit"});
}

// A tokenizer.json that is not a regular file (a FIFO would block) is named as what it is,
// not taken for missing.
TEST(HfTokenizerFile, FifoIsNotARegularFile) {
  TokenizerFile f;
  const std::string file = f.dir.path("tokenizer.json");
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  expect_refused([&] { HfTokenizer::load(f.dir.dir()); }, {file, "is a FIFO, not a regular file"});
  expect_refused([&] { HfTokenizer::load(file); }, {file, "is a FIFO, not a regular file"});
}

TEST(HfTokenizerFile, SectionSeparatorFromTemplateOrConfig) {
  TokenizerFile f;
  json j = bpe_file(
      {{"vocab", {{"a", 0}, {"<s>", 1}, {"</s>", 2}, {"\n", 3}}}, {"merges", json::array()}});
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  EXPECT_EQ(encode_sections(f.load(j), "a\n\na"), (std::vector<int32_t>{1, 0, 3, 3, 1, 0, 3, 3}));
  j["post_processor"] = nullptr;
  std::ofstream(f.dir.path("tokenizer_config.json"))
      << R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "add_eos_token": true})";
  EXPECT_EQ(encode_sections(f.load(j), "a"), (std::vector<int32_t>{1, 0, 3, 3, 2}));
  std::ofstream(f.dir.path("tokenizer_config.json")) << R"({"add_bos_token": false})";
  EXPECT_THROW(encode_sections(f.load(j), "a"), InputError);  // nothing names a separator
}

}  // namespace
}  // namespace st
