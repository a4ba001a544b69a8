// DrangeRouter: keys are routed by the current layout and their Dranges locked once each, in
// index order; an install waits for the writers in the Dranges it replaces, retires them and
// publishes the new routing; a writer that routed by the old routing routes again; with
// writers and overlapping installs at once, a writer holding a live Drange always holds the
// current routing, and every routing is replaced exactly once.
#include "ltc/engine/drange_router.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

const leveldb::Comparator* Bytewise() { return leveldb::BytewiseComparator(); }

// Dranges starting at each of `lowers` (the first is the minimum bound), one Trange each.
std::shared_ptr<const DrangeLayout> Layout(const std::vector<std::string>& lowers,
                                           uint64_t generation) {
  std::vector<Drange> ds;
  for (size_t i = 0; i < lowers.size(); ++i) {
    Drange d;
    d.lower = i == 0 ? KeyBound::Min() : KeyBound::At(lowers[i]);
    d.tranges.emplace_back(d.lower);
    ds.push_back(std::move(d));
  }
  return std::make_shared<const DrangeLayout>(Bytewise(), generation, std::move(ds));
}

class DrangeRouterTest : public ::testing::Test {
 protected:
  DrangeRouterTest() : icmp_(Bytewise()) {}

  // A state per Drange of `layout`, each with a new memtable.
  std::vector<std::shared_ptr<DrangeState>> States(const DrangeLayout& layout) {
    std::vector<std::shared_ptr<DrangeState>> states;
    for (int d = 0; d < layout.size(); ++d) {
      states.push_back(
          std::make_shared<DrangeState>(std::make_shared<MemTable>(&icmp_, next_id_.fetch_add(1))));
    }
    return states;
  }

  // Installs `layout` with new states; returns the memtables the old Dranges had.
  std::vector<std::shared_ptr<MemTable>> InstallNew(DrangeRouter* router,
                                                    std::shared_ptr<const DrangeLayout> layout) {
    auto states = States(*layout);
    DrangeRouter::Install install(router);
    std::vector<std::shared_ptr<MemTable>> retired = install.RetireOld();
    install.Publish(std::move(layout), std::move(states));
    return retired;
  }

  lsm::InternalKeyComparator icmp_;
  std::atomic<uint64_t> next_id_{1};
};

TEST_F(DrangeRouterTest, TheFirstInstallHasNothingToReplace) {
  DrangeRouter router;
  EXPECT_EQ(router.Current(), nullptr);
  auto layout = Layout({"", "m"}, 1);
  auto states = States(*layout);
  {
    DrangeRouter::Install install(&router);
    EXPECT_TRUE(install.old_states().empty());
    EXPECT_TRUE(install.RetireOld().empty());
    install.Publish(layout, states);
  }
  const auto routing = router.Current();
  ASSERT_NE(routing, nullptr);
  EXPECT_EQ(routing->layout, layout);
  EXPECT_EQ(routing->states, states);
}

TEST_F(DrangeRouterTest, LockForWriteRoutesEachKeyAndLocksEachDrangeOnce) {
  DrangeRouter router;
  auto layout = Layout({"", "c", "f", "m"}, 1);
  InstallNew(&router, layout);
  const auto routing = router.Current();

  DrangeRouter::WriteRoute route;
  ASSERT_TRUE(router.LockForWrite({"d"}, &route));
  EXPECT_EQ(&route.routing(), routing.get());
  EXPECT_EQ(route.drange_of(0), 1u);
  ASSERT_EQ(route.dranges().size(), 1u);
  EXPECT_EQ(route.dranges()[0], 1u);
  EXPECT_EQ(route.state(1), routing->states[1].get());
  route.Unlock();

  // A batch over three Dranges, two keys in one of them.
  const std::vector<leveldb::Slice> keys = {"z", "a", "n", "b", "e"};
  ASSERT_TRUE(router.LockForWrite(keys, &route));
  const std::vector<uint32_t> expected = {3, 0, 3, 0, 1};
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(route.drange_of(i), expected[i]) << keys[i].ToString();
    EXPECT_EQ(static_cast<int>(route.drange_of(i)), layout->Find(keys[i]).first);
  }
  EXPECT_EQ(std::vector<uint32_t>(route.dranges().begin(), route.dranges().end()),
            (std::vector<uint32_t>{0, 1, 3}))
      << "ascending, each once";
  route.Unlock();
  // Routing counts the writes in their Tranges (the reorganizer's load figures).
  EXPECT_EQ(layout->Load().total, 1 + keys.size());

  // The same route object again (its buffers are reused), back to one key.
  ASSERT_TRUE(router.LockForWrite({"m"}, &route));
  EXPECT_EQ(route.drange_of(0), 3u);
  EXPECT_EQ(route.dranges().size(), 1u);
}

TEST_F(DrangeRouterTest, InstallRetiresTheOldDrangesAndPublishesTheNewOnes) {
  DrangeRouter router;
  InstallNew(&router, Layout({"", "m"}, 1));
  const auto before = router.Current();

  auto next = Layout({"", "f", "p"}, 2);
  auto states = States(*next);
  {
    DrangeRouter::Install install(&router);
    EXPECT_EQ(install.old_states(), before->states);
    const std::vector<std::shared_ptr<MemTable>> retired = install.RetireOld();
    ASSERT_EQ(retired.size(), 2u);
    for (size_t d = 0; d < retired.size(); ++d) {
      DrangeState* ds = before->states[d].get();
      ds->mu.AssertHeld();  // locked by `install`
      EXPECT_TRUE(ds->retired);
      EXPECT_EQ(retired[d], ds->active);
    }
    EXPECT_EQ(router.Current(), before) << "nothing published yet";
    install.Publish(next, states);
    EXPECT_EQ(router.Current()->layout, next);
  }
  // The old snapshot stays readable for whoever holds it; the new one takes the writes.
  EXPECT_EQ(before->states.size(), 2u);
  DrangeRouter::WriteRoute route;
  ASSERT_TRUE(router.LockForWrite({"g"}, &route));
  EXPECT_EQ(route.routing().layout, next);
  EXPECT_EQ(route.state(route.drange_of(0)), states[1].get());
}

TEST_F(DrangeRouterTest, AWriterThatRoutedByTheOldLayoutRoutesAgain) {
  DrangeRouter router;
  InstallNew(&router, Layout({"", "m"}, 1));
  auto next = Layout({"", "f", "p"}, 2);
  auto states = States(*next);

  std::shared_ptr<const DrangeLayout> routed_by;
  bool retired = true;
  int retries = 0;  // 1 if the writer routed by the old layout, else 0
  std::thread writer;
  {
    DrangeRouter::Install install(&router);  // holds every Drange: the writer waits
    writer = std::thread([&] {
      DrangeRouter::WriteRoute route;
      while (!router.LockForWrite({"q"}, &route)) ++retries;
      routed_by = route.routing().layout;
      DrangeState* ds = route.state(route.drange_of(0));
      ds->mu.AssertHeld();  // locked by `route`
      retired = ds->retired;
    });
    install.RetireOld();
    install.Publish(next, states);
  }
  writer.join();
  EXPECT_EQ(routed_by, next);
  EXPECT_FALSE(retired);
  EXPECT_LE(retries, 1);
}

TEST_F(DrangeRouterTest, AnInstallWaitsForTheWritersInItsDranges) {
  DrangeRouter router;
  InstallNew(&router, Layout({"", "m"}, 1));
  const auto before = router.Current();

  auto route = std::make_unique<DrangeRouter::WriteRoute>();
  ASSERT_TRUE(router.LockForWrite({"x"}, route.get()));
  std::atomic<bool> installed{false};
  std::thread installer([&] {
    InstallNew(&router, Layout({"", "f"}, 2));
    installed = true;
  });
  // Not a sleep the test depends on: the install must not get anywhere while the writer
  // holds its Drange, however long we look.
  EXPECT_FALSE(test::WaitFor([&] { return installed.load(); }, std::chrono::milliseconds(200)));
  EXPECT_EQ(router.Current(), before) << "published while a writer was in an old Drange";
  route.reset();  // the writer lets go
  EXPECT_TRUE(test::WaitFor([&] { return installed.load(); }));
  installer.join();
  EXPECT_NE(router.Current(), before);
}

// Writers lock random batches while two threads install new layouts over and over. A writer
// that holds a live Drange must hold the current routing (invariant 1); every routing must
// be replaced exactly once (overlapping installs each replace the routing they locked), so
// every memtable ever published is retired once, or is still active at the end.
TEST_F(DrangeRouterTest, WritersAndOverlappingInstalls) {
  const uint64_t seed = test::TestSeed("DrangeRouterTest.WritersAndOverlappingInstalls");
  DrangeRouter router;
  Mutex published_mu;
  std::set<uint64_t> published;  // memtable ids of every state ever published; published_mu
  auto install = [&](std::shared_ptr<const DrangeLayout> layout,
                     std::vector<uint64_t>* retired_ids) {
    auto states = States(*layout);
    for (const auto& ds : states) {
      MutexLock dl(&ds->mu);
      MutexLock lock(&published_mu);
      published.insert(ds->active->id());
    }
    DrangeRouter::Install in(&router);
    for (const auto& m : in.RetireOld()) retired_ids->push_back(m->id());
    in.Publish(std::move(layout), std::move(states));
  };
  std::vector<uint64_t> first_retired;
  install(Layout({"", "k"}, 0), &first_retired);
  ASSERT_TRUE(first_retired.empty());

  constexpr int kWriters = 3, kInstallers = 2, kInstallsEach = 150;
  std::atomic<int> installers_left{kInstallers};
  std::atomic<uint64_t> writes{0}, rerouted{0}, stale{0}, retired_held{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(seed + w);
      std::vector<std::string> storage;
      std::vector<leveldb::Slice> keys;
      DrangeRouter::WriteRoute route;
      while (installers_left.load() > 0) {
        storage.clear();
        const int n = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < n; ++i) storage.push_back(std::string(1, 'a' + rng() % 26));
        keys.assign(storage.begin(), storage.end());
        if (!router.LockForWrite(keys, &route)) {
          ++rerouted;
          continue;
        }
        if (router.Current().get() != &route.routing()) ++stale;
        for (uint32_t d : route.dranges()) {
          DrangeState* ds = route.state(d);
          ds->mu.AssertHeld();  // locked by `route`
          if (ds->retired) ++retired_held;
        }
        route.Unlock();
        ++writes;
      }
    });
  }
  std::vector<std::vector<uint64_t>> retired(kInstallers);
  for (int t = 0; t < kInstallers; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 100 + t);
      for (int i = 0; i < kInstallsEach; ++i) {
        std::vector<std::string> lowers = {""};
        const int n = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < n; ++k) lowers.push_back(std::string(1, 'b' + k * 5 + rng() % 5));
        install(Layout(lowers, i + 1), &retired[t]);
      }
      --installers_left;
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_GT(writes.load(), 0u);
  std::printf("%llu writes, %llu routed again after an install\n",
              static_cast<unsigned long long>(writes.load()),
              static_cast<unsigned long long>(rerouted.load()));
  EXPECT_EQ(stale.load(), 0u) << "a writer held a live Drange of a replaced routing";
  EXPECT_EQ(retired_held.load(), 0u) << "a writer was handed a retired Drange";
  std::multiset<uint64_t> gone;
  for (const auto& r : retired) gone.insert(r.begin(), r.end());
  const auto current = router.Current();
  for (const auto& ds : current->states) {
    MutexLock lock(&ds->mu);
    gone.insert(ds->active->id());
  }
  EXPECT_EQ(gone.size(), published.size());
  EXPECT_EQ(std::set<uint64_t>(gone.begin(), gone.end()), published)
      << "each published Drange is retired exactly once or still live";
}

}  // namespace
}  // namespace nova::ltc
