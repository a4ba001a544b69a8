// LtcServer in process (--engine=leveldb backends): a new assignment opens added ranges,
// closes removed ones, and makes requests with the old epoch WrongRange; a range that is
// still opening blocks only its own requests. Administration (ApproximateSizes,
// CompactRange, RangeStats) over Nova engines on in-memory table stores and over LevelDB.
#include "ltc/server/ltc_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "client/ltc_connection.h"
#include "client/nova_client.h"
#include "common/lsm/memory_table_store.h"
#include "common/mutex.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

TEST(LtcServerTest, NewAssignmentAddsAndRemovesRanges) {
  const std::string dir = test::TestTempDir("ltc_server_test");
  auto all = EqualRanges(4);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = {all.value()[0], all.value()[1]};
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  LtcServer server(LtcServerOptions(), &source,
                   LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20}), &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());

  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 300ms;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  ASSERT_TRUE(c.Put("\x10k", "r0").ok());
  ASSERT_TRUE(c.Put("\x50k", "r1").ok());
  Status s = c.Put("\x90k", "r2");  // range 2 is not ours yet
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();

  // Epoch 2: range 0 leaves, range 2 arrives.
  LtcAssignment b = a;
  b.epoch = 2;
  b.ranges = {all.value()[1], all.value()[2]};
  ASSERT_TRUE(source.Update(b).ok());
  // Applied by the server's applier thread.
  ASSERT_TRUE(test::WaitFor([&] { return server.epoch() == 2u; }, 10s));
  // The client still routes with epoch 1: it is told WrongRange, refreshes, and succeeds.
  ASSERT_TRUE(c.Put("\x90k", "r2").ok());
  EXPECT_EQ(c.routing().epoch, 2u);
  EXPECT_EQ(c.Get("\x50k").value(), "r1");  // kept range keeps its data
  s = c.Get("\x10k").status();                // removed range: no LTC serves it
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  // An older or equal epoch is refused.
  EXPECT_FALSE(server.ApplyAssignment(a).ok());
  server.Shutdown();
}

// A range that fails to open (its StoCs unreachable, say) does not lose the assignment:
// the server retries it with backoff until it applies.
TEST(LtcServerTest, FailedAssignmentIsRetried) {
  const std::string dir = test::TestTempDir("ltc_server_test_retry");
  auto all = EqualRanges(2);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = {all.value()[0]};
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  BackendFactory leveldb = LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20});
  std::atomic<int> failures_left{3};
  BackendFactory flaky = [&](const RangeInfo& r, const LtcAssignment& as)
      -> Result<std::unique_ptr<RangeBackend>> {
    if (r.id == 1 && failures_left.fetch_sub(1) > 0) return Status::IOError("injected");
    return leveldb(r, as);
  };
  LtcServer server(LtcServerOptions(), &source, flaky, &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  LtcAssignment b = a;
  b.epoch = 2;
  b.ranges = {all.value()[0], all.value()[1]};
  ASSERT_TRUE(source.Update(b).ok());
  ASSERT_TRUE(test::WaitFor([&] { return server.epoch() == 2u; }, 20s));
  EXPECT_LE(failures_left.load(), 0);
  server.Shutdown();
}

// A range still being opened (recovering its memtables) makes its requests wait, then
// answers Unavailable, while the other ranges are served; once open, it serves. The client
// library retries Unavailable until its deadline, so its calls block until the range is back.
TEST(LtcServerTest, RecoveringRangeBlocksItsRequestsOnly) {
  const std::string dir = test::TestTempDir("ltc_server_test_recovering");
  auto all = EqualRanges(2);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = all.value();
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  BackendFactory leveldb = LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20});
  Mutex gate_mu;
  CondVar gate_cv;
  bool open_range_1 = false;  // under gate_mu (a local: the analysis cannot guard it)
  BackendFactory gated = [&](const RangeInfo& r, const LtcAssignment& as)
      -> Result<std::unique_ptr<RangeBackend>> {
    if (r.id == 1) {  // range 1 "recovers" until the test lets it go
      MutexLock l(&gate_mu);
      gate_cv.Wait(&l, [&] { return open_range_1; });
    }
    return leveldb(r, as);
  };
  LtcServerOptions so;
  so.recovery_wait = 50ms;
  LtcServer server(so, &source, gated, &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());

  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 400ms;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  // Range 0 serves at once.
  ASSERT_TRUE(c.Put("\x10k", "r0").ok());
  // Range 1 does not: the call keeps being retried until its deadline.
  const MonoTime start = MonoNow();
  Status s = c.Put("\x90k", "r1");
  EXPECT_FALSE(s.ok());
  EXPECT_GE(MonoNow() - start, 300ms) << "the call returned before its deadline: " << s.ToString();
  // Meanwhile range 0 keeps serving.
  ASSERT_TRUE(c.Get("\x10k").ok());
  auto stats = c.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_NE(stats.value().find("being recovered"), std::string::npos) << stats.value();
  // A call in flight when the range opens completes.
  client::ClientOptions patient = co;
  patient.timeout = 10s;
  client::NovaClient c2(patient);
  ASSERT_TRUE(c2.Init().ok());
  auto put = std::async(std::launch::async, [&] { return c2.Put("\x90k", "r1"); });
  EXPECT_EQ(put.wait_for(200ms), std::future_status::timeout) << "served before the range opened";
  {
    MutexLock l(&gate_mu);
    open_range_1 = true;
  }
  gate_cv.NotifyAll();
  s = put.get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.Get("\x90k").value(), "r1");
  server.Shutdown();
}

// A Nova engine over an in-memory table store, as a backend (what NovaBackend forwards).
class EngineBackend final : public RangeBackend {
 public:
  static Result<std::unique_ptr<RangeBackend>> Open(const RangeInfo& r) {
    EngineOptions o;
    o.range_id = r.id;
    o.memtable_bytes = 32 << 10;
    o.memtables = 4;
    o.sstable_bytes = 16 << 10;
    o.block_bytes = 1024;
    o.drange_merge_threshold_keys = 0;
    o.l0_compaction_trigger = 1000;  // the test decides when to compact
    o.level1_bytes = 1ull << 40;
    auto b = std::make_unique<EngineBackend>(o);
    NOVA_RETURN_NOT_OK(b->engine_.Open());
    std::unique_ptr<RangeBackend> out = std::move(b);
    return out;
  }
  explicit EngineBackend(const EngineOptions& o) : engine_(o, &store_) {}
  Status Put(const leveldb::Slice& k, const leveldb::Slice& v) override {
    return engine_.Put(k, v);
  }
  Status Delete(const leveldb::Slice& k) override { return engine_.Delete(k); }
  Status Write(const std::vector<BatchEntry>&) override { return Status::NotSupported("test"); }
  Status Get(const leveldb::Slice& k, std::string* v, Snapshot) override {
    return engine_.Get(k, v);
  }
  leveldb::Iterator* NewIterator(Snapshot) override { return engine_.NewIterator(); }
  Snapshot GetSnapshot() override { return engine_.GetSnapshot(); }
  void ReleaseSnapshot(Snapshot s) override {
    engine_.ReleaseSnapshot(static_cast<const EngineSnapshot*>(s));
  }
  std::string StatsText() override { return "engine=test\n"; }
  Result<uint64_t> ApproximateSize(const KeyRange& span) override {
    return engine_.ApproximateSize(span);
  }
  Status CompactRange(const KeyRange& span, const std::atomic<bool>* cancel) override {
    return engine_.CompactRange(span, cancel);
  }
  void GetFigures(bool with_tables, RangeFigures* out) override {
    FillEngineFigures(&engine_, with_tables, out);
  }

 private:
  lsm::MemoryTableStore store_;  // declared first: outlives the engine
  RangeEngine engine_;
};

// Keys spread evenly over the key space (so over EqualRanges): a first byte 0..255.
std::string SpreadKey(int i) {
  return std::string(1, static_cast<char>(i % 256)) + "key" + std::to_string(i);
}

TEST(LtcServerAdminTest, SizesCompactionAndFiguresAcrossRanges) {
  auto all = EqualRanges(4);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = all.value();
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  LtcServer server(LtcServerOptions(), &source,
                   [](const RangeInfo& r, const LtcAssignment&) { return EngineBackend::Open(r); },
                   &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 10s;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());

  auto sizes = c.ApproximateSizes({KeyRange::All()});
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  EXPECT_EQ(sizes.value()[0], 0u);
  constexpr int kKeys = 8000;
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(c.Put(SpreadKey(i), std::string(100, 'v')).ok());

  // The whole key space, half of it across a range boundary, a quarter, nothing.
  sizes = c.ApproximateSizes({KeyRange::All(), KeyRange{"\x20", "\xa0"},
                              KeyRange{"\x40", "\x80"}, KeyRange{"b", "a"}});
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  const uint64_t total = sizes.value()[0];
  EXPECT_GT(total, uint64_t{kKeys} * 100);
  EXPECT_LT(total, uint64_t{kKeys} * 200);
  EXPECT_NEAR(static_cast<double>(sizes.value()[1]) / total, 0.5, 0.1);
  EXPECT_NEAR(static_cast<double>(sizes.value()[2]) / total, 0.25, 0.1);
  EXPECT_EQ(sizes.value()[3], 0u);

  auto figures = c.RangeStats(/*with_tables=*/false);
  ASSERT_TRUE(figures.ok()) << figures.status().ToString();
  ASSERT_EQ(figures.value().ranges.size(), 4u);
  uint64_t l0 = 0;
  for (const auto& f : figures.value().ranges) {
    EXPECT_TRUE(f.open);
    ASSERT_EQ(f.levels.size(), static_cast<size_t>(lsm::kNumLevels));
    l0 += f.levels[0].files;
    EXPECT_GT(f.memtable_bytes, 0u);
  }
  EXPECT_GT(l0, 4u);

  // Compacting everything: every range's tables in one level (Level 1), all keys readable.
  ASSERT_TRUE(c.CompactRange(KeyRange::All()).ok());
  figures = c.RangeStats(/*with_tables=*/true);
  ASSERT_TRUE(figures.ok()) << figures.status().ToString();
  size_t tables = 0;
  for (const auto& f : figures.value().ranges) {
    EXPECT_EQ(f.levels[0].files, 0u) << f.range.id;
    EXPECT_GT(f.levels[1].files, 0u) << f.range.id;
    EXPECT_GT(f.levels[1].write_bytes, 0u) << f.range.id;
    for (const auto& t : f.tables) {
      EXPECT_EQ(t.level, 1u);
      EXPECT_TRUE(f.range.Contains(t.smallest.substr(0, t.smallest.size() - 8)));
    }
    tables += f.tables.size();
    EXPECT_EQ(f.tables.size(), f.levels[1].files);
  }
  EXPECT_GT(tables, 4u);
  for (int i = 0; i < kKeys; i += 97) EXPECT_TRUE(c.Get(SpreadKey(i)).ok()) << i;
  auto after = c.ApproximateSizes({KeyRange::All()});
  ASSERT_TRUE(after.ok());
  EXPECT_NEAR(static_cast<double>(after.value()[0]) / total, 1.0, 0.3);

  // The server refuses a span its client should have split: WrongRange (the client's cue
  // to refresh its routing), and an empty span.
  auto conn = client::LtcConnection::Connect(server.address(), Deadline::After(5s), 1 << 20);
  ASSERT_TRUE(conn.ok());
  auto call = [&](ClientMsg type, std::string payload) {
    std::promise<Status> p;
    conn.value()->Call(static_cast<uint16_t>(type), payload, Deadline::After(5s),
                       [&p](const Status& s, std::string) { p.set_value(s); });
    return p.get_future().get();
  };
  Status s = call(ClientMsg::kApproximateSizes,
                  EncodeApproximateSizesRequest({1, {KeyRange{"\x20", "\xa0"}}}));
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  s = call(ClientMsg::kCompactRange, EncodeCompactRangeRequest({1, KeyRange{"\xc0", "\xc1"}}));
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = call(ClientMsg::kCompactRange, EncodeCompactRangeRequest({1, KeyRange{"\x10", "\x10"}}));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = call(ClientMsg::kCompactRange, EncodeCompactRangeRequest({0, KeyRange{"\x10", std::nullopt}}));
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  conn.value()->Close();
  server.Shutdown();
}

TEST(LtcServerAdminTest, LevelDbBackendsAnswerToo) {
  const std::string dir = test::TestTempDir("ltc_server_test_admin");
  auto all = EqualRanges(2);
  ASSERT_TRUE(all.ok());
  LtcAssignment a;
  a.epoch = 1;
  a.ranges = all.value();
  StaticAssignmentSource source(a);
  MetricsRegistry metrics;
  LtcServer server(LtcServerOptions(), &source,
                   LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 256 << 10}), &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  client::ClientOptions co;
  co.ltcs = {server.address()};
  co.timeout = 10s;
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  for (int i = 0; i < 4000; ++i) ASSERT_TRUE(c.Put(SpreadKey(i), std::string(500, 'v')).ok());
  ASSERT_TRUE(c.CompactRange(KeyRange::All()).ok());
  auto sizes = c.ApproximateSizes({KeyRange::All(), KeyRange{"\x80", std::nullopt}});
  ASSERT_TRUE(sizes.ok()) << sizes.status().ToString();
  EXPECT_GT(sizes.value()[0], 4000u * 250);  // LevelDB counts its tables
  EXPECT_NEAR(static_cast<double>(sizes.value()[1]) / sizes.value()[0], 0.5, 0.15);
  auto figures = c.RangeStats(false);
  ASSERT_TRUE(figures.ok()) << figures.status().ToString();
  ASSERT_EQ(figures.value().ranges.size(), 2u);
  for (const auto& f : figures.value().ranges) {
    uint64_t files = 0;
    for (const auto& l : f.levels) files += l.files;
    EXPECT_GT(files, 0u) << f.range.id;
    EXPECT_EQ(f.levels[0].files, 0u) << f.range.id;  // compacted
  }
  server.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
