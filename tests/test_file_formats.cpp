// The parsers of files written outside this process, without MPI: checkpoint manifests and
// safetensors headers. Each bad field is refused with a message naming it (the fuzz targets
// in tests/fuzz/ throw random bytes at the same functions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "checkpoint/checkpoint_manifest.hpp"
#include "checkpoint/hf_weights.hpp"
#include "checkpoint/safetensors.hpp"
#include "core/error.hpp"
#include "core/json_parse.hpp"

namespace st {
namespace {

// 1 unit of 10 elements saved by 3 ranks (shards of 4), states master and exp_avg.
CheckpointManifest small_manifest() {
  CheckpointManifest m;
  m.step = 7;
  m.world_size = 3;
  m.meta = {{"note", "test"}};
  m.states = {"master", "exp_avg"};
  m.units = {{"root", 10, 4}};
  m.params = {{"w", {2, 5}, 0, 0, {}}};
  for (int r = 0; r < 3; ++r)
    for (const auto& s : m.states)
      m.files.push_back({checkpoint_file_name(s, r), s, r, 16, "0123456789abcdef"});
  return m;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Manifest, RoundTrips) {
  const CheckpointManifest m = parse_checkpoint_manifest(manifest_text(small_manifest()), "M");
  EXPECT_EQ(m.step, 7);
  EXPECT_EQ(m.world_size, 3);
  EXPECT_EQ(m.meta["note"], "test");
  ASSERT_EQ(m.files.size(), 6u);
  EXPECT_EQ(m.files[5].file, "exp_avg.rank-00002.bin");
  EXPECT_EQ(m.file_bytes(), 16);
  EXPECT_EQ(m.params[0].shape, (Shape{2, 5}));
}

TEST(Manifest, AHandEditIsRefusedByItsChecksum) {
  auto j = nlohmann::json::parse(manifest_text(small_manifest()));
  j["step"] = 8;
  EXPECT_NE(error_of([&] {
              parse_checkpoint_manifest(j.dump(), "'M'");
            }).find("'M': the manifest does not match its own checksum"),
            std::string::npos);
}

// Each edit (applied to a version-1 manifest, which has no checksum, so that the field checks
// are reached) and a part of the message it must give.
TEST(Manifest, EveryFieldIsCheckedForTypeRangeAndConsistency) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](auto& j) { j["step"] = -1; }, "step = -1 must be an integer in [0,"},
      {[](auto& j) { j["step"] = 1.5; }, "step = 1.5 must be an integer"},
      {[](auto& j) { j["step"] = 18446744073709551615u; }, "must be an integer"},
      {[](auto& j) { j["world_size"] = "3"; }, "world_size = \"3\" must be an integer"},
      {[](auto& j) { j["world_size"] = 0; }, "world_size = 0 must be an integer in [1,"},
      {[](auto& j) { j["world_size"] = 2, j["units"][0]["shard_numel"] = 5; },
       "expected 4 files (2 states x 2 ranks), found 6"},
      {[](auto& j) { j["version"] = 4; }, "version 4 is not supported"},
      {[](auto& j) { j["format"] = "other"; }, "is not a shardtrain checkpoint manifest"},
      {[](auto& j) { j["meta"] = 3; }, "'meta' must be a JSON object"},
      {[](auto& j) { j.erase("files"); }, "the manifest has no 'files'"},
      {[](auto& j) { j["units"][0]["shard_numel"] = 5; },
       "units[0].shard_numel = 5 does not split 10 elements over 3 ranks"},
      {[](auto& j) { j["units"][0]["numel"] = 0; }, "units[0].numel = 0 must be an integer in [1,"},
      {[](auto& j) { j["units"] = nlohmann::json::array(); }, "'units' is empty"},
      {[](auto& j) { j["params"][0]["unit"] = 99; },
       "params[0].unit = 99 must be an integer in [0, 0]"},
      {[](auto& j) { j["params"][0]["flat_offset"] = 6; }, "does not fit unit 0 (10 elements)"},
      {[](auto& j) {
         j["params"][0]["shape"] = {1 << 30, 1 << 30, 1 << 30};
       },
       "has too many elements"},
      {[](auto& j) { j["params"][0]["shape"] = {2.5}; }, "shape[0] = 2.5 must be an integer"},
      {[](auto& j) { j["states"][0] = "../x"; }, "states[0] = \"../x\" must be a name"},
      {[](auto& j) { j["states"][1] = "master"; }, "state 'master' is listed twice"},
      {[](auto& j) { j["files"][1]["rank"] = 1; },
       "files[1] should be file 'exp_avg.rank-00000.bin'"},
      {[](auto& j) { j["files"][2]["file"] = "../../etc/passwd"; }, "files[2] should be file"},
      {[](auto& j) { j["files"][0]["bytes"] = 17; },
       "files[0].bytes = 17, but the units' shards make 16 bytes"},
      {[](auto& j) { j["files"][0]["xxh64"] = "zz"; },
       "files[0].xxh64 = 'zz' must be 16 lowercase hex digits"},
  };
  for (const auto& [edit, needle] : cases) {
    auto j = nlohmann::json::parse(manifest_text(small_manifest()));
    j.erase("manifest_xxh64");
    j["version"] = 1;
    edit(j);
    const std::string message = error_of([&] { parse_checkpoint_manifest(j.dump(), "'M'"); });
    EXPECT_NE(message.find(needle), std::string::npos) << message << "\n  wanted: " << needle;
    EXPECT_EQ(message.rfind("'M'", 0), 0u) << message;
  }
}

// A tensor-parallel save: 4 ranks = 2 shards x TP 2; "w" [4, 5] split by rows (10 elements a
// slice), "b" [3] whole on each TP rank: units of 13 elements, shards of 7.
CheckpointManifest tp_manifest() {
  CheckpointManifest m;
  m.world_size = 4;
  m.tp = 2;
  m.meta = nlohmann::json::object();
  m.states = {"master"};
  m.units = {{"root", 13, 7}};
  m.params = {{"w", {4, 5}, 0, 0, Placement::shard(0)}, {"b", {3}, 0, 10, {}}};
  for (int r = 0; r < 4; ++r)
    m.files.push_back({checkpoint_file_name("master", r), "master", r, 28, "0123456789abcdef"});
  return m;
}

TEST(Manifest, TensorParallelSavesKeepTheirDegreeAndPlacements) {
  const CheckpointManifest m = parse_checkpoint_manifest(manifest_text(tp_manifest()), "M");
  EXPECT_EQ(m.tp, 2);
  EXPECT_EQ(m.params[0].shape, (Shape{4, 5}));  // the whole parameter's
  EXPECT_EQ(m.params[0].placement, Placement::shard(0));
  EXPECT_EQ(m.params[0].slice_numel(m.tp), 10);
  EXPECT_EQ(m.params[1].placement, Placement{});
  EXPECT_EQ(m.params[1].slice_numel(m.tp), 3);
  // A manifest of version 2 (no "tp") reads as tp = 1.
  EXPECT_EQ(parse_checkpoint_manifest(manifest_text(small_manifest()), "M").tp, 1);

  const std::vector<std::pair<std::function<void(CheckpointManifest&)>, std::string>> cases = {
      {[](auto& m) { m.tp = 3; }, "tp = 3 does not divide world_size = 4"},
      {[](auto& m) { m.tp = 8; }, "tp = 8 must be an integer in [1, 4]"},
      {[](auto& m) {
         m.params[0].shape = {3, 5};
       },
       "params[0].placement splits dimension 0 (3) into 1 part(s) of 2 TP ranks' pieces"},
      {[](auto& m) { m.params[0].placement.dim = 2; },
       "params[0].placement.dim = 2 must be an integer in [0, 1]"},
      {[](auto& m) { m.params[0].placement = {}; },
       "params[0] ('w', 20 elements at offset 0) does not fit unit 0 (13 elements)"},
      {[](auto& m) { m.units[0].shard_numel = 4; },
       "units[0].shard_numel = 4 does not split 13 elements over 2 ranks (that is 7)"},
  };
  for (const auto& [edit, needle] : cases) {
    CheckpointManifest m = tp_manifest();
    edit(m);
    const std::string message =
        error_of([&] { parse_checkpoint_manifest(manifest_text(m), "'M'"); });
    EXPECT_NE(message.find(needle), std::string::npos) << message << "\n  wanted: " << needle;
  }
}

TEST(Json, DuplicateKeysAreErrorsNamingTheKey) {
  EXPECT_NE(error_of([] {
              parse_json_object(R"({"a": 1, "b": {"c": 1, "c": 2}})", "F");
            }).find("F has the key 'b.c' twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_json_object(R"({"a": 1, "a": 1})", "F"); }).find("'a' twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_json_object("[1]", "F"); }).find("F is not a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_json_object("{", "F"); }).find("F is not valid JSON"),
            std::string::npos);
  EXPECT_EQ(parse_json_object(R"({"a": {"x": 1}, "b": {"x": 2}})", "F")["b"]["x"], 2);
}

// A safetensors file's bytes: the 8-byte length, the header, then `data` zero bytes.
std::string safetensors_bytes(const std::string& header, size_t data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data, '\0');
}

std::string safetensors_error(const std::string& header, size_t data = 24) {
  const std::vector<ParamSpec> specs = {{"a", {2, 2}}, {"b", {2}}};
  const std::string bytes = safetensors_bytes(header, data);
  return error_of([&] {
    check_safetensors_layout("F", parse_safetensors_header("F", bytes, int64_t(bytes.size())),
                             specs);
  });
}

TEST(SafetensorsHeader, EveryEntryIsChecked) {
  const std::string b = R"("b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]})";
  EXPECT_EQ(safetensors_error(
                R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, )" + b + "}"),
            "(no error)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a": {"dtype": 7, "shape": [2, 2], "data_offsets": [0, 16]}, )" + b + "}",
       "'F': tensor 'a' has dtype 7 where a string (F32, BF16 or F16) belongs"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "a": {}, )" + b + "}",
       "has the key 'a' twice"},
      {R"({"a": {"dtype": "F32", "shape": [2.0, 2], "data_offsets": [0, 16]}, )" + b + "}",
       "shape[0] = 2.0 must be an integer"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [-8, 8]}, )" + b + "}",
       "data_offsets[0] = -8 must be an integer in [0, 24]"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 9223372036854775807]}, )" +
           b + "}",
       "data_offsets[1] = 9223372036854775807 must be an integer in [0, 24]"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}, )" + b + "}",
       "has data_offsets [0,12] where [begin, begin + 16]"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]}, )" + b + "}",
       "tensors 'a' and 'b' overlap"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, "c": {}, )" + b + "}",
       "'F' holds tensor 'c', which this model does not have"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})", "has no tensor 'b'"},
      {R"({"a": "x", )" + b + "}", "tensor 'a' is not a JSON object"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, )" + b + "}",
       "tensor 'a' has shape [4] but the model needs [2, 2]"},
  };
  for (const auto& [header, needle] : cases) {
    const std::string message = safetensors_error(header);
    EXPECT_NE(message.find(needle), std::string::npos) << message << "\n  wanted: " << needle;
  }
  EXPECT_NE(error_of([] {
              parse_safetensors_header("F", std::string(8, '\xff'), 8);
            }).find("header length 18446744073709551615 does not fit the file"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_safetensors_header("F", "abc", 3); }).find("too short"),
            std::string::npos);
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// F16 tensors are widened exactly: normal, subnormal, signed zero, the largest, infinity, NaN.
TEST(HfWeights, HalfToFloatIsExact) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)) && half_to_float(0x8000) == 0.0f);
  EXPECT_EQ(half_to_float(0x7c00), INFINITY);
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
}

// Hugging Face's shard rule: declaration order, a new file when the next tensor would pass the
// limit, an oversized tensor alone; sizes in its units.
TEST(HfWeights, ShardsSplitAsHuggingFaceDoes) {
  std::vector<ParamSpec> specs(4);
  const std::vector<int64_t> numel = {100, 100, 500, 10};
  const char* names[] = {"t0", "t1", "t2", "t3"};
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].name = names[i];
    specs[i].shape = {numel[i]};
  }
  // FP32: 400, 400, 2000, 40 bytes against a limit of 1000.
  const auto shards = split_into_shards(specs, DType::f32, 1000);
  EXPECT_EQ(shards, (std::vector<std::vector<size_t>>{{0, 1}, {2}, {3}}));
  EXPECT_EQ(split_into_shards(specs, DType::bf16, 1 << 20).size(), 1u);
  EXPECT_EQ(shard_file_name(0, 3), "model-00001-of-00003.safetensors");
  EXPECT_EQ(shard_file_name(0, 1), "model.safetensors");
  const nlohmann::json index = nlohmann::json::parse(shard_index_json(specs, DType::f32, shards));
  EXPECT_EQ(index["metadata"]["total_size"], 2840);
  EXPECT_EQ(index["weight_map"]["t2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(parse_byte_size("5GB", "f"), 5000000000);
  EXPECT_EQ(parse_byte_size("64KiB", "f"), 65536);
  EXPECT_EQ(parse_byte_size("123", "f"), 123);
  for (const char* bad : {"", "GB", "5 GB", "-1", "5XB", "999999999999GB", "0"}) {
    try {
      parse_byte_size(bad, "--max-shard-size");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--max-shard-size"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace st
