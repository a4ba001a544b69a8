#include "common/transport/slab_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace nova::transport {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

uint64_t TestSeed() {
  const char* env = std::getenv("NOVA_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::cout << "seed=" << seed << " (replay with NOVA_TEST_SEED=" << seed << ")" << std::endl;
  return seed;
}

SlabOptions SmallOptions() {
  SlabOptions o;
  o.pool_bytes = 4 * kMiB;
  o.min_class_bytes = 256;
  o.max_class_bytes = 1 * kMiB;
  o.slab_bytes = 64 * kKiB;
  return o;
}

Buffer AllocateOk(SlabAllocator* a, uint64_t bytes) {
  Result<Buffer> r = a->Allocate(bytes);
  EXPECT_TRUE(r.ok()) << bytes << ": " << r.status().ToString();
  return r.ok() ? *r : Buffer{};
}

// Fills a buffer with a pattern derived from `tag`, and checks it is still there.
void Fill(const Buffer& b, uint64_t tag) {
  for (uint64_t i = 0; i < b.capacity; i += 64) std::memcpy(b.data + i, &tag, sizeof(tag));
}
bool Intact(const Buffer& b, uint64_t tag) {
  for (uint64_t i = 0; i < b.capacity; i += 64) {
    if (std::memcmp(b.data + i, &tag, sizeof(tag)) != 0) return false;
  }
  return true;
}

TEST(SlabAllocatorTest, RoundsUpToPowerOfTwoClasses) {
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  struct Case {
    uint64_t bytes, capacity;
    uint32_t size_class;
  };
  const Case cases[] = {{0, 256, 0},
                        {1, 256, 0},
                        {256, 256, 0},
                        {257, 512, 1},
                        {4096, 4096, 4},
                        {4097, 8192, 5},
                        {64 * kKiB, 64 * kKiB, 8},
                        {64 * kKiB + 1, 128 * kKiB, 9},
                        {kMiB, kMiB, 12}};
  for (const Case& c : cases) {
    const Buffer b = AllocateOk(&a, c.bytes);
    EXPECT_EQ(c.bytes, b.size);
    EXPECT_EQ(c.capacity, b.capacity) << c.bytes;
    EXPECT_EQ(c.size_class, b.size_class) << c.bytes;
    ASSERT_EQ(&a.region(), b.region);
    EXPECT_EQ(a.region().base + b.offset, b.data);
    EXPECT_TRUE(a.region().Contains(b.data, b.capacity));
    EXPECT_EQ(0u, b.offset % std::min(b.capacity, a.options().slab_bytes)) << "aligned";
    EXPECT_EQ(a.region().Remote(b.offset).addr, b.remote().addr);
    a.Free(b);
  }
}

TEST(SlabAllocatorTest, OversizeIsInvalidArgument) {
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  for (uint64_t bytes : {kMiB + 1, 2 * kMiB, UINT64_MAX}) {
    Result<Buffer> r = a.Allocate(bytes);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(Status::Code::kInvalidArgument, r.status().code()) << r.status().ToString();
  }
  EXPECT_EQ(3u, a.GetStats().failed_allocations);
  EXPECT_EQ(0u, a.GetStats().pool_bytes_used);
}

TEST(SlabAllocatorTest, ReusesFreedBuffers) {
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  const Buffer first = AllocateOk(&a, 1000);
  const Buffer second = AllocateOk(&a, 1000);
  EXPECT_NE(first.offset, second.offset);
  a.Free(first);
  const Buffer again = AllocateOk(&a, 700);  // same class
  EXPECT_EQ(first.offset, again.offset) << "the last freed buffer is reused first";
  EXPECT_EQ(1u, a.GetStats().classes[again.size_class].slabs) << "no new slab needed";
  a.Free(second);
  a.Free(again);
}

TEST(SlabAllocatorTest, ExhaustionIsAnErrorAndRecoverable) {
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  std::vector<Buffer> held;
  for (;;) {
    Result<Buffer> r = a.Allocate(256 * kKiB);
    if (!r.ok()) {
      EXPECT_TRUE(r.status().IsResourceExhausted()) << r.status().ToString();
      EXPECT_EQ(0u, r.status().message().find("slab pool exhausted: ")) << r.status().ToString();
      break;
    }
    held.push_back(*r);
    ASSERT_LE(held.size(), 16u) << "the pool never grows";
  }
  EXPECT_EQ(16u, held.size());  // 4 MiB / 256 KiB
  SlabStats stats = a.GetStats();
  EXPECT_EQ(stats.pool_bytes_total, stats.pool_bytes_used);
  EXPECT_EQ(1u, stats.failed_allocations);

  // Slabs stay with their class: a smaller class has nowhere to come from.
  EXPECT_TRUE(a.Allocate(256).status().IsResourceExhausted());

  // After a free the same class works again, and the allocator is otherwise unharmed.
  a.Free(held.back());
  held.pop_back();
  const Buffer b = AllocateOk(&a, 200 * kKiB);
  EXPECT_EQ(256 * kKiB, b.capacity);
  held.push_back(b);
  for (const Buffer& h : held) a.Free(h);
  stats = a.GetStats();
  EXPECT_EQ(0u, stats.bytes_allocated);
  EXPECT_EQ(16u, stats.classes[10].free);
  EXPECT_EQ(0u, stats.classes[10].allocated);
}

TEST(SlabAllocatorTest, ClassesLargerThanASlabGetTheirOwnSlab) {
  SlabOptions o = SmallOptions();
  o.slab_bytes = 64 * kKiB;
  SlabAllocator a(nullptr, o);
  ASSERT_TRUE(a.Init().ok());
  const Buffer small = AllocateOk(&a, 300);       // one 64 KiB slab of 512 B buffers
  const Buffer big = AllocateOk(&a, 200 * kKiB);  // one 256 KiB slab of one buffer
  const SlabStats s = a.GetStats();
  EXPECT_EQ(64 * kKiB + 256 * kKiB, s.pool_bytes_used);
  EXPECT_EQ(128u, s.classes[small.size_class].allocated + s.classes[small.size_class].free);
  EXPECT_EQ(1u, s.classes[big.size_class].slabs);
  EXPECT_EQ(0u, s.classes[big.size_class].free);
  EXPECT_EQ(64 * kKiB, big.offset);
  a.Free(small);
  a.Free(big);
}

TEST(SlabAllocatorTest, Stats) {
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  SlabStats s = a.GetStats();
  ASSERT_EQ(13u, s.classes.size());  // 256 B .. 1 MiB
  for (size_t c = 0; c < s.classes.size(); ++c) EXPECT_EQ(256u << c, s.classes[c].class_bytes);
  EXPECT_EQ(4 * kMiB, s.pool_bytes_total);
  EXPECT_EQ(0u, s.pool_bytes_used);

  const Buffer b1 = AllocateOk(&a, 100);
  const Buffer b2 = AllocateOk(&a, 100);
  const Buffer b3 = AllocateOk(&a, 5000);
  s = a.GetStats();
  EXPECT_EQ(2u, s.classes[0].allocated);
  EXPECT_EQ(64 * kKiB / 256 - 2, s.classes[0].free);
  EXPECT_EQ(1u, s.classes[0].slabs);
  EXPECT_EQ(1u, s.classes[5].allocated);
  EXPECT_EQ(2 * 64 * kKiB, s.pool_bytes_used);
  EXPECT_EQ(256u + 256u + 8192u, s.bytes_allocated);
  a.Free(b1);
  a.Free(b2);
  a.Free(b3);
  s = a.GetStats();
  EXPECT_EQ(0u, s.classes[0].allocated);
  EXPECT_EQ(64 * kKiB / 256, s.classes[0].free);
  EXPECT_EQ(0u, s.bytes_allocated);
  EXPECT_EQ(2 * 64 * kKiB, s.pool_bytes_used) << "slabs are kept";
}

TEST(SlabAllocatorTest, LifecycleErrors) {
  SlabAllocator a(nullptr, SmallOptions());
  EXPECT_EQ(Status::Code::kIllegalState, a.Allocate(1).status().code());
  ASSERT_TRUE(a.Init().ok());
  EXPECT_EQ(Status::Code::kIllegalState, a.Init().code());
  const Buffer b = AllocateOk(&a, 1);
  a.Shutdown();
  EXPECT_TRUE(a.Allocate(1).status().IsUnavailable());
  a.Free(b);     // bookkeeping only; allowed after Shutdown
  a.Shutdown();  // idempotent
  EXPECT_EQ(0u, a.GetStats().classes[0].allocated);
}

TEST(SlabAllocatorTest, InvalidOptionsAreRejectedByInit) {
  auto with = [](auto edit) {
    SlabOptions o = SmallOptions();
    edit(&o);
    return o;
  };
  const SlabOptions bad[] = {
      with([](SlabOptions* o) { o->min_class_bytes = 0; }),
      with([](SlabOptions* o) { o->min_class_bytes = 300; }),
      with([](SlabOptions* o) { o->max_class_bytes = 128; }),
      with([](SlabOptions* o) { o->max_class_bytes = 3 * kMiB; }),
      with([](SlabOptions* o) { o->slab_bytes = 128; }),
      with([](SlabOptions* o) { o->slab_bytes = 100 * kKiB; }),
      with([](SlabOptions* o) { o->pool_bytes = 0; }),
      with([](SlabOptions* o) { o->pool_bytes = 4 * kMiB + 1; }),
      with([](SlabOptions* o) { o->pool_bytes = 512 * kKiB; }),  // < max class
  };
  for (const SlabOptions& o : bad) {
    SlabAllocator a(nullptr, o);
    const Status s = a.Init();
    EXPECT_EQ(Status::Code::kInvalidArgument, s.code()) << s.ToString();
    EXPECT_EQ(Status::Code::kIllegalState, a.Allocate(1).status().code());
  }
}

// Single-threaded random alloc/free against a model of live buffers: no two live buffers
// overlap and none is disturbed by the others.
TEST(SlabAllocatorTest, RandomizedAgainstModel) {
  std::mt19937_64 rng(TestSeed());
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  std::map<uint64_t, std::pair<Buffer, uint64_t>> live;  // offset -> (buffer, tag)
  for (uint64_t step = 0; step < 20000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(Intact(it->second.first, it->second.second)) << "offset " << it->first;
      a.Free(it->second.first);
      live.erase(it);
      continue;
    }
    const uint64_t bytes = rng() % (1ull << (rng() % 17));  // skewed towards small
    Result<Buffer> r = a.Allocate(bytes);
    if (!r.ok()) {
      ASSERT_TRUE(r.status().IsResourceExhausted()) << r.status().ToString();
      continue;
    }
    const Buffer b = *r;
    ASSERT_GE(b.capacity, bytes);
    auto next = live.lower_bound(b.offset);
    ASSERT_TRUE(next == live.end() || b.offset + b.capacity <= next->first) << "overlap";
    if (next != live.begin()) {
      const Buffer& prev = std::prev(next)->second.first;
      ASSERT_LE(prev.offset + prev.capacity, b.offset) << "overlap";
    }
    Fill(b, step);
    live.emplace(b.offset, std::make_pair(b, step));
  }
  uint64_t capacity = 0;
  for (auto& [offset, entry] : live) capacity += entry.first.capacity;
  EXPECT_EQ(capacity, a.GetStats().bytes_allocated);
  for (auto& [offset, entry] : live) {
    ASSERT_TRUE(Intact(entry.first, entry.second));
    a.Free(entry.first);
  }
  for (const SlabClassStats& c : a.GetStats().classes) EXPECT_EQ(0u, c.allocated);
}

TEST(SlabAllocatorTest, ConcurrentAllocAndFree) {
  const uint64_t seed = TestSeed();
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  constexpr int kThreads = 4;
  constexpr int kStepsPerThread = 20000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      std::vector<std::pair<Buffer, uint64_t>> mine;
      for (uint64_t step = 0; step < kStepsPerThread; ++step) {
        if (!mine.empty() && (rng() % 2 == 0 || mine.size() > 64)) {
          const size_t i = rng() % mine.size();
          if (!Intact(mine[i].first, mine[i].second)) failures[t]++;
          a.Free(mine[i].first);
          mine[i] = mine.back();
          mine.pop_back();
          continue;
        }
        Result<Buffer> r = a.Allocate(rng() % (1ull << (rng() % 15)));
        if (!r.ok()) {
          if (!r.status().IsResourceExhausted()) failures[t]++;
          continue;
        }
        const uint64_t tag = (static_cast<uint64_t>(t) << 32) | step;
        Fill(*r, tag);
        mine.emplace_back(*r, tag);
      }
      for (auto& [b, tag] : mine) {
        if (!Intact(b, tag)) failures[t]++;
        a.Free(b);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(0, failures[t]) << "thread " << t;
  const SlabStats s = a.GetStats();
  EXPECT_EQ(0u, s.bytes_allocated);
  for (const SlabClassStats& c : s.classes) {
    EXPECT_EQ(0u, c.allocated);
    EXPECT_EQ(c.slabs * std::max(a.options().slab_bytes, c.class_bytes) / c.class_bytes, c.free);
  }
}

TEST(SlabAllocatorDeathTest, MisuseAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SlabAllocator a(nullptr, SmallOptions());
  ASSERT_TRUE(a.Init().ok());
  const Buffer b = AllocateOk(&a, 10);
  a.Free(b);
  EXPECT_DEATH(a.Free(b), "double free");

  SlabAllocator other(nullptr, SmallOptions());
  ASSERT_TRUE(other.Init().ok());
  const Buffer foreign = AllocateOk(&other, 10);
  EXPECT_DEATH(a.Free(foreign), "another allocator");
  other.Free(foreign);
}

// Records registrations; everything else is unused by the allocator.
class RecordingTransport : public Transport {
 public:
  Status Init() override { return Status::OK(); }
  Status Start() override { return Status::OK(); }
  void Shutdown() override {}
  std::string listen_address() const override { return ""; }
  const TransportOptions& options() const override { return options_; }
  Result<PeerId> Connect(const std::string&) override { return Status::NotSupported("fake"); }
  void Disconnect(PeerId) override {}
  bool IsUp(PeerId) const override { return false; }
  Result<PeerInfo> GetPeerInfo(PeerId) const override { return Status::NotSupported("fake"); }
  Result<MemoryRegion> RegisterMemory(void* base, uint64_t length, uint32_t access) override {
    registrations++;
    if (!register_error.ok()) return register_error;
    MemoryRegion r;
    r.id = 7;
    r.rkey = 0x1234;
    r.base = static_cast<char*>(base);
    r.length = length;
    r.access = access;
    last = r;
    return r;
  }
  Status DeregisterMemory(const MemoryRegion& region) override {
    deregistrations++;
    EXPECT_EQ(last.id, region.id);
    return Status::OK();
  }
  Status Send(PeerId, std::string_view, Completion, int) override {
    return Status::NotSupported("fake");
  }
  Status Write(PeerId, const MemoryRegion&, uint64_t, uint64_t, RemoteAddr, std::optional<uint32_t>,
               Completion, int) override {
    return Status::NotSupported("fake");
  }
  Status Read(PeerId, RemoteAddr, uint64_t, const MemoryRegion&, uint64_t, Completion,
              int) override {
    return Status::NotSupported("fake");
  }
  TransportStats GetStats() const override { return {}; }

  int registrations = 0;
  int deregistrations = 0;
  Status register_error;
  MemoryRegion last;

 private:
  TransportOptions options_;
};

TEST(SlabAllocatorTest, RegistersThePoolOnce) {
  RecordingTransport t;
  {
    SlabAllocator a(&t, SmallOptions());
    ASSERT_TRUE(a.Init().ok());
    EXPECT_EQ(1, t.registrations);
    EXPECT_EQ(static_cast<uint32_t>(kRemoteRead | kRemoteWrite), t.last.access);
    EXPECT_EQ(4 * kMiB, t.last.length);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(t.last.base) % 4096) << "page aligned";
    std::vector<Buffer> bufs;
    for (int i = 0; i < 100; ++i) bufs.push_back(AllocateOk(&a, 4096 * (i % 3 + 1)));
    EXPECT_EQ(1, t.registrations) << "allocations never register";
    EXPECT_EQ(0x1234u, bufs[0].region->rkey);
    EXPECT_EQ(0x1234u, bufs[0].remote().rkey);
    for (const Buffer& b : bufs) a.Free(b);
    a.Shutdown();
    EXPECT_EQ(1, t.deregistrations);
  }
  EXPECT_EQ(1, t.deregistrations) << "the destructor does not deregister twice";
}

TEST(SlabAllocatorTest, RegistrationFailureFailsInit) {
  RecordingTransport t;
  t.register_error = Status::ResourceExhausted("no more MRs");
  SlabAllocator a(&t, SmallOptions());
  const Status s = a.Init();
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("slab pool")) << s.ToString();
  EXPECT_EQ(Status::Code::kIllegalState, a.Allocate(1).status().code());
  a.Shutdown();
  EXPECT_EQ(0, t.deregistrations);
}

}  // namespace
}  // namespace nova::transport
