// LtcServer in process (--engine=leveldb backends): a new assignment opens added ranges,
// closes removed ones, and makes requests with the old epoch WrongRange; a range that is
// still opening blocks only its own requests; reverse scans cross ranges and LTCs, and stay
// in a snapshot's range. Administration (ApproximateSizes, CompactRange, RangeStats) over
// Nova engines on in-memory table stores and over LevelDB.
#include "ltc/server/ltc_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>
#include <map>
#include <random>
#include <sstream>

#include "client/ltc_connection.h"
#include "client/nova_client.h"
#include "common/lsm/memory_table_store.h"
#include "common/hex.h"
#include "common/mutex.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

// The first assignment (epoch 1) of an LTC that owns all of `n` equal ranges.
LtcAssignment AllRanges(int n) {
  auto all = EqualRanges(n);
  EXPECT_TRUE(all.ok()) << all.status().ToString();
  LtcAssignment a;
  a.epoch = 1;
  if (all.ok()) a.ranges = all.value();
  return a;
}

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

// Blocking calls go over direct connections, declared synchronous: the LTC serves them on
// the connection's reader. Pipelined connections (the *Async calls, direct_calls off) are
// always served by the workers.
TEST(LtcServerTest, OnlySynchronousConnectionsAreServedInline) {
  const std::string dir = test::TestTempDir("ltc_server_test_inline");
  StaticAssignmentSource source(AllRanges(2));
  MetricsRegistry metrics;
  LtcServer server(LtcServerOptions(), &source,
                   LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20}), &metrics);
  ASSERT_TRUE(server.Init().ok());
  ASSERT_TRUE(server.Start().ok());
  Counter* inline_served = metrics.GetCounter("ltc_client_served_inline_total", "");
  Counter* requests = metrics.GetCounter("ltc_client_requests_total", "");

  client::ClientOptions co;
  co.ltcs = {server.address()};
  client::NovaClient direct(co);
  ASSERT_TRUE(direct.Init().ok());
  for (int i = 0; i < 20; ++i) {
    const std::string key = std::string(1, static_cast<char>(i * 12)) + "k";
    ASSERT_TRUE(direct.Put(key, "v" + std::to_string(i)).ok());
    ASSERT_EQ(direct.Get(key).value(), "v" + std::to_string(i));
  }
  ASSERT_TRUE(
      direct.Write({{ltc::BatchOp::kPut, "ab", "1"}, {ltc::BatchOp::kDelete, "cd", ""}}).ok());
  // 41 requests and the Describe of the one direct connection (one calling thread), one
  // at a time: every one served inline.
  EXPECT_EQ(inline_served->value(), 42u);

  // The same calls over pipelined connections, and the async calls of the first client.
  const uint64_t before = inline_served->value();
  const uint64_t requests_before = requests->value();
  client::ClientOptions pipelined = co;
  pipelined.direct_calls = false;
  client::NovaClient shared(pipelined);
  ASSERT_TRUE(shared.Init().ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(shared.Put("\x30k" + std::to_string(i), "x").ok());
    ASSERT_EQ(shared.Get("\x30k" + std::to_string(i)).value(), "x");
    ASSERT_TRUE(direct.PutFuture("\x31k" + std::to_string(i), "y").get().ok());
  }
  EXPECT_GE(requests->value() - requests_before, 30u);
  EXPECT_EQ(inline_served->value(), before);

  // With --ltc_serve_inline=false nothing is served inline, and everything still works.
  server.Shutdown();
  LtcServerOptions no_inline;
  no_inline.serve_inline = false;
  MetricsRegistry metrics2;
  LtcServer server2(no_inline, &source,
                    LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20}), &metrics2);
  ASSERT_TRUE(server2.Init().ok());
  ASSERT_TRUE(server2.Start().ok());
  co.ltcs = {server2.address()};
  client::NovaClient again(co);
  ASSERT_TRUE(again.Init().ok());
  EXPECT_EQ(again.Get("\x0ck").value(), "v1");
  EXPECT_EQ(metrics2.GetCounter("ltc_client_served_inline_total", "")->value(), 0u);
  server2.Shutdown();
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
  StaticAssignmentSource source(AllRanges(2));
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
  std::string StatsText() override { return EngineStatsText(&engine_); }
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
  StaticAssignmentSource source(AllRanges(4));
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
  // `nova_cli stats` shows what writing each level cost, in LevelDB's columns: a row for
  // Level 0 (written by flushes, empty now) and one for Level 1 (written by the compaction)
  // in every range, none for the levels never written.
  auto text = c.Stats();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const std::string& t = text.value();
  size_t headers = 0;
  for (size_t at = t.find("Level  Files Size(MB)"); at != std::string::npos;
       at = t.find("Level  Files Size(MB)", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 4u) << t;
  std::istringstream lines(t);
  std::string line;
  int level_rows[2] = {0, 0};
  while (std::getline(lines, line)) {
    int level = -1;
    unsigned long long files = 0;
    double size_mb = -1, secs = -1, read_mb = -1, write_mb = -1;
    if (std::sscanf(line.c_str(), " %d %llu %lf %lf %lf %lf", &level, &files, &size_mb, &secs,
                    &read_mb, &write_mb) != 6) {
      continue;
    }
    ASSERT_TRUE(level == 0 || level == 1) << line;  // nothing below Level 1 yet
    ++level_rows[level];
    if (level == 0) {
      EXPECT_EQ(files, 0u) << line;  // all compacted into Level 1
    } else {
      EXPECT_GT(files, 0u) << line;
    }
  }
  EXPECT_EQ(level_rows[0], 4) << t;  // every range flushed into Level 0
  EXPECT_EQ(level_rows[1], 4) << t;
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
  StaticAssignmentSource source(AllRanges(2));
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

using KeyValues = std::vector<std::pair<std::string, std::string>>;

// Two in-process LTCs over 4 equal ranges (starts "", 0x40, 0x80, 0xc0): ranges 0-1 on the
// first, 2-3 on the second, at epoch 1.
class TwoLtcs {
 public:
  explicit TwoLtcs(const std::string& name, uint64_t max_scan_reply_bytes = 4ull << 20) {
    auto all = EqualRanges(4);
    EXPECT_TRUE(all.ok());
    for (int i = 0; i < 2; ++i) {
      LtcAssignment a;
      a.epoch = 1;
      a.ltc_id = static_cast<uint32_t>(i + 1);
      a.ranges = {all.value()[2 * i], all.value()[2 * i + 1]};
      sources_[i] = std::make_unique<StaticAssignmentSource>(a);
      LtcServerOptions so;
      so.max_scan_reply_bytes = max_scan_reply_bytes;
      servers_[i] = std::make_unique<LtcServer>(
          so, sources_[i].get(),
          LevelDbBackendFactory({.dir = test::TestTempDir(name + std::to_string(i)),
                                 .write_buffer_bytes = 1 << 20}),
          &metrics_[i]);
      EXPECT_TRUE(servers_[i]->Init().ok());
      EXPECT_TRUE(servers_[i]->Start().ok());
    }
  }
  ~TwoLtcs() {
    for (auto& s : servers_) s->Shutdown();
  }
  std::string address(int i) const { return servers_[i]->address(); }

 private:
  MetricsRegistry metrics_[2];
  std::unique_ptr<StaticAssignmentSource> sources_[2];
  std::unique_ptr<LtcServer> servers_[2];
};

// One request on a fresh connection to `address`: the raw reply of a Scan.
Status RawScan(const std::string& address, const ScanRequest& q, ScanResponse* out) {
  const Deadline deadline = Deadline::After(10s);
  auto conn = client::LtcConnection::Connect(address, deadline, 64 << 20);
  if (!conn.ok()) return conn.status();
  std::promise<std::pair<Status, std::string>> p;
  conn.value()->Call(static_cast<uint16_t>(ClientMsg::kScan), EncodeScanRequest(q), deadline,
                     [&p](const Status& s, std::string r) { p.set_value({s, std::move(r)}); });
  auto [s, payload] = p.get_future().get();
  conn.value()->Close();
  if (!s.ok()) return s;
  return DecodeScanResponse(payload, out);
}

// The model's pairs with key < before (all for ""), descending, at most `limit`.
KeyValues Below(const std::map<std::string, std::string>& model, const std::string& before,
                size_t limit) {
  KeyValues out;
  auto it = before.empty() ? model.end() : model.lower_bound(before);
  while (it != model.begin() && out.size() < limit) {
    --it;
    out.emplace_back(it->first, it->second);
  }
  return out;
}

// A reverse scan starts in the range holding the keys just below its start (the range
// *ending* at a range boundary), continues into earlier ranges of the same LTC, hands over
// to the other LTC through next_start, and pages by its last key when the reply is full.
TEST(LtcServerTest, ReverseScanAcrossRangesAndLtcs) {
  TwoLtcs ltcs("ltc_server_test_reverse");
  client::ClientOptions co;
  co.ltcs = {ltcs.address(0), ltcs.address(1)};
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  const uint64_t seed = test::TestSeed("ReverseScanAcrossRangesAndLtcs");
  std::mt19937_64 rnd(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::map<std::string, std::string> model;
  // The boundaries and their neighbours, the empty key, and random keys.
  for (const std::string& k :
       {std::string(), std::string("\x3f\xff", 2), std::string("\x40", 1),
        std::string("\x40\x00", 2), std::string("\x7f", 1), std::string("\x80", 1),
        std::string("\xc0", 1), std::string("\xff\xff", 2)}) {
    model[k] = "b" + std::to_string(model.size());
  }
  for (int i = 0; i < 200; ++i) {
    std::string k(1 + rnd() % 3, '\0');
    for (char& ch : k) ch = static_cast<char>(rnd() % 256);
    model[k] = "v" + std::to_string(i);
  }
  for (const auto& [k, v] : model) ASSERT_TRUE(c.Put(k, v).ok()) << EscapeBytes(k);

  // Whole reverse walks and walks from every boundary and some keys, with several limits.
  std::vector<std::string> starts = {"", "\x40", "\x80", "\xc0", std::string("\x40\x00", 2),
                                     std::string(1, '\0')};
  for (int i = 0; i < 20; ++i) starts.push_back(std::next(model.begin(), rnd() % model.size())->first);
  for (const std::string& start : starts) {
    for (size_t limit : {size_t{1}, size_t{3}, size_t{1000}}) {
      KeyValues got;
      Status s = c.ScanReverse(start, limit, &got);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(got, Below(model, start, limit)) << "from '" << EscapeBytes(start) << "'";
    }
  }
  // Paging by hand: each page continues below the last key of the one before.
  KeyValues all;
  std::string pos;
  for (;;) {
    KeyValues page;
    ASSERT_TRUE(c.ScanReverse(pos, 7, &page).ok());
    all.insert(all.end(), page.begin(), page.end());
    if (page.size() < 7 || page.back().first.empty()) break;
    pos = page.back().first;
  }
  EXPECT_EQ(all, Below(model, "", model.size()));

  // The raw replies: the second LTC's from the end stops at its first range's start...
  ScanResponse r;
  ASSERT_TRUE(RawScan(ltcs.address(1), {0, "", 1000, 0, false, true}, &r).ok());
  KeyValues upper;  // the keys of ranges 2 and 3, descending
  for (auto it = model.rbegin(); it != model.rend() && it->first >= "\x80"; ++it) {
    upper.emplace_back(it->first, it->second);
  }
  EXPECT_EQ(r.pairs, upper);
  EXPECT_EQ(r.next_start, "\x80");
  EXPECT_FALSE(r.end_of_keys);
  // ...which names the first LTC's range 1 (the range ending there), whence it goes on
  // through range 0 to the beginning of the key space (the empty key included).
  ASSERT_TRUE(RawScan(ltcs.address(0), {0, "\x80", 1000, 0, false, true}, &r).ok());
  EXPECT_EQ(r.pairs, Below(model, "\x80", model.size()));
  EXPECT_TRUE(r.end_of_keys);
  // A full reply continues at its last key.
  ASSERT_TRUE(RawScan(ltcs.address(0), {0, "\x80", 2, 0, false, true}, &r).ok());
  ASSERT_EQ(r.pairs.size(), 2u);
  EXPECT_EQ(r.next_start, r.pairs.back().first);
  EXPECT_FALSE(r.end_of_keys);
  // A full reply ending at the empty key ends the key space.
  ASSERT_TRUE(RawScan(ltcs.address(0), {0, std::string(1, '\0'), 1, 0, false, true}, &r).ok());
  ASSERT_EQ(r.pairs, (KeyValues{{"", model[""]}}));
  EXPECT_TRUE(r.end_of_keys);
  // The range below the start belongs to the other LTC: WrongRange, both ways round.
  Status s = RawScan(ltcs.address(1), {0, "\x80", 10, 0, false, true}, &r);
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  s = RawScan(ltcs.address(0), {0, "", 10, 0, false, true}, &r);
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  // Keys only, in reverse.
  ASSERT_TRUE(RawScan(ltcs.address(1), {0, "", 1, 0, true, true}, &r).ok());
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].first, model.rbegin()->first);
  EXPECT_EQ(r.pairs[0].second, "");
}

// Small replies (the byte cap) make the LTC stop inside a range: the client pages on.
TEST(LtcServerTest, ReverseScanPagesByReplySize) {
  TwoLtcs ltcs("ltc_server_test_reverse_small", /*max_scan_reply_bytes=*/16);
  client::ClientOptions co;
  co.ltcs = {ltcs.address(0), ltcs.address(1)};
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  std::map<std::string, std::string> model;
  for (int i = 0; i < 256; i += 3) {
    model[std::string(1, static_cast<char>(i)) + "key"] = "value" + std::to_string(i);
  }
  for (const auto& [k, v] : model) ASSERT_TRUE(c.Put(k, v).ok());
  KeyValues got;
  ASSERT_TRUE(c.ScanReverse("", 100000, &got).ok());
  EXPECT_EQ(got, Below(model, "", model.size()));
  got.clear();
  ASSERT_TRUE(c.ScanReverse("\xc0", 10, &got).ok());
  EXPECT_EQ(got, Below(model, "\xc0", 10));
}

// A reverse scan at a snapshot reads the snapshot's state, only within its range; its
// start must have the keys just below it in that range.
TEST(LtcServerTest, ReverseScanAtSnapshotStaysInItsRange) {
  TwoLtcs ltcs("ltc_server_test_reverse_snap");
  client::ClientOptions co;
  co.ltcs = {ltcs.address(0), ltcs.address(1)};
  client::NovaClient c(co);
  ASSERT_TRUE(c.Init().ok());
  for (const char* k : {"\x10", "\x41", "\x50", "\x60", "\x7f", "\x90", "\xd0"}) {
    ASSERT_TRUE(c.Put(k, "old").ok());
  }
  auto snap = c.GetSnapshot("\x50");  // range 1: [0x40, 0x80)
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(c.Put("\x55", "new").ok());
  ASSERT_TRUE(c.Put("\x60", "new").ok());
  ASSERT_TRUE(c.Delete("\x41").ok());
  const KeyValues old_range1 = {{"\x7f", "old"}, {"\x60", "old"}, {"\x50", "old"}, {"\x41", "old"}};
  for (const std::string before : {"", "\x80"}) {  // from the range's end
    ScanResponse r;
    ASSERT_TRUE(c.ScanReverseAt(snap.value(), before, 100, &r).ok());
    EXPECT_EQ(r.pairs, old_range1);
    EXPECT_EQ(r.next_start, "\x40");  // exhausted: the range's start, never into range 0
    EXPECT_FALSE(r.end_of_keys);
  }
  ScanResponse r;
  ASSERT_TRUE(c.ScanReverseAt(snap.value(), "\x60", 1, &r).ok());
  EXPECT_EQ(r.pairs, (KeyValues{{"\x50", "old"}}));
  EXPECT_EQ(r.next_start, "\x50");
  ASSERT_TRUE(c.ScanReverseAt(snap.value(), "\x41", 10, &r).ok());
  EXPECT_TRUE(r.pairs.empty());
  EXPECT_EQ(r.next_start, "\x40");
  // The keys below 0x40 and 0x90 are not range 1's.
  Status s = c.ScanReverseAt(snap.value(), "\x40", 10, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = c.ScanReverseAt(snap.value(), "\x90", 10, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // The latest data has moved on.
  KeyValues latest;
  ASSERT_TRUE(c.ScanReverse("\x80", 10, &latest).ok());
  EXPECT_EQ(latest, (KeyValues{{"\x7f", "old"}, {"\x60", "new"}, {"\x55", "new"}, {"\x50", "old"},
                              {"\x10", "old"}}));
  EXPECT_TRUE(c.ReleaseSnapshot(snap.value()).ok());
  // The first range's snapshot reaches the beginning of the key space.
  auto first = c.GetSnapshot("");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(c.ScanReverseAt(first.value(), "", 10, &r).ok());
  EXPECT_EQ(r.pairs, (KeyValues{{"\x10", "old"}}));
  EXPECT_TRUE(r.end_of_keys);
  EXPECT_TRUE(c.ReleaseSnapshot(first.value()).ok());
  // Snapshots of every range at once, each in its range.
  auto all = c.GetSnapshots({"", "\x40", "\x80", "\xc0", "\x99"});
  ASSERT_EQ(all.size(), 5u);
  for (const auto& one : all) ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(c.ScanReverseAt(all[3].value(), "", 10, &r).ok());
  EXPECT_EQ(r.pairs, (KeyValues{{"\xd0", "old"}}));
  EXPECT_EQ(r.next_start, "\xc0");
  ASSERT_TRUE(c.ScanReverseAt(all[4].value(), "\xc0", 10, &r).ok());  // range 2, via "\x99"
  EXPECT_EQ(r.pairs, (KeyValues{{"\x90", "old"}}));
  for (const auto& one : all) EXPECT_TRUE(c.ReleaseSnapshot(one.value()).ok());
}

// Where a request's time goes: each request served is counted by class with its times,
// waiting for a worker only when it was handed to one; kStats ends with the breakdown.
// (LevelDB backends: no StoC reads or log appends.)
TEST(LtcServerTest, RequestTimesAreCounted) {
  for (bool serve_inline : {true, false}) {
    SCOPED_TRACE(serve_inline ? "served inline" : "served by workers");
    const std::string dir =
        test::TestTempDir(serve_inline ? "ltc_server_test_times_inline" : "ltc_server_test_times");
    LtcAssignment a = AllRanges(2);
    a.ltc_id = 7;
    StaticAssignmentSource source(a);
    MetricsRegistry metrics;
    LtcServerOptions so;
    so.serve_inline = serve_inline;
    LtcServer server(so, &source,
                     LevelDbBackendFactory({.dir = dir, .write_buffer_bytes = 1 << 20}), &metrics);
    ASSERT_TRUE(server.Init().ok());
    ASSERT_TRUE(server.Start().ok());
    client::ClientOptions co;
    co.ltcs = {server.address()};
    co.timeout = 10s;
    client::NovaClient c(co);
    ASSERT_TRUE(c.Init().ok());
    const auto count = [&](const std::string& name) {
      return metrics.GetCounter(name, "")->value();
    };
    auto stats = c.Stats();  // before any read or write
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats.value().find("reads (get, scan)"), std::string::npos) << stats.value();

    constexpr int kKeys = 20;
    for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(c.Put(SpreadKey(i), "v").ok());
    ASSERT_TRUE(c.Delete(SpreadKey(0)).ok());
    for (int i = 0; i < kKeys; ++i) (void)c.Get(SpreadKey(i));
    // Enough for a CPU sample on one thread: a synchronous client's calls reuse one
    // connection, whose reader serves them all when served inline.
    constexpr int kGets = 2 * kCpuSampleEvery;
    for (int i = 0; i < kGets; ++i) ASSERT_TRUE(c.Get(SpreadKey(1)).ok());
    std::vector<std::pair<std::string, std::string>> pairs;
    ASSERT_TRUE(c.Scan("", 100, &pairs).ok());
    // A request is counted once its response is written: the last may trail its answer.
    ASSERT_TRUE(test::WaitFor(
        [&] {
          return count("ltc_request_write_total") == kKeys + 1 &&
                 count("ltc_request_read_total") >= kKeys + kGets + 1;  // scan: 1 or 2
        },
        10s))
        << count("ltc_request_write_total") << " " << count("ltc_request_read_total");
    if (serve_inline) {
      EXPECT_GE(count("ltc_request_read_cpu_sampled_total"), 1u);
      // A LevelDB Get and a socket write: some CPU.
      EXPECT_GT(count("ltc_request_read_thread_cpu_us_total"), 0u);
    }
    for (const char* cls : {"read", "write"}) {
      const std::string p = std::string("ltc_request_") + cls;
      // Twenty-odd requests through LevelDB and a socket: some microseconds in each part.
      EXPECT_GT(count(p + "_engine_us_total"), 0u) << cls;
      EXPECT_GT(count(p + "_send_us_total"), 0u) << cls;
      EXPECT_EQ(count(p + "_stoc_read_us_total"), 0u) << cls;
      EXPECT_EQ(count(p + "_log_append_us_total"), 0u) << cls;
      if (serve_inline) {
        EXPECT_EQ(count(p + "_wait_us_total"), 0u) << cls;
      } else {
        // A worker is woken for each: at least a microsecond between them all.
        EXPECT_GT(count(p + "_wait_us_total"), 0u) << cls;
      }
    }
    EXPECT_GE(count("ltc_request_other_total"), 2u);  // Describe, Stats
    EXPECT_EQ(count("ltc_client_served_inline_total") > 0, serve_inline);

    stats = c.Stats();
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    const std::string& text = stats.value();
    // The range lines come first, unchanged; the breakdown follows.
    EXPECT_NE(text.find("ltc 7 epoch 1 ranges 2\nrange 0 "), std::string::npos) << text;
    const size_t head = text.find("ltc 7 time per request: ");
    ASSERT_NE(head, std::string::npos) << text;
    EXPECT_GT(head, text.find("range 1 ")) << text;
    unsigned long long served = 0, on_reader = 0, by_workers = 0;
    ASSERT_EQ(std::sscanf(text.c_str() + head,
                          "ltc 7 time per request: %llu served (%llu on their connection's "
                          "reader, %llu by workers)",
                          &served, &on_reader, &by_workers),
              3)
        << text;
    EXPECT_GE(served, 2u * kKeys + kGets + 2);
    EXPECT_EQ(served, on_reader + by_workers);
    // Inline: every read and write (direct connections); the routing's Describe and the
    // Stats go over pipelined connections, to the workers.
    if (serve_inline) {
      EXPECT_GE(on_reader, 2u * kKeys + kGets + 1) << text;
      EXPECT_EQ(by_workers, served - on_reader) << text;
    } else {
      EXPECT_EQ(on_reader, 0u) << text;
    }
    double cpu_us = 0, user_us = 0, system_us = 0;
    const size_t cpu = text.find("  cpu ", head);
    ASSERT_NE(cpu, std::string::npos) << text;
    ASSERT_EQ(std::sscanf(text.c_str() + cpu, "  cpu %lf us (user %lf, system %lf)", &cpu_us,
                          &user_us, &system_us),
              3)
        << text;
    EXPECT_GT(cpu_us, 0) << text;  // this process did serve them
    EXPECT_NEAR(cpu_us, user_us + system_us, 0.2) << text;
    EXPECT_NE(text.find(" context switches ("), std::string::npos) << text;
    for (const char* line :
         {"  wall ", " reads (get, scan): wall ", " writes (put, delete, write): wall ",
          " other: wall ", "waiting for a worker ", "(StoC reads 0.0, log appends 0.0)"}) {
      EXPECT_NE(text.find(line, head), std::string::npos) << line << "\n" << text;
    }
    // (Some "other" requests go to the workers either way: the waiting line shows then.)
    EXPECT_NE(text.find(" by workers after waiting "), std::string::npos) << text;
    if (serve_inline) {
      EXPECT_NE(text.find("; serving thread's cpu "), std::string::npos) << text;
    }
    // The process gauges are on /metrics.
    const std::string prometheus = metrics.DumpPrometheus();
    for (const char* gauge : {"process_cpu_user_seconds ", "process_cpu_system_seconds ",
                              "process_voluntary_context_switches ",
                              "process_involuntary_context_switches "}) {
      EXPECT_NE(prometheus.find(std::string("\n") + gauge), std::string::npos) << gauge;
    }
    server.Shutdown();
  }
}

}  // namespace
}  // namespace nova::ltc
