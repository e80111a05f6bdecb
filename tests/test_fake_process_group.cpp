// The in-process fake: three "ranks" as threads, checked against hand-computed values.
#include <gtest/gtest.h>

#include <thread>

#include "collectives/fake_process_group.hpp"
#include "core/bf16.hpp"

namespace st {
namespace {

template <class Fn>
void on_ranks(int n, Fn&& fn) {
  auto groups = FakeProcessGroup::create(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(*groups[size_t(r)]); });
  for (auto& t : threads) t.join();
}

TEST(FakeProcessGroup, CollectivesGiveHandComputedValues) {
  on_ranks(3, [](ProcessGroup& g) {
    const int r = g.rank();
    Tensor in = Tensor::empty("in", {2}, DType::bf16);
    in.data<bf16>()[0] = f32_to_bf16(float(r));
    in.data<bf16>()[1] = f32_to_bf16(float(10 + r));
    Tensor out = Tensor::empty("out", {6}, DType::bf16);
    EXPECT_TRUE(g.all_gather(in, out)->is_completed());
    const float gathered[6] = {0, 10, 1, 11, 2, 12};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(bf16_to_f32(out.data<bf16>()[i]), gathered[i]);

    Tensor grads = Tensor::empty("grads", {6}, DType::f32);
    for (int i = 0; i < 6; ++i) grads.data<float>()[i] = float(i * (r + 1));
    Tensor shard = Tensor::empty("shard", {2}, DType::f32);
    CollectiveOptions avg;
    avg.op = ReduceOp::avg;
    g.reduce_scatter(grads, shard, avg)->wait();
    // sum over r of i * (r + 1) = 6 i, averaged over 3 ranks = 2 i, for i in this rank's pair.
    EXPECT_EQ(shard.data<float>()[0], float(2 * (2 * r)));
    EXPECT_EQ(shard.data<float>()[1], float(2 * (2 * r + 1)));

    Tensor norm = Tensor::empty("norm", {1}, DType::f64);
    norm.data<double>()[0] = r + 0.5;
    g.all_reduce(norm)->wait();
    EXPECT_EQ(norm.data<double>()[0], 4.5);

    Tensor seed = Tensor::empty("seed", {1}, DType::i32);
    seed.data<int32_t>()[0] = r == 2 ? 77 : 0;
    g.broadcast(seed, 2)->wait();
    EXPECT_EQ(seed.data<int32_t>()[0], 77);
    g.barrier()->wait();
    EXPECT_THROW(g.all_gather(in, Tensor::empty("short", {5}, DType::bf16)), Error);
  });
}

}  // namespace
}  // namespace st
