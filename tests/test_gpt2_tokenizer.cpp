// GPT-2's BPE against the reference encoder: ids for contractions, digits, whitespace runs and
// non-ASCII text (from the JavaScript encoder the shared files were made with), and the shared
// tiny Shakespeare token files reproduced bit for bit. Skips where ../shared/data is absent.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/data/gpt2_tokenizer.hpp"
#include "core/data/token_stream.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

const std::string kShared = SHARDTRAIN_SHARED_DATA;

#define REQUIRE_SHARED(file)                          \
  if (!std::filesystem::exists(kShared + "/" + file)) \
  GTEST_SKIP() << "skipped: " << kShared << "/" << file << " is absent"

const Gpt2Tokenizer& tokenizer() {
  static const Gpt2Tokenizer t = Gpt2Tokenizer::load(kShared + "/gpt2");
  return t;
}

TEST(Gpt2Tokenizer, MatchesTheReferenceEncoder) {
  REQUIRE_SHARED("gpt2/vocab.bpe");
  // (text, ids from gpt-3-encoder 1.1.4's encode)
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Hello, world", {15496, 11, 995}},
      {"I'm sure they'll say we've done it, don't you?",
       {40, 1101, 1654, 484, 1183, 910, 356, 1053, 1760, 340, 11, 836, 470, 345, 30}},
      {"Numbers: 12345 and 3.14159, 2024-11-23!",
       {49601, 25, 17031, 2231, 290, 513, 13, 1415, 19707, 11, 48609, 12, 1157, 12, 1954, 0}},
      {"  two  spaces\n\n\tand tabs   \n",
       {220, 734, 220, 9029, 628, 197, 392, 22524, 220, 220, 220, 198}},
      {"naïve café — Zürich, 東京 and emoji 🙂!",
       {2616, 38776, 40304, 851, 1168, 9116, 7527, 11, 10545, 251, 109, 12859, 105, 290, 44805,
        32485, 0}},
      {"ÀÉÎÕÜ ſ ß ﬁ",
       {127, 222, 38351, 127, 236, 127, 243, 127, 250, 25370, 123, 6184, 253, 27332, 105, 223}},
      {"trailing space ", {9535, 4386, 2272, 220}},
      {"x\u00a0y", {87, 1849, 88}},
      {"A'S 'll'd", {32, 6, 50, 705, 297, 1549}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tokenizer().encode(text), ids) << text;
    EXPECT_EQ(tokenizer().decode(ids.data(), ids.size()), text);
  }
  EXPECT_EQ(tokenizer().vocab_size(), 50257);
}

TEST(Gpt2Tokenizer, InvalidUtf8RoundTrips) {
  REQUIRE_SHARED("gpt2/vocab.bpe");
  const std::string bytes = std::string("ok \xff\xfe bad \xc3 end") + '\0' + "nul";
  const auto ids = tokenizer().encode(bytes);
  EXPECT_EQ(tokenizer().decode(ids.data(), ids.size()), bytes);
  const int32_t bad = 50257;
  EXPECT_THROW(tokenizer().decode(&bad, 1), InputError);
}

// The whole of tiny Shakespeare (338,029 tokens): 17 s under the sanitizers for the code the
// other Gpt2Tokenizer tests run there, so only the plain build compiles it.
#ifndef SHARDTRAIN_SANITIZED
TEST(Gpt2Tokenizer, ReproducesTheSharedTokenFiles) {
  REQUIRE_SHARED("tiny_shakespeare_gpt2_train.bin");
  const auto ids = encode_sections(tokenizer(), read_text_file(kShared + "/tinyshakespeare.txt"));
  const auto val = TokenStream::from_files({kShared + "/tiny_shakespeare_gpt2_val.bin"},
                                           TokenFormat::llmc, 50257)
                       .to_vector();
  const auto train = TokenStream::from_files({kShared + "/tiny_shakespeare_gpt2_train.bin"},
                                             TokenFormat::llmc, 50257)
                         .to_vector();
  ASSERT_EQ(ids.size(), val.size() + train.size());
  EXPECT_EQ(ids.size(), 338029u);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t want = i < val.size() ? val[i] : train[i - val.size()];
    ASSERT_EQ(ids[i], want) << "token " << i;
  }
}
#endif

TEST(Gpt2Tokenizer, MissingOrBadVocabularyNamesTheFile) {
  const testing::ScopedTempDir tmp;
  const std::string dir = tmp.path("bad_vocab");
  std::filesystem::create_directories(dir);
  try {
    Gpt2Tokenizer::load(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/encoder.json"), std::string::npos) << e.what();
  }
  write_text_file(dir + "/encoder.json", R"({"a": 0, "b": 1, "ab": 2})");
  write_text_file(dir + "/vocab.bpe", "#version: 0.2\na b\nab\n");
  try {
    Gpt2Tokenizer::load(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.bpe' line 3"), std::string::npos) << e.what();
  }
  write_text_file(dir + "/vocab.bpe", "#version: 0.2\na b\n");
  const Gpt2Tokenizer t = Gpt2Tokenizer::load(dir);
  EXPECT_EQ(t.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_THROW(t.encode("c"), InputError);  // a byte the vocabulary lacks
  // A token given twice is refused by name, not read as whichever id came last.
  write_text_file(dir + "/encoder.json", R"({"a": 0, "b": 1, "ab": 2, "a": 3})");
  try {
    Gpt2Tokenizer::load(dir);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has the key 'a' twice"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("encoder.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace st
