#include "stoc/client/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

StocLoad Load(uint32_t queue_depth, uint64_t pending_bytes = 0) {
  StocLoad load;
  load.queue_depth = queue_depth;
  load.pending_bytes = pending_bytes;
  load.updated = MonoNow();
  return load;
}

// Runs ChooseStocs `trials` times and counts how often each StoC is chosen, checking
// every answer has rho distinct candidates.
std::map<uint32_t, int> CountChoices(lsm::PlacementPolicy policy,
                                     const std::vector<uint32_t>& candidates, const LoadView& loads,
                                     int rho, int d, int trials, std::mt19937_64* rng) {
  std::map<uint32_t, int> counts;
  std::vector<uint32_t> out;
  for (int t = 0; t < trials; ++t) {
    Status s = ChooseStocs(policy, candidates, loads, rho, d, rng, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(static_cast<size_t>(rho), out.size());
    EXPECT_EQ(out.size(), std::set<uint32_t>(out.begin(), out.end()).size());
    for (uint32_t id : out) ++counts[id];
  }
  return counts;
}

TEST(PlacementTest, ParsePolicy) {
  lsm::PlacementPolicy policy = lsm::PlacementPolicy::kRandom;
  ASSERT_TRUE(lsm::ParsePlacementPolicy("power-of-d", &policy).ok());
  EXPECT_EQ(lsm::PlacementPolicy::kPowerOfD, policy);
  ASSERT_TRUE(lsm::ParsePlacementPolicy("random", &policy).ok());
  EXPECT_EQ(lsm::PlacementPolicy::kRandom, policy);
  for (const char* bad : {"", "Random", "power_of_d", "power-of-2", "random "}) {
    Status s = lsm::ParsePlacementPolicy(bad, &policy);
    EXPECT_EQ(Status::Code::kInvalidArgument, s.code()) << bad;
    EXPECT_EQ(lsm::PlacementPolicy::kRandom, policy) << "unchanged on error";
  }
  for (lsm::PlacementPolicy p : {lsm::PlacementPolicy::kRandom, lsm::PlacementPolicy::kPowerOfD}) {
    lsm::PlacementPolicy parsed = lsm::PlacementPolicy::kRandom;
    ASSERT_TRUE(lsm::ParsePlacementPolicy(lsm::PlacementPolicyName(p), &parsed).ok());
    EXPECT_EQ(p, parsed);
  }
}

TEST(PlacementTest, Errors) {
  LoadView loads;
  std::mt19937_64 rng(1);
  std::vector<uint32_t> out;
  const std::vector<uint32_t> three = {7, 8, 9};
  for (lsm::PlacementPolicy p : {lsm::PlacementPolicy::kRandom, lsm::PlacementPolicy::kPowerOfD}) {
    SCOPED_TRACE(lsm::PlacementPolicyName(p));
    auto code = [&](const std::vector<uint32_t>& c, int rho, int d, std::mt19937_64* r,
                    std::vector<uint32_t>* o) {
      return ChooseStocs(p, c, loads, rho, d, r, o).code();
    };
    const auto kInvalid = Status::Code::kInvalidArgument;
    EXPECT_EQ(kInvalid, code(three, 0, 0, &rng, &out));
    EXPECT_EQ(kInvalid, code(three, -1, 0, &rng, &out));
    EXPECT_EQ(kInvalid, code(three, 4, 0, &rng, &out));
    EXPECT_EQ(kInvalid, code({}, 1, 0, &rng, &out));
    EXPECT_EQ(kInvalid, code({5, 5, 6}, 3, 0, &rng, &out)) << "duplicates count once";
    EXPECT_EQ(kInvalid, code(three, 2, -1, &rng, &out));
    EXPECT_EQ(kInvalid, code(three, 1, 0, nullptr, &out));
    EXPECT_EQ(kInvalid, code(three, 1, 0, &rng, nullptr));
    // The boundaries that are fine: all candidates; d larger than the candidate set.
    EXPECT_EQ(Status::Code::kOk, code(three, 3, 0, &rng, &out));
    EXPECT_EQ(Status::Code::kOk, code(three, 2, 100, &rng, &out));
    EXPECT_EQ(Status::Code::kOk, code({5, 5, 6}, 2, 0, &rng, &out));
  }
  // d below rho cannot yield rho StoCs.
  EXPECT_EQ(Status::Code::kInvalidArgument,
            ChooseStocs(lsm::PlacementPolicy::kPowerOfD, three, loads, 2, 1, &rng, &out).code());
}

TEST(PlacementTest, ChoicesAreDistinctCandidates) {
  std::mt19937_64 rng(nova::test::TestSeed("PlacementTest.ChoicesAreDistinctCandidates"));
  LoadView loads;
  for (uint32_t id = 0; id < 64; ++id) loads.Update(id, Load(rng() % 4, rng() % 1000));
  std::vector<uint32_t> out;
  for (int trial = 0; trial < 2000; ++trial) {
    // Up to 20 entries drawn from 24 ids, so some repeat.
    std::vector<uint32_t> candidates(1 + rng() % 20);
    for (auto& id : candidates) id = static_cast<uint32_t>(rng() % 24);
    const std::set<uint32_t> distinct(candidates.begin(), candidates.end());
    const int rho = 1 + static_cast<int>(rng() % distinct.size());
    const int d = (rng() % 2 == 0) ? 0 : rho + static_cast<int>(rng() % 8);
    const lsm::PlacementPolicy policy =
        (rng() % 2 == 0) ? lsm::PlacementPolicy::kRandom : lsm::PlacementPolicy::kPowerOfD;
    out = {99999};  // replaced, not appended to
    Status s = ChooseStocs(policy, candidates, loads, rho, d, &rng, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(static_cast<size_t>(rho), out.size());
    EXPECT_EQ(out.size(), std::set<uint32_t>(out.begin(), out.end()).size());
    for (uint32_t id : out) EXPECT_EQ(1u, distinct.count(id));
  }
}

TEST(PlacementTest, SameSeedSameChoices) {
  const uint64_t seed = nova::test::TestSeed("PlacementTest.SameSeedSameChoices");
  LoadView loads;
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5, 6, 7, 8};
  for (lsm::PlacementPolicy p : {lsm::PlacementPolicy::kRandom, lsm::PlacementPolicy::kPowerOfD}) {
    std::mt19937_64 a(seed);
    std::mt19937_64 b(seed);
    std::vector<uint32_t> out_a;
    std::vector<uint32_t> out_b;
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(ChooseStocs(p, candidates, loads, 3, 0, &a, &out_a).ok());
      ASSERT_TRUE(ChooseStocs(p, candidates, loads, 3, 0, &b, &out_b).ok());
      EXPECT_EQ(out_a, out_b);
    }
  }
}

TEST(PlacementTest, PowerOfDNeverPicksTheLoadedStocWhenAllAreSampled) {
  std::mt19937_64 rng(
      nova::test::TestSeed("PlacementTest.PowerOfDNeverPicksTheLoadedStocWhenAllAreSampled"));
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5, 6};
  LoadView loads;
  for (uint32_t id : candidates) loads.Update(id, Load(id == 4 ? 100 : 0));
  auto counts = CountChoices(lsm::PlacementPolicy::kPowerOfD, candidates, loads, /*rho=*/3, /*d=*/6,
                             3000, &rng);
  EXPECT_EQ(0, counts[4]);
  // The other five share the 9000 slots; ties are broken by the random sample order.
  for (uint32_t id : {1u, 2u, 3u, 5u, 6u}) EXPECT_GT(counts[id], 1500) << id;
}

TEST(PlacementTest, PowerOfTwoChoicesAvoidsLoad) {
  std::mt19937_64 rng(nova::test::TestSeed("PlacementTest.PowerOfTwoChoicesAvoidsLoad"));
  constexpr int kTrials = 6000;
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5, 6};
  {
    LoadView loads;
    for (uint32_t id : candidates) loads.Update(id, Load(id == 4 ? 100 : 0));
    auto power =
        CountChoices(lsm::PlacementPolicy::kPowerOfD, candidates, loads, 1, 2, kTrials, &rng);
    auto random =
        CountChoices(lsm::PlacementPolicy::kRandom, candidates, loads, 1, 0, kTrials, &rng);
    const int uniform_share = kTrials / static_cast<int>(candidates.size());
    EXPECT_GT(random[4], uniform_share / 2);
    EXPECT_LT(power[4], uniform_share / 10);
  }
  {
    // Queue depth = id: with two distinct samples the least loaded of the pair wins, so
    // StoC k is chosen with probability (6 - k) / 15: 2000, 1600, 1200, 800, 400, 0.
    LoadView loads;
    for (uint32_t id : candidates) loads.Update(id, Load(id));
    auto power =
        CountChoices(lsm::PlacementPolicy::kPowerOfD, candidates, loads, 1, 2, kTrials, &rng);
    for (uint32_t id = 1; id < 6; ++id) {
      EXPECT_GT(power[id], power[id + 1]) << id;
      const double p = (6.0 - id) / 15.0;
      const double expected = kTrials * p;
      const double sd = std::sqrt(kTrials * p * (1 - p));
      EXPECT_NEAR(expected, power[id], 6 * sd) << id;
    }
    EXPECT_EQ(0, power[6]);
  }
}

TEST(PlacementTest, PendingBytesBreakQueueTies) {
  std::mt19937_64 rng(nova::test::TestSeed("PlacementTest.PendingBytesBreakQueueTies"));
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5};
  LoadView loads;
  for (uint32_t id : candidates) loads.Update(id, Load(2, id == 3 ? (1ull << 30) : 100));
  loads.Update(5, Load(1, 1ull << 40));  // a shorter queue beats fewer bytes
  std::vector<uint32_t> out;
  for (int t = 0; t < 500; ++t) {
    ASSERT_TRUE(
        ChooseStocs(lsm::PlacementPolicy::kPowerOfD, candidates, loads, 4, 5, &rng, &out).ok());
    EXPECT_EQ(5u, out[0]) << "least loaded first";
    EXPECT_EQ(out.end(), std::find(out.begin(), out.end(), 3u));
  }
}

TEST(PlacementTest, StaleLoadsAreUnknown) {
  std::mt19937_64 rng(nova::test::TestSeed("PlacementTest.StaleLoadsAreUnknown"));
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5, 6};
  LoadView loads(std::chrono::seconds(1));
  StocLoad old = Load(100, 1 << 20);
  old.updated = MonoNow() - std::chrono::seconds(10);
  loads.Update(4, old);
  EXPECT_EQ(0u, loads.Get(4).queue_depth);
  EXPECT_EQ(0u, loads.Get(4).pending_bytes);
  // Idle like the rest, so it is in the least-loaded half about half the time.
  auto counts =
      CountChoices(lsm::PlacementPolicy::kPowerOfD, candidates, loads, 3, 6, 2000, &rng);
  EXPECT_GT(counts[4], 700);
}

TEST(PlacementTest, LoadViewKeepsTheNewestReport) {
  LoadView loads;
  EXPECT_EQ(0u, loads.Get(9).queue_depth) << "never reported";
  const MonoTime now = MonoNow();
  StocLoad newer{7, 700, now};
  StocLoad older{3, 300, now - std::chrono::milliseconds(10)};
  loads.Update(9, newer);
  loads.Update(9, older);  // arrived late: ignored
  EXPECT_EQ(7u, loads.Get(9).queue_depth);
  EXPECT_EQ(700u, loads.Get(9).pending_bytes);
  StocLoad newest{1, 100, now + std::chrono::milliseconds(1)};
  loads.Update(9, newest);
  EXPECT_EQ(1u, loads.Get(9).queue_depth);
  loads.Remove(9);
  EXPECT_EQ(0u, loads.Get(9).queue_depth);
}

TEST(PlacementTest, RandomIsRoughlyUniform) {
  std::mt19937_64 rng(nova::test::TestSeed("PlacementTest.RandomIsRoughlyUniform"));
  constexpr int kTrials = 40000;
  constexpr int kRho = 2;
  const std::vector<uint32_t> candidates = {10, 11, 12, 13, 14, 15, 16, 17};
  LoadView loads;
  loads.Update(10, Load(1000));  // random ignores load
  auto counts =
      CountChoices(lsm::PlacementPolicy::kRandom, candidates, loads, kRho, 0, kTrials, &rng);
  const double expected = static_cast<double>(kTrials) * kRho / candidates.size();  // 10000
  ASSERT_EQ(candidates.size(), counts.size());
  // sd is about 90; 5% is over 5 sd.
  for (auto [id, n] : counts) EXPECT_NEAR(expected, n, expected * 0.05) << id;
}

TEST(PlacementTest, ConcurrentUpdatesAndChoices) {
  LoadView loads;
  const std::vector<uint32_t> candidates = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        loads.Update(candidates[(i + t) % candidates.size()], Load(i % 17, i));
      }
    });
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint32_t> out;
      for (int i = 0; i < 5000; ++i) {
        ASSERT_TRUE(
            ChooseStocs(lsm::PlacementPolicy::kPowerOfD, candidates, loads, 3, 0, &rng, &out).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace nova::stoc
