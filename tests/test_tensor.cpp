#include <gtest/gtest.h>

#include <cstdint>

#include "core/memory_stats.hpp"
#include "core/tensor.hpp"

namespace st {
namespace {

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::empty("t", {n}, DType::bf16);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  }
}

TEST(Tensor, MetaTensorHasNoDataAndSaysWhich) {
  Tensor t = Tensor::empty("transformer.wte.weight", {256, 64}, DType::f32, Device::meta);
  EXPECT_EQ(t.numel(), 256 * 64);
  EXPECT_TRUE(t.is_meta());
  try {
    t.data<float>();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.wte.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("meta"), std::string::npos);
  }
}

TEST(Tensor, MetaTensorsAllocateNothing) {
  const auto before = tensor_memory().current_bytes;
  Tensor t = Tensor::empty("huge", {1 << 20, 1 << 12}, DType::f32, Device::meta);  // 16 GiB
  EXPECT_EQ(tensor_memory().current_bytes, before);
}

TEST(Tensor, WrongDtypeAccessNamesTensor) {
  Tensor t = Tensor::zeros("h.0.ln_1.weight", {4}, DType::bf16);
  try {
    t.data<float>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'h.0.ln_1.weight' holds bf16"), std::string::npos)
        << e.what();
  }
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::zeros("t", {4, 3}, DType::f32);
  Tensor rows = t.slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  rows.data<float>()[0] = 5.f;
  EXPECT_EQ(t.data<float>()[3], 5.f);
  Tensor flat = t.view({12});
  EXPECT_EQ(flat.data<float>()[3], 5.f);
  EXPECT_THROW(t.view({5}), Error);
  EXPECT_THROW(t.slice(2, 5), Error);
}

TEST(Tensor, MemoryStatisticsTrackAllocations) {
  const auto before = tensor_memory().current_bytes;
  {
    Tensor t = Tensor::empty("t", {1000}, DType::f32);
    EXPECT_EQ(tensor_memory().current_bytes, before + 4000);
  }
  EXPECT_EQ(tensor_memory().current_bytes, before);
}

}  // namespace
TEST(Tensor, ElementSizesMatchTheCTypes) {
  EXPECT_EQ(dtype_size(DType::f32), sizeof(float));
  EXPECT_EQ(dtype_size(DType::bf16), sizeof(uint16_t));
  EXPECT_EQ(dtype_size(DType::i32), sizeof(int32_t));
  EXPECT_EQ(dtype_size(DType::f64), sizeof(double));
  EXPECT_EQ(dtype_size(DType::i64), sizeof(int64_t));
  EXPECT_EQ(dtype_size(DType::u64), sizeof(uint64_t));
  EXPECT_EQ(dtype_size(DType::u8), sizeof(uint8_t));
  EXPECT_EQ(Tensor::zeros("d", {3}, DType::f64).nbytes(), 3 * sizeof(double));
}

TEST(Tensor, UnboundTensorAccessIsAnError) {
  Tensor unbound;
  EXPECT_THROW(unbound.data<float>(), Error);
}

// One allocation carved into tensors of several dtypes: they share it, sit where asked, and a
// piece that would run past the end is refused naming both tensors.
TEST(Tensor, CarveViewsIntoOneAllocation) {
  Tensor arena = Tensor::zeros("arena", {256}, DType::u8);
  Tensor a = arena.carve("a", {4, 4}, DType::f32, 0);
  Tensor b = arena.carve("b", {8}, DType::bf16, 64);
  a.data<float>()[15] = 1.5f;
  EXPECT_EQ(static_cast<char*>(b.raw()) - static_cast<char*>(a.raw()), 64);
  EXPECT_EQ(static_cast<float*>(arena.raw())[15], 1.5f);
  EXPECT_EQ(b.name(), "b");
  try {
    arena.carve("c", {64}, DType::f32, 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'c'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'arena' (256 bytes)"), std::string::npos);
  }
  Tensor meta = Tensor::empty("m", {1024}, DType::u8, Device::meta);
  EXPECT_TRUE(meta.carve("piece", {16}, DType::f32, 512).is_meta());
}

// Sizes are checked before anything is allocated: a shape whose element count or byte size
// overflows 64 bits, or an allocation the machine refuses, is an error naming the tensor.
TEST(Tensor, OverflowingOrImpossibleSizesNameTheTensor) {
  try {
    Tensor::empty("too_many", {int64_t(1) << 40, int64_t(1) << 40}, DType::f32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1099511627776, 1099511627776]"), std::string::npos);
  }
  try {
    Tensor::empty("too_big", {int64_t(1) << 62}, DType::f32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'too_big'"), std::string::npos) << e.what();
  }
  try {
    Tensor::empty("refused", {int64_t(1) << 50}, DType::f32);  // 4 PiB
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'refused'"), std::string::npos);
  }
}

}  // namespace st
