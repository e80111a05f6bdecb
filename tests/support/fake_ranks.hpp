#pragma once
// on_ranks(n, fn): n in-process ranks of the fake process group, each a thread running fn(group).
#include <thread>
#include <vector>

#include "collectives/fake_process_group.hpp"

namespace st {

template <class Fn>
void on_ranks(int n, Fn&& fn) {
  auto groups = FakeProcessGroup::create(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(*groups[size_t(r)]); });
  for (auto& t : threads) t.join();
}

}  // namespace st
