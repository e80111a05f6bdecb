// Pipeline stages as runs of blocks (parallel/pipeline/stage_partition.hpp): the balanced split
// is the best one, checked against every split of small models (brute force) and by hand; the
// user's split is refused by key when it does not fit the model.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "parallel/pipeline/stage_partition.hpp"

namespace st {
namespace {

TEST(StagePartition, ByHand) {
  // Eight equal blocks on four stages: two each.
  const std::vector<double> equal(8, 1.0);
  EXPECT_EQ(describe_stages(balance_stages(equal, 0, 0, 4)), "[0-2) [2-4) [4-6) [6-8)");
  // The head costs two blocks' worth: the last stage takes one block (1 + 2 = 3) and the first
  // three share seven, at most 3 each: 2, 2, 3 (not 3, 3, 1: less even; the earlier stages,
  // which hold more micro-batches in flight, the smaller).
  const std::vector<StageRange> headed = balance_stages(equal, 0, 2, 4);
  EXPECT_EQ(describe_stages(headed), "[0-2) [2-4) [4-7) [7-8)");
  EXPECT_DOUBLE_EQ(largest_stage_cost(headed, equal, 0, 2), 3);
  // One stage takes everything, its extras too.
  EXPECT_EQ(describe_stages(balance_stages(equal, 5, 7, 1)), "[0-8)");
  EXPECT_DOUBLE_EQ(largest_stage_cost(balance_stages(equal, 5, 7, 1), equal, 5, 7), 20);
}

double sum_of_squares(const std::vector<StageRange>& split, const std::vector<double>& cost,
                      double first, double last) {
  double sum = 0;
  for (size_t s = 0; s < split.size(); ++s) {
    double c = (s == 0 ? first : 0) + (s + 1 == split.size() ? last : 0);
    for (int b = split[s].first; b < split[s].end; ++b) c += cost[size_t(b)];
    sum += c * c;
  }
  return sum;
}

// Every way to cut L blocks into S non-empty runs: the smallest largest cost, and the smallest
// sum of squared stage costs among the splits with it.
std::pair<double, double> brute_force(const std::vector<double>& cost, double first, double last,
                                      int stages) {
  const int L = int(cost.size());
  std::pair<double, double> best{1e300, 1e300};
  std::vector<StageRange> split;
  std::function<void(int, int)> place = [&](int stage, int from) {
    if (stage == stages - 1) {
      split.push_back({from, L});
      best = std::min(best, std::pair{largest_stage_cost(split, cost, first, last),
                                      sum_of_squares(split, cost, first, last)});
      split.pop_back();
      return;
    }
    for (int end = from + 1; end <= L - (stages - 1 - stage); ++end) {
      split.push_back({from, end});
      place(stage + 1, end);
      split.pop_back();
    }
  };
  place(0, 0);
  return best;
}

TEST(StagePartition, TheBalancedSplitIsTheBestOfAll) {
  for (int L = 1; L <= 9; ++L)
    for (int S = 1; S <= L; ++S)
      for (int seed = 0; seed < 4; ++seed) {
        std::vector<double> cost;
        for (int b = 0; b < L; ++b) cost.push_back(1 + (b * 7 + seed * 3) % 5);
        const double first = seed % 2 ? 3 : 0, last = seed >= 2 ? 4 : 0;
        const std::vector<StageRange> split = balance_stages(cost, first, last, S);
        ASSERT_EQ(int(split.size()), S);
        EXPECT_EQ(split.front().first, 0);
        EXPECT_EQ(split.back().end, L);
        for (size_t s = 0; s < split.size(); ++s) {
          EXPECT_GE(split[s].count(), 1);
          if (s > 0) {
            EXPECT_EQ(split[s].first, split[s - 1].end);
          }
        }
        const auto [largest, squares] = brute_force(cost, first, last, S);
        EXPECT_DOUBLE_EQ(largest_stage_cost(split, cost, first, last), largest)
            << "L " << L << " S " << S << " seed " << seed;
        EXPECT_DOUBLE_EQ(sum_of_squares(split, cost, first, last), squares)
            << "L " << L << " S " << S << " seed " << seed;
      }
}

TEST(StagePartition, SplitsThatDoNotFitAreRefusedByKey) {
  auto refused = [](const std::function<void()>& f, const std::string& message) {
    try {
      f();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted: " << message;
  };
  refused([] { balance_stages(std::vector<double>(3, 1.0), 0, 0, 4); },
          "4 stages for model.n_layer = 3 blocks");
  refused([] { stages_from_layers({2, 2}, 6, 3); }, "parallel.pp_layers has 2 entries");
  refused([] { stages_from_layers({2, 2, 1}, 6, 3); }, "sums to 5, not model.n_layer = 6");
  refused([] { stages_from_layers({4, 4, 1}, 6, 3); }, "sums past model.n_layer = 6");
  refused([] { stages_from_layers({3, 0, 3}, 6, 3); }, "parallel.pp_layers[1] = 0");
  EXPECT_EQ(describe_stages(stages_from_layers({1, 3, 2}, 6, 3)), "[0-1) [1-4) [4-6)");
}

}  // namespace
}  // namespace st
