#pragma once
// Point-to-point checks any ProcessGroup must pass (the MPI backend at 2-4 ranks, the
// in-process one at 3): run on every rank of the group. Each message's values follow from
// (sender, message, index), so every receive is compared exactly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/process_group.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace st::p2p_checks {

inline float message_value(int from, int message, int64_t i) {
  return float((from * 13 + message * 7 + i) % 89);  // exact in BF16
}

inline Tensor message(int from, int message, int64_t n, DType dtype) {
  Tensor t = Tensor::empty(fmt::format("m{}from{}", message, from), {n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    const float v = message_value(from, message, i);
    if (dtype == DType::f32)
      t.data<float>()[i] = v;
    else
      t.data<bf16>()[i] = f32_to_bf16(v);
  }
  return t;
}

// How many elements of `t` differ from message (from, message).
inline int64_t wrong_values(const Tensor& t, int from, int message) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float got = t.dtype() == DType::f32 ? t.data<float>()[i] : bf16_to_f32(t.data<bf16>()[i]);
    wrong += got != message_value(from, message, i);
  }
  return wrong;
}

// Every rank sends to the next and receives from the previous, sends posted first: blocking
// sends of rendezvous size would deadlock. Sizes 0 to past MPI's eager limit; FP32 and BF16.
inline void ring_exchange(ProcessGroup& g) {
  const int r = g.rank(), n = g.size();
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  int message_id = 0, compared = 0;
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(1000), int64_t(300007)}) {
      ++message_id;
      Tensor out = message(r, message_id, count, dtype);
      Tensor in = Tensor::zeros("in", {count}, dtype);
      auto sent = g.send(out, next, {.tag = message_id});
      auto received = g.recv(in, previous, {.tag = message_id});
      sent->wait();
      received->wait();
      EXPECT_EQ(wrong_values(in, previous, message_id), 0)
          << dtype_name(dtype) << " x " << count << " on rank " << r;
      ++compared;
    }
  EXPECT_EQ(compared, 8);
}

// Between ranks 0 and 1 (the others look on): messages of one tag arrive in the order they
// were sent; a recv posted for a later tag first takes that tag's message; recvs posted before
// their messages are filled; many may be outstanding in both directions at once.
inline void ordering_and_tags(ProcessGroup& g) {
  const int r = g.rank();
  if (r > 1) {
    g.barrier()->wait();
    return;
  }
  const int peer = 1 - r;
  const int64_t n = 5000;
  // Both ranks post 4 recvs before any send: tags 1, 2, 1, 2 in that order.
  std::vector<Tensor> in;
  std::vector<std::shared_ptr<Work>> recvs;
  const int tags[4] = {2, 1, 2, 1};
  for (int k = 0; k < 4; ++k) {
    in.push_back(Tensor::zeros(fmt::format("in{}", k), {n}, DType::f32));
    recvs.push_back(g.recv(in.back(), peer, {.tag = tags[k]}));
  }
  g.barrier()->wait();  // every recv is posted before the first send
  // Sent: message 10 (tag 1), 11 (tag 1), 12 (tag 2), 13 (tag 2).
  std::vector<Tensor> out;
  std::vector<std::shared_ptr<Work>> sends;
  const int sent_tags[4] = {1, 1, 2, 2};
  for (int k = 0; k < 4; ++k) {
    out.push_back(message(r, 10 + k, n, DType::f32));
    sends.push_back(g.send(out.back(), peer, {.tag = sent_tags[k]}));
  }
  for (auto& w : sends) w->wait();
  for (auto& w : recvs) w->wait();
  // Tag 2's recvs (posted 1st and 3rd) hold messages 12 and 13; tag 1's (2nd, 4th) 10 and 11.
  EXPECT_EQ(wrong_values(in[0], peer, 12), 0);
  EXPECT_EQ(wrong_values(in[1], peer, 10), 0);
  EXPECT_EQ(wrong_values(in[2], peer, 13), 0);
  EXPECT_EQ(wrong_values(in[3], peer, 11), 0);
}

// A recv of another size fails naming the sizes; a bad peer or tag is refused before anything
// moves.
inline void refusals(ProcessGroup& g) {
  const int r = g.rank();
  Tensor small = message(r, 1, 2, DType::f32);
  EXPECT_THROW(g.send(small, r), Error);
  EXPECT_THROW(g.recv(small, g.size()), Error);
  EXPECT_THROW(g.send(small, -1), Error);
  if (g.size() > 1) {
    EXPECT_THROW(g.send(small, (r + 1) % g.size(), {.tag = kMaxTag + 1}), Error);
  }
  if (r > 1) return;
  if (r == 0) {
    g.send(small, 1, {.tag = 9})->wait();  // 8 bytes
    return;
  }
  Tensor larger = Tensor::zeros("larger", {4}, DType::f32);
  try {
    g.recv(larger, 0, {.tag = 9})->wait();
    ADD_FAILURE() << "a recv of 16 bytes took a message of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the message sent is 8 bytes"), std::string::npos)
        << e.what();
  }
}

}  // namespace st::p2p_checks
