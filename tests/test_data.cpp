#include <gtest/gtest.h>

#include <fstream>

#include "core/data/builtin_corpus.hpp"
#include "core/data/dataset.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

TEST(Tokenizer, BytesRoundTrip) {
  const std::string text = "Hello\n\xff\x00 world";
  const auto tokens = encode_bytes(text);
  EXPECT_EQ(tokens[6], 255);
  EXPECT_EQ(decode_bytes(tokens.data(), tokens.size()), text);
}

TEST(BuiltinCorpus, DeterministicAndSized) {
  const std::string a = builtin_corpus(), b = builtin_corpus();
  EXPECT_EQ(a, b);
  EXPECT_GE(a.size(), size_t(1 << 20));
  EXPECT_NE(a.find("KING:"), std::string::npos);
}

TEST(Sampler, GlobalBatchDoesNotDependOnHowRowsAreSplit) {
  const Dataset data = Dataset::builtin(0.1, 32);
  const Batch whole = training_batch(data.train(), 7, 5, 8, 0, 8, 32);
  for (int64_t parts : {2, 4, 8}) {
    const int64_t rows = 8 / parts;
    for (int64_t p = 0; p < parts; ++p) {
      const Batch piece = training_batch(data.train(), 7, 5, 8, p * rows, (p + 1) * rows, 32);
      for (int64_t i = 0; i < rows * 32; ++i) {
        ASSERT_EQ(piece.inputs.data<int32_t>()[i], whole.inputs.data<int32_t>()[p * rows * 32 + i]);
        ASSERT_EQ(piece.targets.data<int32_t>()[i],
                  whole.targets.data<int32_t>()[p * rows * 32 + i]);
      }
    }
  }
  // Targets are the inputs shifted by one token.
  EXPECT_EQ(whole.targets.data<int32_t>()[0], whole.inputs.data<int32_t>()[1]);
  // Different steps draw different samples.
  const Batch next = training_batch(data.train(), 7, 6, 8, 0, 8, 32);
  EXPECT_NE(0, std::memcmp(next.inputs.raw(), whole.inputs.raw(), whole.inputs.nbytes()));
}

TEST(Dataset, SplitAndWindows) {
  std::string text(1000, 'a');
  for (size_t i = 0; i < text.size(); ++i) text[i] = char('a' + i % 26);
  const Dataset d = Dataset::from_text("t", text, 0.2, 10);
  EXPECT_EQ(d.train().size(), 800);
  EXPECT_EQ(d.val().size(), 200);
  EXPECT_EQ(window_count(d.val(), 10), 19);
  const Batch w = window_batch(d.val(), 1, 2, 10);
  EXPECT_EQ(w.inputs.data<int32_t>()[0], d.val().at(10));
  EXPECT_EQ(w.targets.data<int32_t>()[9], d.val().at(20));
}

TEST(Dataset, BadFilesAreInputErrorsNamingTheFile) {
  try {
    Dataset::from_file("/nonexistent/x.txt", 0.1, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.txt"), std::string::npos);
  }
  const testing::ScopedTempDir tmp;
  const std::string empty = tmp.path("empty.txt");
  std::ofstream(empty).close();
  EXPECT_THROW(Dataset::from_file(empty, 0.1, 8), InputError);
  const std::string tiny = tmp.path("short.txt");
  std::ofstream(tiny) << "abc";
  try {
    Dataset::from_file(tiny, 0.0, 8);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence length + 1 = 9"), std::string::npos);
  }
}

// A tokenizer whose vocabulary matches nothing of the text (no unk_token, no byte fallback:
// each character dropped) is named for it, not the text called empty.
TEST(Dataset, TextTheTokenizerEncodesToNothingNamesTheTokenizer) {
  const testing::ScopedTempDir tmp;
  std::ofstream(tmp.path("tokenizer.json"))
      << R"({"model": {"type": "BPE", "vocab": {"x": 0}, "merges": []}})";
  const std::string text = tmp.path("text.txt");
  std::ofstream(text) << "hello world";
  try {
    Dataset::from_tokenized_file(text, tmp.path("tokenizer.json"), 256, 0.1, 4);
    FAIL();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(text + "' (11 bytes) encodes to no tokens with data.tokenizer '" +
                           tmp.path("tokenizer.json") + "'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("no token of its vocabulary matched"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace st
