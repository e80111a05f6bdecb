// Sharded checkpoints under mpirun (1 to 4 ranks): exact resume, resharding between world sizes
// (through sub-groups of the world), and corrupt or mismatched checkpoints as clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.hpp"
#include "collectives/mpi_process_group.hpp"
#include "core/file_io.hpp"
#include "launch/model_factory.hpp"
#include "launch/sharded_trainer.hpp"
#include "models/family.hpp"
#include "tests/support/shared_dir.hpp"
#include "tests/support/test_family.hpp"

namespace st {
namespace {

namespace fs = std::filesystem;

MpiProcessGroup& world() {
  static auto group = MpiProcessGroup::world();
  return *group;
}

std::string shared_dir(const std::string& what) {
  return testing::shared_dir(world(), what);
}

Config test_config(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {
      "model.n_layer=2",      "model.n_embd=64",          "model.n_head=4",
      "model.block_size=32",  "training.seq_len=32",      "training.global_batch=12",
      "training.max_steps=8", "optimizer.warmup_steps=2", "precision.param_dtype=fp32",
      "checkpoint.dir=" + dir};
  const std::vector<std::string> family = testing::family_overrides();
  o.insert(o.end(), family.begin(), family.end());
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("tiny", o);
}

const Dataset& data() {
  static const Dataset d = Dataset::builtin(0.05, 32);
  return d;
}

std::vector<Tensor> all_masters(ShardedTrainer& t) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < t.model().param_specs().size(); ++i)
    out.push_back(t.fsdp().gather_master(i));
  return out;
}

TEST(Checkpoint, ResumeIsBitwiseTheUninterruptedRun) {
  const std::string dir = shared_dir("resume");
  const Config config = test_config(dir);
  ShardedTrainer straight(config, data(), world(), make_model(config));
  std::vector<double> losses;
  for (int64_t s = 0; s < 6; ++s) {
    losses.push_back(straight.step(s).loss);
    if (s == 2) straight.save_checkpoint(3);
  }
  ShardedTrainer resumed(config, data(), world(), make_model(config));
  ASSERT_EQ(resumed.load_checkpoint(latest_checkpoint(dir)), 3);
  for (int64_t s = 3; s < 6; ++s)
    EXPECT_EQ(resumed.step(s).loss, losses[size_t(s)]) << "step " << s;
  const auto a = all_masters(straight), b = all_masters(resumed);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()), 0) << a[i].name();
}

// Saved by the first `from` ranks, loaded by the first `to` ranks: the continued losses match
// the run that went on at `from` ranks to FP32 reduction-order rounding (as in the sharding
// tests: 1e-5 relative).
void expect_reshard(int from, int to) {
  const std::string dir = shared_dir(fmt::format("reshard-{}-{}", from, to));
  const Config config = test_config(dir);
  const int rank = world().rank();
  auto saver = world().split(rank < from ? 0 : 1, rank);
  std::vector<double> want(5, 0.0);
  if (rank < from) {
    ShardedTrainer t(config, data(), *saver, make_model(config));
    for (int64_t s = 0; s < 3; ++s) t.step(s);
    t.save_checkpoint(3);
    for (int64_t s = 3; s < 5; ++s) want[size_t(s)] = t.step(s).loss;
  }
  // Every rank learns the reference losses from rank 0 (a member of both groups).
  Tensor w = Tensor::zeros("want", {5}, DType::f64);
  if (rank == 0) std::memcpy(w.raw(), want.data(), 5 * sizeof(double));
  world().broadcast(w, 0)->wait();
  auto loader = world().split(rank < to ? 0 : 1, rank);
  if (rank < to) {
    ShardedTrainer t(config, data(), *loader, make_model(config));
    ASSERT_EQ(t.load_checkpoint(latest_checkpoint(dir)), 3);
    for (int64_t s = 3; s < 5; ++s) {
      const double got = t.step(s).loss, expected = w.data<double>()[s];
      EXPECT_NEAR(got, expected, 1e-5 * expected) << from << " -> " << to << " ranks, step " << s;
    }
  }
  world().barrier()->wait();
}

TEST(Checkpoint, ReshardsBetweenWorldSizes) {
  const int W = world().size();
  ASSERT_GE(W, 2) << "resharding needs two world sizes";
  // The pairs where this world has the ranks for them, and the reverse of each.
  const std::vector<std::pair<int, int>> pairs = {{4, 2}, {2, 3}, {1, 4}, {3, 1}, {2, 1}, {1, 2}};
  int ran = 0;
  for (auto [from, to] : pairs)
    if (from <= W && to <= W && from != to) {
      expect_reshard(from, to);
      ++ran;
    }
  EXPECT_GE(ran, 1);
}

// A mesh for the checkpoint tests: its ranks and the settings that make it.
struct CheckpointMesh {
  int ranks = 1;
  int tp = 1;
  int dp_replicate = 1;
  std::string name() const {
    return fmt::format("{} ranks (tp {}, dp_replicate {})", ranks, tp, dp_replicate);
  }
  std::vector<std::string> settings() const {
    return {fmt::format("parallel.tp={}", tp),
            fmt::format("parallel.dp_replicate={}", dp_replicate),
            fmt::format("parallel.dp_shard={}", ranks / tp / dp_replicate),
            "parallel.allow_cross_node_tp=true"};
  }
};

bool family_splits_over(int tp) {
  const Config config = test_config("unused");
  const ModelFamily& family = model_family(config.model.family);
  if (!family.check_tensor_parallel) return false;
  try {
    family.check_tensor_parallel(config.model, tp);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// Saved by the first from.ranks ranks on mesh `from`, loaded by the first to.ranks on `to`:
// every whole master right after loading is bitwise the saved one (the checkpoint is in whole
// parameter coordinates: slicing and sharding only move bytes), and the continued losses match
// the saving run's to FP32 reduction-order rounding.
void expect_mesh_change(const CheckpointMesh& from, const CheckpointMesh& to) {
  const std::string dir =
      shared_dir(fmt::format("mesh-{}-{}-{}-{}", from.ranks, from.tp, to.ranks, to.tp));
  const int rank = world().rank();
  const size_t params = make_model(test_config(dir))->param_specs().size();
  // The trainer keeps a reference to its config.
  const Config from_config = test_config(dir, from.settings()),
               to_config = test_config(dir, to.settings());
  const auto trainer = [&](const Config& config, ProcessGroup& group) {
    return std::make_unique<ShardedTrainer>(
        config, data(), group, make_model(config, tp_slice_of(config, group.rank(), group.size())));
  };
  auto saver = world().split(rank < from.ranks ? 0 : 1, rank);
  std::vector<double> want(5, 0.0);
  std::vector<Tensor> saved;
  if (rank < from.ranks) {
    auto t = trainer(from_config, *saver);
    for (int64_t s = 0; s < 3; ++s) t->step(s);
    t->save_checkpoint(3);
    for (size_t i = 0; i < params; ++i) saved.push_back(t->whole_master(i));
    for (int64_t s = 3; s < 5; ++s) want[size_t(s)] = t->step(s).loss;
  }
  // Every rank learns the reference from rank 0 (a member of both groups).
  Tensor w = Tensor::zeros("want", {5}, DType::f64);
  if (rank == 0) std::memcpy(w.raw(), want.data(), 5 * sizeof(double));
  world().broadcast(w, 0)->wait();
  for (size_t i = 0; i < params; ++i) {
    Tensor whole = rank == 0 ? saved[i] : Tensor();
    int64_t numel = rank == 0 ? whole.numel() : 0;
    Tensor n = Tensor::zeros("numel", {1}, DType::i64);
    n.data<int64_t>()[0] = numel;
    world().broadcast(n, 0)->wait();
    if (rank != 0) whole = Tensor::zeros("saved", {n.data<int64_t>()[0]}, DType::f32);
    world().broadcast(whole, 0)->wait();
    if (rank != 0) saved.push_back(whole);
  }
  auto loader = world().split(rank < to.ranks ? 0 : 1, rank);
  if (rank < to.ranks) {
    auto t = trainer(to_config, *loader);
    ASSERT_EQ(t->load_checkpoint(latest_checkpoint(dir)), 3);
    for (size_t i = 0; i < params; ++i) {
      const Tensor got = t->whole_master(i);
      ASSERT_EQ(got.numel(), saved[i].numel()) << t->model().param_specs()[i].name;
      EXPECT_EQ(std::memcmp(got.raw(), saved[i].raw(), got.nbytes()), 0)
          << from.name() << " -> " << to.name() << ": " << t->model().param_specs()[i].name;
    }
    for (int64_t s = 3; s < 5; ++s) {
      const double got = t->step(s).loss, expected = w.data<double>()[s];
      EXPECT_NEAR(got, expected, 1e-5 * expected)
          << from.name() << " -> " << to.name() << ", step " << s;
    }
  }
  world().barrier()->wait();
}

// The chain where this world has the ranks: a checkpoint of (dp_shard 2, tp 2) resumes
// at tp 1 on one rank and on the whole world, at tp 4; and back.
TEST(Checkpoint, LoadsOnAnyTensorParallelMesh) {
  const int W = world().size();
  ASSERT_GE(W, 2) << "changing meshes needs two ranks";
  ASSERT_TRUE(family_splits_over(2)) << "every family has a tensor-parallel plan";
  std::vector<std::pair<CheckpointMesh, CheckpointMesh>> pairs = {
      {{2, 2}, {1, 1}}, {{1, 1}, {2, 2}}, {{2, 2}, {W, 1}}, {{W, 1}, {2, 2}}};
  if (W == 4) {
    pairs.push_back({{4, 2}, {1, 1}});     // FSDP 2 x TP 2 to one rank
    pairs.push_back({{4, 2, 2}, {3, 1}});  // DDP 2 x TP 2 to FSDP 3
    if (family_splits_over(4)) pairs.push_back({{4, 2}, {4, 4}});
    if (family_splits_over(4)) pairs.push_back({{4, 4}, {2, 2}});
  }
  for (const auto& [from, to] : pairs) expect_mesh_change(from, to);
}

// Corruptions of a saved checkpoint, each made by rank 0 on a fresh copy; loading must fail on
// every rank with an InputError whose message names the file or key.
class CorruptCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(shared_dir("corrupt"));
    const Config config = test_config(*dir_);
    ShardedTrainer t(config, data(), world(), make_model(config));
    t.step(0);
    good_ = new std::string(t.save_checkpoint(1));
  }
  // A copy of the good checkpoint, changed by `change` on rank 0.
  template <class Change>
  std::string corrupted(const std::string& name, Change&& change) {
    const std::string copy = *dir_ + "/" + name;
    if (world().rank() == 0) {
      fs::remove_all(copy);
      fs::copy(*good_, copy);
      change(fs::path(copy));
    }
    world().barrier()->wait();
    return copy;
  }
  void expect_load_error(const std::string& path, const std::string& needle,
                         std::vector<std::string> extra = {}) {
    const Config config = test_config(*dir_, extra);
    ShardedTrainer t(config, data(), world(), make_model(config));
    try {
      t.load_checkpoint(path);
      ADD_FAILURE() << "loading " << path << " should fail with '" << needle << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    world().barrier()->wait();
  }
  static std::string* dir_;
  static std::string* good_;
};
std::string* CorruptCheckpoint::dir_ = nullptr;
std::string* CorruptCheckpoint::good_ = nullptr;

TEST_F(CorruptCheckpoint, TruncatedShard) {
  const auto p = corrupted("truncated", [](const fs::path& d) {
    fs::resize_file(d / "master.rank-00000.bin", fs::file_size(d / "master.rank-00000.bin") - 4);
  });
  expect_load_error(p, "master.rank-00000.bin' has the wrong size");
}

TEST_F(CorruptCheckpoint, FlippedByte) {
  const auto p = corrupted("flipped", [](const fs::path& d) {
    std::fstream f(d / "exp_avg.rank-00000.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(100);
    f.write(&c, 1);
  });
  expect_load_error(p, "exp_avg.rank-00000.bin' fails its xxh64 checksum");
}

TEST_F(CorruptCheckpoint, MissingRankFile) {
  const int last = world().size() - 1;
  const auto p = corrupted("missing", [&](const fs::path& d) {
    fs::remove(d / fmt::format("exp_avg_sq.rank-{:05}.bin", last));
  });
  expect_load_error(p, fmt::format("exp_avg_sq.rank-{:05}.bin' is missing", last));
}

// A manifest edited by hand fails its own checksum.
TEST_F(CorruptCheckpoint, HandEditedManifest) {
  const auto p = corrupted("edited", [](const fs::path& d) {
    auto m = nlohmann::json::parse(read_text_file((d / "manifest.json").string()));
    m["meta"]["optimizer"]["steps_taken"] = 5;
    write_text_file((d / "manifest.json").string(), m.dump(1));
  });
  expect_load_error(p, "the manifest does not match its own checksum");
}

// Edits to a version-1 manifest (no checksum) are caught field by field.
void edit_v1_manifest(const fs::path& d, const std::function<void(nlohmann::json&)>& edit) {
  auto m = nlohmann::json::parse(read_text_file((d / "manifest.json").string()));
  m.erase("manifest_xxh64");
  m["version"] = 1;
  edit(m);
  write_text_file((d / "manifest.json").string(), m.dump(1));
}

TEST_F(CorruptCheckpoint, ManifestOffsetOutOfRange) {
  const auto p = corrupted("offsets", [](const fs::path& d) {
    edit_v1_manifest(d, [](auto& m) { m["params"][3]["flat_offset"] = 1000000000; });
  });
  expect_load_error(p, "params[3].flat_offset = 1000000000 must be an integer in [0, ");
}

TEST_F(CorruptCheckpoint, PositionDisagreesWithTheStep) {
  const auto p = corrupted("position", [](const fs::path& d) {
    edit_v1_manifest(d, [](auto& m) { m["meta"]["optimizer"]["steps_taken"] = 5; });
  });
  expect_load_error(p, "meta.optimizer.steps_taken = 5 disagrees with the manifest's step 1");
  const auto q = corrupted("data_position", [](const fs::path& d) {
    edit_v1_manifest(d, [](auto& m) { m["meta"]["data"]["next_sample"] = 3; });
  });
  expect_load_error(
      q, "meta.data.next_sample / global_batch = 0 disagrees with the manifest's step 1");
}

// A non-finite value in a saved state is named when loaded, not left to become a NaN loss.
TEST_F(CorruptCheckpoint, NonFiniteState) {
  const std::string dir = shared_dir("nan");
  const Config config = test_config(dir);
  ShardedTrainer t(config, data(), world(), make_model(config));
  t.step(0);
  if (world().rank() == world().size() - 1)
    t.fsdp().spans().back().master.data<float>()[0] = std::numeric_limits<float>::infinity();
  const std::string path = t.save_checkpoint(1);
  expect_load_error(path, "holds a non-finite value (inf)");
}

TEST_F(CorruptCheckpoint, UnfinishedCheckpoint) {
  const auto p = corrupted("unfinished", [](const fs::path& d) { fs::remove(d / "COMPLETE"); });
  expect_load_error(p, "has no COMPLETE marker");
}

TEST_F(CorruptCheckpoint, DifferentModel) {
  expect_load_error(*good_, "was saved with model.n_embd = 64, this run has 32",
                    {"model.n_embd=32"});
}

TEST_F(CorruptCheckpoint, KeepsTheNewestCheckpoints) {
  const std::string dir = shared_dir("keep");
  const Config config = test_config(dir, {"checkpoint.keep=2"});
  ShardedTrainer t(config, data(), world(), make_model(config));
  for (int64_t s = 1; s <= 3; ++s) t.save_checkpoint(s);
  if (world().rank() == 0) {
    EXPECT_FALSE(fs::exists(dir + "/step-00000001"));
    EXPECT_TRUE(fs::exists(dir + "/step-00000002/COMPLETE"));
    EXPECT_TRUE(fs::exists(dir + "/step-00000003/COMPLETE"));
  }
  EXPECT_EQ(latest_checkpoint(dir), dir + "/step-00000003");
}

}  // namespace
}  // namespace st

namespace st {
namespace {

// The safetensors file read back by code that shares nothing with the writer: the header's
// length, JSON, dtypes, shapes and packed offsets, and the bytes of every tensor. A padded
// vocabulary exports its real rows only and loads back with zero padding.
void check_export(const std::string& name, const std::vector<std::string>& extra,
                  int64_t wte_rows_inside) {
  const std::string dir = shared_dir(name);
  const Config config = test_config(dir, extra);
  ShardedTrainer t(config, data(), world(), make_model(config));
  t.step(0);
  const std::string file = dir + "/model.safetensors";
  save_safetensors(file, t.fsdp(), DType::f32, {{"format", "pt"}});
  const auto masters = all_masters(t);
  const auto& specs = t.model().param_specs();
  ASSERT_EQ(specs[0].shape[0], wte_rows_inside);

  // Independent reading.
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  const auto header = nlohmann::json::parse(text);
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ((8 + n) % 8, 0u) << "data should start 8-byte aligned";
  EXPECT_EQ(header.size(), specs.size() + 1) << "one entry per parameter, lm_head tied";
  uint64_t expected_begin = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& e = header.at(specs[i].name);
    EXPECT_EQ(e["dtype"], "F32");
    EXPECT_EQ(e["shape"].get<Shape>(), specs[i].real_shape()) << specs[i].name;
    const auto off = e["data_offsets"].get<std::vector<uint64_t>>();
    EXPECT_EQ(off[0], expected_begin) << specs[i].name;
    EXPECT_EQ(off[1] - off[0], uint64_t(specs[i].real_numel()) * 4) << specs[i].name;
    expected_begin = off[1];
    std::vector<float> values(size_t(specs[i].real_numel()));
    in.seekg(std::streamoff(8 + n + off[0]));
    in.read(reinterpret_cast<char*>(values.data()), std::streamsize(off[1] - off[0]));
    EXPECT_EQ(std::memcmp(values.data(), masters[i].raw(), values.size() * 4), 0) << specs[i].name;
  }
  EXPECT_EQ(fs::file_size(file), 8 + n + expected_begin);

  // Round trip: a fresh model initialized from the file holds the same masters, bitwise (the
  // padding rows zero in both).
  std::vector<std::string> again_extra = extra;
  again_extra.push_back("training.init_from=" + file);
  again_extra.push_back("training.seed=99");
  const Config again_config = test_config(dir, again_extra);
  ShardedTrainer again(again_config, data(), world(), make_model(again_config));
  const auto loaded = all_masters(again);
  for (size_t i = 0; i < loaded.size(); ++i)
    EXPECT_EQ(std::memcmp(loaded[i].raw(), masters[i].raw(), masters[i].nbytes()), 0)
        << specs[i].name;
}

TEST(Safetensors, ExportIsReadableAndRoundTripsBitwiseInFp32) {
  check_export("export", {}, 256);
}

TEST(Safetensors, PaddedVocabularyExportsItsRealRows) {
  check_export("export-padded", {"model.vocab_size=300"}, 384);  // [300, C] in the file
}

TEST(Safetensors, WrongShapeIsAnErrorNamingTheTensor) {
  const std::string dir = shared_dir("export-shape");
  const Config config = test_config(dir);
  ShardedTrainer t(config, data(), world(), make_model(config));
  const std::string file = dir + "/model.safetensors";
  save_safetensors(file, t.fsdp(), DType::bf16, {});
  try {
    const Config narrow = test_config(dir, {"model.n_embd=32", "training.init_from=" + file});
    ShardedTrainer other(narrow, data(), world(), make_model(narrow));
    ADD_FAILURE() << "a model of another width loaded the file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'transformer.wte.weight' has shape [256, 64] but "
                                         "the model needs [256, 32]"),
              std::string::npos)
        << e.what();
  }
}

// A file is trusted only when it describes this model exactly: tensors the model does not have
// (a 2-layer file loaded into 1 layer), overlapping byte ranges and bytes after the last tensor
// are errors naming them.
TEST(Safetensors, ExtraTensorsAndOverlapsAreErrorsNamingThem) {
  const std::string dir = shared_dir("export-extra");
  const Config config = test_config(dir);
  ShardedTrainer t(config, data(), world(), make_model(config));
  const std::string file = dir + "/model.safetensors";
  save_safetensors(file, t.fsdp(), DType::f32, {});
  auto load_error = [&](const std::string& path, std::vector<std::string> extra) {
    extra.push_back("training.init_from=" + path);
    try {
      const Config other_config = test_config(dir, extra);
      ShardedTrainer other(other_config, data(), world(), make_model(other_config));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(load_error(file, {"model.n_layer=1"})
                .find("holds tensor 'transformer.h.1.attn.c_attn.bias', which this model does not "
                      "have"),
            std::string::npos);
  // wpe's bytes moved onto wte's: same lengths and bounds, overlapping ranges.
  const std::string overlapped = dir + "/overlap.safetensors";
  if (world().rank() == 0) {
    std::string bytes = read_text_file(file);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    auto header = nlohmann::json::parse(bytes.substr(8, n));
    const auto wte = header["transformer.wte.weight"]["data_offsets"];
    const auto wpe = header["transformer.wpe.weight"]["data_offsets"];
    const int64_t wpe_bytes = wpe[1].get<int64_t>() - wpe[0].get<int64_t>();
    header["transformer.wpe.weight"]["data_offsets"] = {wte[0], wte[0].get<int64_t>() + wpe_bytes};
    std::string text = header.dump();
    ASSERT_LE(text.size(), n);
    text.append(n - text.size(), ' ');
    write_text_file(overlapped, bytes.substr(0, 8) + text + bytes.substr(8 + n));
  }
  // Eight bytes appended after the last tensor: the buffer is no longer wholly indexed.
  const std::string appended = dir + "/appended.safetensors";
  if (world().rank() == 0) write_text_file(appended, read_text_file(file) + std::string(8, '\0'));
  world().barrier()->wait();
  EXPECT_NE(load_error(overlapped, {}).find("overlap in the file"), std::string::npos);
  const std::string message = load_error(appended, {});
  EXPECT_NE(message.find("has 8 bytes after its last tensor"), std::string::npos) << message;
}

}  // namespace
}  // namespace st
