// Token files: llm.c's formats (uint16 and uint32) and raw uint16/uint32, one or many, and every
// way they can be wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/data/dataset.hpp"
#include "core/data/tokenizer.hpp"
#include "core/error.hpp"
#include "tests/temp_dir.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

// One directory for this binary's token-file tests, removed when the binary exits.
std::string temp_path(const std::string& name) {
  static const testing::ScopedTempDir dir;
  return dir.path(name);
}

void write_bytes(const std::string& path, const std::vector<int32_t>& ints,
                 const std::vector<uint16_t>& tokens) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(ints.data()), std::streamsize(ints.size() * 4));
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
}

std::vector<int32_t> llmc_header(int32_t count) {
  std::vector<int32_t> h(256, 0);
  h[0] = kLlmcMagic;
  h[1] = kLlmcVersion;
  h[2] = count;
  return h;
}

// The InputError `open` throws, with every fragment in `expected` in its message.
template <class F>
void expect_input_error(F open, const std::vector<std::string>& expected) {
  try {
    open();
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    for (const auto& want : expected)
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(TokenFiles, LlmcRoundTripAndAutoDetection) {
  const std::vector<int32_t> ids = {0, 1, 50256, 65535, 7, 7, 300};
  const std::string path = temp_path("rt.bin");
  write_llmc_tokens(path, ids);
  EXPECT_EQ(fs::file_size(path), 1024u + 2 * ids.size());
  for (TokenFormat f : {TokenFormat::llmc, TokenFormat::automatic}) {
    const TokenStream s = TokenStream::from_files({path}, f, 65536);
    EXPECT_EQ(s.to_vector(), ids);
  }
  // Raw uint16: the header's ints read as tokens (auto would have seen the magic).
  const TokenStream raw = TokenStream::from_files({path}, TokenFormat::u16, 65536);
  EXPECT_EQ(raw.size(), 512 + int64_t(ids.size()));
  EXPECT_EQ(raw.at(0), kLlmcMagic & 0xffff);
}

TEST(TokenFiles, RawU16IsReadWithoutHeader) {
  const std::string path = temp_path("raw.u16");
  write_bytes(path, {}, {5, 4, 3, 2, 1});
  const TokenStream s = TokenStream::from_files({path}, TokenFormat::automatic, 6);
  EXPECT_EQ(s.to_vector(), (std::vector<int32_t>{5, 4, 3, 2, 1}));
}

TEST(TokenFiles, ManyFilesReadAsOneStreamAcrossBoundaries) {
  write_llmc_tokens(temp_path("shard_000.bin"), {1, 2, 3});
  write_llmc_tokens(temp_path("shard_001.bin"), {4});
  write_llmc_tokens(temp_path("shard_002.bin"), {5, 6, 7, 8});
  const auto paths = expand_token_paths(temp_path("shard_*.bin"), "data.tokens");
  ASSERT_EQ(paths.size(), 3u);
  const TokenStream s = TokenStream::from_files(paths, TokenFormat::automatic, 10);
  EXPECT_EQ(s.size(), 8);
  std::vector<int32_t> got(6);
  s.read(1, 6, got.data());
  EXPECT_EQ(got, (std::vector<int32_t>{2, 3, 4, 5, 6, 7}));
  const TokenStream mid = s.slice(2, 6);
  EXPECT_EQ(mid.to_vector(), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(mid.slice(1, 3).to_vector(), (std::vector<int32_t>{4, 5}));
  expect_input_error([&] { expand_token_paths(temp_path("none_*.bin"), "data.tokens"); },
                     {"data.tokens", "none_*.bin", "matches no file"});
}

TEST(TokenFiles, BadFilesNameTheFileAndWhatIsWrong) {
  const std::string magic = temp_path("bad_magic.bin");
  write_bytes(magic, {1234, 1, 0}, {});
  expect_input_error([&] { TokenStream::from_files({magic}, TokenFormat::llmc, 256); },
                     {magic, "magic 20240520"});
  const std::string truncated = temp_path("truncated.bin");
  write_bytes(truncated, {kLlmcMagic, 1, 3}, {});
  expect_input_error([&] { TokenStream::from_files({truncated}, TokenFormat::automatic, 256); },
                     {truncated, "truncated", "1024-byte header"});
  const std::string beyond = temp_path("beyond.bin");
  write_bytes(beyond, llmc_header(10), {1, 2, 3});
  expect_input_error([&] { TokenStream::from_files({beyond}, TokenFormat::automatic, 256); },
                     {beyond, "claims 10 tokens", "hold 3"});
  const std::string trailing = temp_path("trailing.bin");
  write_bytes(trailing, llmc_header(2), {1, 2, 3});
  expect_input_error([&] { TokenStream::from_files({trailing}, TokenFormat::automatic, 256); },
                     {trailing, "after its 2 tokens"});
  const std::string version = temp_path("version.bin");
  auto h = llmc_header(1);
  h[1] = 2;
  write_bytes(version, h, {1});
  expect_input_error([&] { TokenStream::from_files({version}, TokenFormat::automatic, 256); },
                     {version, "version 2"});
  const std::string odd = temp_path("odd.u16");
  std::ofstream(odd, std::ios::binary) << "abc";
  expect_input_error([&] { TokenStream::from_files({odd}, TokenFormat::u16, 256); },
                     {odd, "3 bytes, not a multiple of 2"});
  const std::string big_id = temp_path("big_id.bin");
  write_llmc_tokens(big_id, {1, 2, 300, 4, 999});
  expect_input_error([&] { TokenStream::from_files({big_id}, TokenFormat::automatic, 256); },
                     {big_id, "token 2 (byte offset 1028) is id 300", "model.vocab_size = 256"});
  const std::string empty = temp_path("empty.bin");
  write_bytes(empty, llmc_header(0), {});
  expect_input_error([&] { TokenStream::from_files({empty}, TokenFormat::automatic, 256); },
                     {empty, "no tokens"});
  expect_input_error(
      [&] { TokenStream::from_files({temp_path("missing.bin")}, TokenFormat::automatic, 256); },
      {"missing.bin", "cannot open"});
  expect_input_error(
      [&] {
        write_llmc_tokens(temp_path("negative.bin"), {1, -3});
      },
      {"token 1", "-3", "not negative"});
  EXPECT_FALSE(fs::exists(temp_path("negative.bin")));
  StagedOutput narrow(temp_path("narrow.bin"), "token file");
  expect_input_error(
      [&] {
        write_llmc_tokens(narrow, {1, 70000}, false);
      },
      {"token 1", "70000", "uint16"});
  // A uint32 file whose version is GPT-2's, and one whose count is off by a token's width.
  const std::string wide_version = temp_path("wide_version.bin");
  auto wh = llmc_header(1);
  wh[0] = kLlmcMagicU32;
  write_bytes(wide_version, wh, {1, 0});
  expect_input_error([&] { TokenStream::from_files({wide_version}, TokenFormat::automatic, 256); },
                     {wide_version, "version 1", "magic 20240801 means version 7 (uint32 tokens)"});
  wh[1] = kLlmcVersionU32;
  wh[2] = 2;
  const std::string wide_short = temp_path("wide_short.bin");
  write_bytes(wide_short, wh, {1, 0, 2});
  expect_input_error([&] { TokenStream::from_files({wide_short}, TokenFormat::automatic, 256); },
                     {wide_short, "claims 2 tokens", "hold 1"});
  const std::string raw32 = temp_path("odd.u32");
  std::ofstream(raw32, std::ios::binary) << "abcdef";
  expect_input_error([&] { TokenStream::from_files({raw32}, TokenFormat::u32, 256); },
                     {raw32, "6 bytes, not a multiple of 4", "uint32"});
}

// Vocabularies above 65,535 (Llama 3's 128,256, Qwen's 151,936): llm.c's uint32 file (magic
// 20240801, version 7) when an id needs it, raw uint32 by name, each id still checked.
TEST(TokenFiles, WideIdsUseLlmcUint32AndRawU32) {
  const std::vector<int32_t> ids = {0, 151935, 65536, 128000, 7};
  const std::string path = temp_path("wide.bin");
  write_llmc_tokens(path, ids);
  EXPECT_EQ(fs::file_size(path), 1024u + 4 * ids.size());
  std::ifstream in(path, std::ios::binary);
  int32_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[1], 7);
  EXPECT_EQ(header[2], 5);
  for (TokenFormat f : {TokenFormat::llmc, TokenFormat::automatic})
    EXPECT_EQ(TokenStream::from_files({path}, f, 151936).to_vector(), ids);
  expect_input_error(
      [&] { TokenStream::from_files({path}, TokenFormat::automatic, 128256); },
      {path, "token 1 (byte offset 1028) is id 151935", "model.vocab_size = 128256"});
  // Every id fits 16 bits: GPT-2's format, as before.
  write_llmc_tokens(path, {1, 65535});
  EXPECT_EQ(fs::file_size(path), 1024u + 2 * 2);
  const std::string raw = temp_path("ids.u32");
  {
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 4));
  }
  EXPECT_EQ(TokenStream::from_files({raw}, TokenFormat::u32, 151936).to_vector(), ids);
  expect_input_error([&] { TokenStream::from_files({raw}, TokenFormat::u32, 100000); },
                     {raw, "token 1 (byte offset 4) is id 151935"});
  EXPECT_EQ(TokenStream::from_files({raw}, TokenFormat::u32, 151936).slice(2, 4).to_vector(),
            (std::vector<int32_t>{65536, 128000}));
}

// A token file truncated while a run reads it (once SIGBUS from its memory map, exit 135 with
// no word): the reads past its new end are an InputError naming the file; those before still
// read.
TEST(TokenFiles, FileThatShrinksWhileOpenIsNamed) {
  std::vector<int32_t> ids(100000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i % 251);
  const std::string path = temp_path("shrinks.bin");
  write_llmc_tokens(path, ids);
  const TokenStream s = TokenStream::from_files({path}, TokenFormat::automatic, 256);
  fs::resize_file(path, 1024 + 2 * 100);
  EXPECT_EQ(s.at(99), 99);
  int32_t window[65];
  expect_input_error(
      [&] { s.read(90000, 65, window); },
      {path, "shrank while in use", "had 201024 bytes when opened and has 1224 now"});
  expect_input_error([&] { s.to_vector(); }, {path, "shrank while in use"});
}

TEST(TokenFiles, DatasetFromTokensEqualsTheSameTextAsBytes) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += char('a' + (i * 7) % 26);
  const std::string path = temp_path("text.bin");
  write_llmc_tokens(path, encode_bytes(text));
  DataSource source;
  source.tokens = path;
  source.val_fraction = 0.1;
  const Dataset tokens = Dataset::open(source, 256, 16);
  const Dataset bytes = Dataset::from_text("t", text, 0.1, 16);
  EXPECT_EQ(tokens.train().to_vector(), bytes.train().to_vector());
  EXPECT_EQ(tokens.val().to_vector(), bytes.val().to_vector());
  const Batch a = training_batch(tokens.train(), 3, 2, 4, 0, 4, 16);
  const Batch b = training_batch(bytes.train(), 3, 2, 4, 0, 4, 16);
  EXPECT_EQ(0, std::memcmp(a.inputs.raw(), b.inputs.raw(), 4 * 16 * 4));
  // A separate validation file replaces the split.
  const std::string val = temp_path("val.bin");
  write_llmc_tokens(val, {9, 8, 7});
  source.val_tokens = val;
  const Dataset split = Dataset::open(source, 256, 16);
  EXPECT_EQ(split.train().size(), int64_t(text.size()));
  EXPECT_EQ(split.val().to_vector(), (std::vector<int32_t>{9, 8, 7}));
  source.path = "x.txt";
  expect_input_error([&] { Dataset::open(source, 256, 16); }, {"data.path", "data.tokens"});
}

}  // namespace
}  // namespace st
