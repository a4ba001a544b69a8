// LogClient against in-process LogcServers over loopback: group commit, segments, the modes'
// acknowledgments, failover, re-replication, recovery and deletion. Appended records are
// self-describing ([len u32][writer u32][seq u32][payload]) so a recovered log can be
// checked against what each writer appended, in order.
#include "logc/client/log_client.h"

#include <gtest/gtest.h>

#include <functional>

#include <atomic>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/coding.h"
#include "logc/server/logc_server.h"
#include "tests/util/test_util.h"

namespace nova::logc {
namespace {

constexpr char kSecret[] = "log-client-test-secret";
constexpr size_t kRecordHeader = 12;

std::string Record(uint32_t writer, uint32_t seq, size_t payload, uint64_t seed) {
  std::string r;
  PutFixed32(&r, static_cast<uint32_t>(kRecordHeader + payload));
  PutFixed32(&r, writer);
  PutFixed32(&r, seq);
  std::mt19937_64 rng(seed ^ (uint64_t{writer} << 32) ^ seq);
  for (size_t i = 0; i < payload; ++i) r.push_back(static_cast<char>(rng()));
  return r;
}

// Parses records until a zero length; checks the rest is zero (memory logs are read whole)
// and that every record's payload is the one Record() made. Returns (writer -> seqs).
std::map<uint32_t, std::vector<uint32_t>> ParseLog(const std::string& bytes, uint64_t seed,
                                                   uint64_t* used) {
  std::map<uint32_t, std::vector<uint32_t>> out;
  size_t p = 0;
  while (p + kRecordHeader <= bytes.size()) {
    const uint32_t len = DecodeFixed32(bytes.data() + p);
    if (len == 0) break;
    EXPECT_GE(len, kRecordHeader);
    EXPECT_LE(p + len, bytes.size());
    if (len < kRecordHeader || p + len > bytes.size()) break;
    const uint32_t writer = DecodeFixed32(bytes.data() + p + 4);
    const uint32_t seq = DecodeFixed32(bytes.data() + p + 8);
    EXPECT_EQ(bytes.substr(p, len), Record(writer, seq, len - kRecordHeader, seed))
        << "record of writer " << writer << " seq " << seq << " at " << p;
    out[writer].push_back(seq);
    p += len;
  }
  *used = p;
  for (size_t i = p; i < bytes.size(); ++i) {
    if (bytes[i] != 0) {
      ADD_FAILURE() << "non-zero byte after the last record at " << i;
      break;
    }
  }
  return out;
}

class LogClientTest : public ::testing::Test {
 protected:
  struct Server {
    std::unique_ptr<MetricsRegistry> metrics = std::make_unique<MetricsRegistry>();
    std::unique_ptr<LogcServer> server;
    std::string address;
    LogcOptions options;
  };

  void StartServers(int n) {
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<Server>();
      LogcOptions& o = s->options;
      o.logc_id = std::to_string(i);
      o.dir = test::TestTempDir("log_client_test-" + std::to_string(i));
      o.persist = true;
      o.transport.cluster_secret = kSecret;
      o.memory_limit_bytes = 512ull << 20;
      s->server = std::make_unique<LogcServer>(o, s->metrics.get());
      ASSERT_TRUE(s->server->Init().ok());
      ASSERT_TRUE(s->server->Start().ok());
      s->address = s->server->address();
      servers_.push_back(std::move(s));
    }
  }
  // Stops LogC i (if it runs) and starts it again at the same address: a new process
  // (memory copies gone), with its persisted files unless `wipe` (a new disk).
  void RestartServer(size_t i, bool wipe) {
    Server& s = *servers_[i];
    if (s.server) s.server->Shutdown();
    s.server.reset();
    s.metrics = std::make_unique<MetricsRegistry>();
    if (wipe) s.options.dir = test::TestTempDir("log_client_test-wiped-" + std::to_string(i));
    s.options.transport.listen_port =
        static_cast<uint16_t>(std::stoi(s.address.substr(s.address.rfind(':') + 1)));
    s.server = std::make_unique<LogcServer>(s.options, s.metrics.get());
    Status init = s.server->Init();
    ASSERT_TRUE(init.ok()) << init.ToString();
    ASSERT_TRUE(s.server->Start().ok());
    ASSERT_EQ(s.server->address(), s.address);
  }
  // The client's transport, endpoint and LogClient (constructed before the transport starts).
  void StartClient(LogClientOptions options, MetricsRegistry* metrics = nullptr) {
    transport::TransportOptions o;
    o.node_name = "ltc-test";
    o.cluster_secret = kSecret;
    o.connect_timeout_ms = 1000;
    endpoint_ = std::make_unique<rpc::RpcEndpoint>();
    auto t = transport::NewTransport(o, endpoint_.get());
    ASSERT_TRUE(t.ok());
    transport_ = std::move(t.value());
    endpoint_->Attach(transport_.get());
    client_ = std::make_unique<LogClient>(options, endpoint_.get(), metrics);
    ASSERT_TRUE(transport_->Init().ok());
    ASSERT_TRUE(transport_->Start().ok());
    std::map<std::string, std::string> logcs;
    for (size_t i = 0; i < servers_.size(); ++i) logcs[std::to_string(i)] = servers_[i]->address;
    client_->SetLogcs(logcs);
  }
  void TearDown() override { StopAll(); }
  // The transport stops first: its peer-down events go to the client.
  void StopAll() {
    StopClient();
    servers_.clear();
  }
  // The LTC dies: its transport, endpoint and log client go; the LogCs stay.
  void StopClient() {
    if (transport_) transport_->Shutdown();
    client_.reset();
    transport_.reset();
    endpoint_.reset();
  }
  LogClientOptions Options(LogMode mode, int replicas = 2) {
    LogClientOptions o;
    o.mode = mode;
    o.replicas = replicas;
    o.segment_bytes = 1 << 20;
    o.timeout = std::chrono::milliseconds(3000);
    return o;
  }
  // Waits until `done` holds for the stats of a repair pass that began after this call:
  // the gauges (underreplicated, unsynced_logcs) are as of the last completed pass.
  bool WaitForRepair(const std::function<bool(const LogClient::Stats&)>& done) {
    const uint64_t passes = client_->GetStats().repair_passes;
    return test::WaitFor([&] {
      const LogClient::Stats st = client_->GetStats();
      return st.repair_passes >= passes + 2 && done(st);
    });
  }
  std::vector<LogClient::RecoveredLog> ReadAll(uint32_t range, std::vector<uint64_t>* missing) {
    std::vector<LogClient::RecoveredLog> logs;
    Status s = client_->ReadAll(range, 4, &logs, missing);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return logs;
  }
  const LogClient::RecoveredLog* Find(const std::vector<LogClient::RecoveredLog>& logs,
                                      uint64_t memtable) {
    for (auto& l : logs) {
      if (l.memtable == memtable) return &l;
    }
    return nullptr;
  }

  std::vector<std::unique_ptr<Server>> servers_;
  MetricsRegistry client_metrics_;  // for a test that gives the client one: outlives it
  std::unique_ptr<rpc::RpcEndpoint> endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<LogClient> client_;
};

// Writers append records to logs concurrently: writer w appends to memtable w % logs.
struct Workload {
  int writers = 8;
  int logs = 3;
  uint64_t seed = 0;
  size_t max_payload = 2000;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<uint32_t> appended;  // per writer: records appended
  std::vector<std::thread> threads;

  void Start(LogClient* client, uint32_t range, int records_each) {
    appended.assign(writers, 0);
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([this, client, range, records_each, w] {
        std::mt19937_64 rng(seed + w);
        for (int i = 0; (records_each < 0 || i < records_each) && !stop; ++i) {
          std::string r = Record(w, i, rng() % max_payload, seed);
          Status s = client->Append(range, w % logs, r);
          if (!s.ok()) {
            ADD_FAILURE() << "writer " << w << " record " << i << ": " << s.ToString();
            ++failures;
            return;
          }
          appended[w] = i + 1;
        }
      });
    }
  }
  void Join() {
    for (auto& t : threads) t.join();
    threads.clear();
  }
  // Every writer's records are in its log, in order, complete.
  void Verify(const std::vector<LogClient::RecoveredLog>& recovered) {
    std::map<uint32_t, std::vector<uint32_t>> seen;
    for (const auto& log : recovered) {
      uint64_t used = 0;
      for (auto& [w, seqs] : ParseLog(log.bytes, seed, &used)) {
        EXPECT_EQ(log.memtable, static_cast<uint64_t>(w % logs)) << "writer " << w;
        seen[w] = seqs;
      }
    }
    for (int w = 0; w < writers; ++w) {
      const auto& seqs = seen[w];
      ASSERT_GE(seqs.size(), appended[w]) << "writer " << w << " lost records";
      for (size_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], i) << "writer " << w;
    }
  }
};

TEST_F(LogClientTest, ConcurrentAppendsAreGroupCommittedAndReadBackInOrder) {
  StartServers(3);
  StartClient(Options(LogMode::kMemory));
  Workload w;
  w.seed = test::TestSeed("ConcurrentAppends");
  w.Start(client_.get(), 1, 300);
  w.Join();
  ASSERT_EQ(w.failures.load(), 0);
  LogClient::Stats stats = client_->GetStats();
  EXPECT_EQ(stats.appends, 8u * 300);
  EXPECT_LT(stats.writes, stats.appends) << "concurrent appends were not grouped";
  std::fprintf(stderr, "%llu appends in %llu writes\n", (unsigned long long)stats.appends,
               (unsigned long long)stats.writes);
  std::vector<uint64_t> missing;
  auto logs = ReadAll(1, &missing);
  EXPECT_TRUE(missing.empty());
  ASSERT_EQ(logs.size(), 3u);
  for (auto& l : logs) EXPECT_EQ(l.replicas.size(), 2u) << "memtable " << l.memtable;
  w.Verify(logs);
  // Logs are spread: 3 logs of 2 replicas use every one of the 3 LogCs (exactly 2 each when
  // the logs are opened one after the other; concurrent opens may pile up a little).
  uint64_t files = 0;
  for (auto& s : servers_) {
    EXPECT_GE(s->server->GetStats().files, 1u);
    files += s->server->GetStats().files;
  }
  EXPECT_EQ(files, 6u);
  // Another range (new: never opened) has nothing.
  std::vector<LogClient::RecoveredLog> none;
  ASSERT_TRUE(client_->ReadAll(2, 4, /*new_range=*/true, &none, &missing).ok());
  EXPECT_TRUE(none.empty());
}

// Every Append's time goes into log_client_append_us_total and the calling thread's tally
// (ThreadAppendNanos), which a server reads around a request.
TEST_F(LogClientTest, AppendsAreTimed) {
  StartServers(2);
  StartClient(Options(LogMode::kMemory), &client_metrics_);
  Counter* append_us = client_metrics_.GetCounter("log_client_append_us_total", "");
  const uint64_t before = LogClient::ThreadAppendNanos();
  constexpr int kAppends = 5;
  for (int i = 0; i < kAppends; ++i) ASSERT_TRUE(client_->Append(1, 0, "record").ok());
  const uint64_t ns = LogClient::ThreadAppendNanos() - before;
  // Each waited for WRITEs to 2 LogCs over loopback: at least a microsecond.
  EXPECT_GE(append_us->value(), static_cast<uint64_t>(kAppends));
  // The counter rounds each append to the nearest microsecond.
  EXPECT_GE(ns + kAppends * 500, append_us->value() * 1000);
  EXPECT_LE(ns, append_us->value() * 1000 + kAppends * 500);
  // Another thread's appends are counted, but not on this thread's tally.
  const uint64_t us_so_far = append_us->value();
  std::thread([&] { ASSERT_TRUE(client_->Append(1, 0, "record").ok()); }).join();
  EXPECT_GT(append_us->value(), us_so_far);
  EXPECT_EQ(LogClient::ThreadAppendNanos() - before, ns);
}

// A recovery that has some memtables' contents already (a live migration copied them)
// lists their logs without reading them; until those logs are deleted the range does not
// count as fully replicated (no LogC is marked in sync for it without them).
TEST_F(LogClientTest, LogsLeftOutByTheReadFilterAreListedNotRead) {
  StartServers(3);
  StartClient(Options(LogMode::kMemory));
  Workload w;
  w.seed = test::TestSeed("ReadFilter");
  w.Start(client_.get(), 1, 100);
  w.Join();
  ASSERT_EQ(w.failures.load(), 0);
  std::vector<uint64_t> missing;
  auto all = ReadAll(1, &missing);
  ASSERT_EQ(all.size(), 3u);
  // Another client (the range's new owner) reads all but the first log.
  StopClient();
  StartClient(Options(LogMode::kMemory));
  const uint64_t skipped = all[0].memtable;
  std::vector<LogClient::RecoveredLog> logs;
  ASSERT_TRUE(client_
                  ->ReadAll(1, 4, /*new_range=*/false,
                            [&](uint64_t m) { return m != skipped; }, &logs, &missing)
                  .ok());
  EXPECT_TRUE(missing.empty());
  ASSERT_EQ(logs.size(), 3u);
  for (const auto& l : logs) {
    if (l.memtable == skipped) {
      EXPECT_FALSE(l.read);
      EXPECT_TRUE(l.bytes.empty());
    } else {
      EXPECT_TRUE(l.read);
      EXPECT_FALSE(l.bytes.empty()) << "memtable " << l.memtable;
    }
  }
  EXPECT_TRUE(client_->HasUnreadLogs(1));
  client_->Delete(1, {skipped});
  EXPECT_FALSE(client_->HasUnreadLogs(1));
}

TEST_F(LogClientTest, SegmentsRollOverAndConcatenate) {
  for (LogMode mode : {LogMode::kMemory, LogMode::kDisk, LogMode::kMemoryDisk}) {
    SCOPED_TRACE(LogModeName(mode));
    StopAll();
    StartServers(2);
    LogClientOptions o = Options(mode);
    o.segment_bytes = 64 << 10;
    StartClient(o);
    const uint64_t seed = test::TestSeed("SegmentsRollOver");
    std::mt19937_64 rng(seed);
    std::string expected;
    for (uint32_t i = 0; i < 60; ++i) {
      // Mostly small records, and a few larger than a segment.
      const size_t payload = i % 20 == 7 ? 150000 : rng() % 9000;
      std::string r = Record(0, i, payload, seed);
      ASSERT_TRUE(client_->Append(5, 9, r).ok());
      expected += r;
    }
    auto list = [&] {
      return servers_[0]->server->GetStats().files;
    };
    EXPECT_GT(list(), 3u) << "expected several segments";
    std::vector<uint64_t> missing;
    auto logs = ReadAll(5, &missing);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_TRUE(missing.empty());
    const std::string& got = logs[0].bytes;
    ASSERT_GE(got.size(), expected.size());
    EXPECT_TRUE(got.compare(0, expected.size(), expected) == 0) << "log bytes differ";
    if (mode != LogMode::kMemory) {
      EXPECT_EQ(got.size(), expected.size());
    }
    uint64_t used = 0;
    ParseLog(got, seed, &used);
    EXPECT_EQ(used, expected.size());
  }
}

// A 64 MiB record (an LTC write of a 64 MiB value) is one append: it gets a segment of its
// own size and reads back whole in every mode (in disk mode in several kReadLog pages).
TEST_F(LogClientTest, SixtyFourMiBRecordIsAppendedAndReadBackWhole) {
  constexpr size_t kBigPayload = 64 << 20;
  for (LogMode mode : {LogMode::kMemory, LogMode::kDisk, LogMode::kMemoryDisk}) {
    SCOPED_TRACE(LogModeName(mode));
    StopAll();
    StartServers(2);
    StartClient(Options(mode));  // 1 MiB segments
    const uint64_t seed = test::TestSeed("SixtyFourMiBRecord");
    std::string expected;
    for (uint32_t i = 0; i < 3; ++i) {
      std::string r = Record(0, i, i == 1 ? kBigPayload : 1000, seed);
      Status s = client_->Append(7, 3, r);
      ASSERT_TRUE(s.ok()) << "record " << i << ": " << s.ToString();
      expected += r;
    }
    std::vector<uint64_t> missing;
    auto logs = ReadAll(7, &missing);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_TRUE(missing.empty());
    const std::string& got = logs[0].bytes;
    ASSERT_GE(got.size(), expected.size());
    EXPECT_TRUE(got.compare(0, expected.size(), expected) == 0) << "log bytes differ";
    uint64_t used = 0;
    EXPECT_EQ(ParseLog(got, seed, &used)[0].size(), 3u);
    EXPECT_EQ(used, expected.size());
  }
}

TEST_F(LogClientTest, DiskModeAcknowledgesOnlyPersistedBytes) {
  StartServers(2);
  StartClient(Options(LogMode::kDisk));
  uint64_t total = 0;
  for (uint32_t i = 0; i < 50; ++i) {
    std::string r = Record(0, i, 100 + i * 10, 1);
    ASSERT_TRUE(client_->Append(1, 1, r).ok());
    total += r.size();
    // Returned => fdatasync'd at both replicas.
    for (auto& s : servers_) ASSERT_EQ(s->server->GetStats().persisted_bytes, total);
  }
  // Concurrent appends share fsyncs.
  Workload w;
  w.seed = 2;
  w.logs = 1;
  w.Start(client_.get(), 2, 100);
  w.Join();
  ASSERT_EQ(w.failures.load(), 0);
  const auto stats = servers_[0]->server->GetStats();
  EXPECT_LT(stats.fsyncs, 50u + 8 * 100);
  std::vector<uint64_t> missing;
  auto logs = ReadAll(2, &missing);
  ASSERT_EQ(logs.size(), 1u);
  w.Verify(logs);
}

TEST_F(LogClientTest, ModeNoneIsRefused) {
  StartServers(1);
  StartClient(Options(LogMode::kNone));
  EXPECT_EQ(client_->Append(1, 1, "x").code(), Status::Code::kInvalidArgument);
}

class LogClientFailoverTest : public LogClientTest,
                              public ::testing::WithParamInterface<LogMode> {};

// With --log_min_insync_replicas=1 an operator trades durability for availability: losing
// one of two replicas fails no append (the survivor holds each write alone).
TEST_P(LogClientFailoverTest, LosingOneOfTwoReplicasFailsNoAppendWithMinInsyncOne) {
  StartServers(2);
  LogClientOptions o = Options(GetParam());
  o.min_insync_replicas = 1;
  StartClient(o);
  Workload w;
  w.seed = test::TestSeed("LosingOneReplica");
  w.writers = 4;
  w.logs = 2;
  w.Start(client_.get(), 1, -1);
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().appends >= 400; }));
  servers_[1]->server->Shutdown();
  const uint64_t at_kill = client_->GetStats().appends;
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().appends >= at_kill + 400; }));
  w.stop = true;
  w.Join();
  ASSERT_EQ(w.failures.load(), 0);
  EXPECT_GE(client_->GetStats().replica_failures, 2u);  // both logs lost a replica
  // The price: a write may now be on one LogC only, so recovery cannot go on while any
  // LogC is missing...
  std::vector<LogClient::RecoveredLog> refused;
  std::vector<uint64_t> missing;
  EXPECT_TRUE(client_->ReadAll(1, 4, &refused, &missing).IsUnavailable());
  // ...until it is back and the logs are copied to it again.
  RestartServer(1, /*wipe=*/false);
  ASSERT_TRUE(WaitForRepair([](const LogClient::Stats& st) {
    return st.underreplicated == 0 && st.unsynced_logcs == 0;
  }));
  auto logs = ReadAll(1, &missing);
  EXPECT_TRUE(missing.empty());
  ASSERT_EQ(logs.size(), 2u);
  for (auto& l : logs) EXPECT_EQ(l.replicas.size(), 2u);
  w.Verify(logs);
}

TEST_P(LogClientFailoverTest, ReReplicationRestoresTheReplicaCount) {
  StartServers(3);
  LogClientOptions o = Options(GetParam());
  o.min_insync_replicas = 1;  // so appends go on once only the copy is left
  StartClient(o);
  Workload w;
  w.seed = test::TestSeed("ReReplication");
  w.writers = 4;
  w.logs = 1;
  w.Start(client_.get(), 1, -1);
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().appends >= 300; }));
  // The log's replicas: the two LogCs holding a file.
  std::vector<int> holders;
  for (int i = 0; i < 3; ++i) {
    if (servers_[i]->server->GetStats().files > 0) holders.push_back(i);
  }
  ASSERT_EQ(holders.size(), 2u);
  servers_[holders[0]]->server->Shutdown();
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().rereplications > 0; }));
  const uint64_t at_copy = client_->GetStats().appends;
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().appends >= at_copy + 300; }));
  // The range is fully replicated again: the copy's LogC is marked in sync.
  ASSERT_TRUE(WaitForRepair([](const LogClient::Stats& st) {
    return st.underreplicated == 0 && st.unsynced_logcs <= 1;  // the dead LogC
  }));
  // Now the other original replica goes too: the copy alone holds the log.
  servers_[holders[1]]->server->Shutdown();
  const uint64_t at_second = client_->GetStats().appends;
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().appends >= at_second + 100; }));
  w.stop = true;
  w.Join();
  ASSERT_EQ(w.failures.load(), 0);
  const int spare = 3 - holders[0] - holders[1];
  // Recovery refuses while as many LogCs as a write was acknowledged on cannot be listed
  // (one of them might hold a log no other has); the copy alone holds everything.
  std::vector<LogClient::RecoveredLog> refused;
  std::vector<uint64_t> missing;
  EXPECT_TRUE(client_->ReadAll(1, 4, &refused, &missing).IsUnavailable());
  client_->SetLogcs({{std::to_string(spare), servers_[spare]->address}});
  auto logs = ReadAll(1, &missing);
  EXPECT_TRUE(missing.empty());
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].replicas, std::vector<std::string>{std::to_string(spare)});
  w.Verify(logs);
}

INSTANTIATE_TEST_SUITE_P(Modes, LogClientFailoverTest,
                         ::testing::Values(LogMode::kMemory, LogMode::kDisk,
                                           LogMode::kMemoryDisk),
                         [](const auto& info) {
                           return std::string(info.param == LogMode::kMemory ? "Memory"
                                              : info.param == LogMode::kDisk ? "Disk"
                                                                             : "MemoryDisk");
                         });

// Recovery must not go on without a log it cannot see: with one replica per log, a LogC
// that cannot be listed may hold a log no other has, so ReadAll refuses (the LTC retries
// the range's open); with two replicas one LogC down is fine.
TEST_F(LogClientTest, RecoveryRefusesWhenAReplicaCountOfLogcsIsUnreachable) {
  StartServers(2);
  StartClient(Options(LogMode::kMemory, 1));
  ASSERT_TRUE(client_->Append(1, 1, Record(0, 0, 10, 1)).ok());
  ASSERT_TRUE(client_->Append(1, 2, Record(0, 0, 10, 1)).ok());
  // With one replica each, the logs sit on different LogCs; lose one.
  ASSERT_EQ(servers_[0]->server->GetStats().files, 1u);
  servers_[0]->server->Shutdown();
  std::vector<LogClient::RecoveredLog> logs;
  std::vector<uint64_t> missing;
  Status s = client_->ReadAll(1, 4, &logs, &missing);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.ToString().find("cannot vouch"), std::string::npos) << s.ToString();
  EXPECT_EQ(client_->GetStats().recovery_refusals, 1u);
}

TEST_F(LogClientTest, RecoveryGoesOnWithOneOfTwoReplicasUnreachable) {
  StartServers(3);
  StartClient(Options(LogMode::kMemory, 2));
  for (uint64_t m = 1; m <= 3; ++m) ASSERT_TRUE(client_->Append(1, m, Record(0, 0, 10, 1)).ok());
  servers_[1]->server->Shutdown();
  std::vector<uint64_t> missing;
  auto logs = ReadAll(1, &missing);
  EXPECT_EQ(logs.size(), 3u);
  EXPECT_TRUE(missing.empty());
}

// With min_insync_replicas = R (the default), a write is never acknowledged with fewer
// copies: with one of two LogCs down an append waits for it (up to the timeout), then fails
// with Unavailable; nothing is acknowledged on the survivor alone.
TEST_F(LogClientTest, AppendsWaitForMinInsyncReplicasThenFail) {
  StartServers(2);
  LogClientOptions o = Options(LogMode::kMemory);
  o.timeout = std::chrono::milliseconds(500);
  StartClient(o);
  ASSERT_TRUE(client_->Append(1, 1, Record(0, 0, 100, 1)).ok());
  servers_[1]->server->Shutdown();
  // Once the client knows (else the append may still send to both and learn of the loss
  // only then: it reached LogC 0, which is the other case).
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().replica_failures >= 1; },
                      std::chrono::seconds(10)));
  const MonoTime start = MonoNow();
  bool reached = true;
  Status s = client_->Append(1, 1, Record(0, 1, 100, 1), &reached);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_FALSE(reached) << "nothing was sent: the caller may drop the write";
  EXPECT_NE(s.ToString().find("--log_min_insync_replicas"), std::string::npos) << s.ToString();
  EXPECT_GE(MonoNow() - start, std::chrono::milliseconds(400)) << "it did not wait";
  // A new log cannot be acknowledged either.
  EXPECT_TRUE(client_->Append(1, 2, Record(0, 0, 100, 1)).IsUnavailable());
}

// A dead LogC still in the configuration never holds up re-replication: once its retry
// interval has passed it is eligible again, and it used to win the choice over a healthy
// spare whenever their open logs tied (the lower id), every repair pass, each costing a
// connect attempt. Now a LogC whose connection is down is chosen only when nothing else is.
TEST_F(LogClientTest, DeadLogcDoesNotHoldUpACopyToASpare) {
  StartServers(3);
  LogClientOptions o = Options(LogMode::kMemory, 2);
  o.retry_interval = std::chrono::milliseconds(0);  // a failed LogC is eligible at once
  StartClient(o);
  ASSERT_TRUE(client_->Append(1, 1, Record(0, 0, 100, 1)).ok());
  // Ties go to the lower ids: the log is at LogCs 0 and 1; 2 is the spare.
  ASSERT_GT(servers_[0]->server->GetStats().files, 0u);
  ASSERT_GT(servers_[1]->server->GetStats().files, 0u);
  ASSERT_EQ(servers_[2]->server->GetStats().files, 0u);
  servers_[0]->server->Shutdown();
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().rereplications > 0; },
                            std::chrono::seconds(5)))
      << "the idle log was not copied to the spare";
  EXPECT_GT(servers_[2]->server->GetStats().files, 0u);
  EXPECT_EQ(client_->GetStats().underreplicated, 0u);
}

// A LogC that comes back is used at once: an append waiting for a second replica completes
// as soon as the LogC restarts (no cool-down), and the log has both replicas again.
TEST_F(LogClientTest, ReturningLogcIsUsedAtOnce) {
  for (LogMode mode : {LogMode::kMemory, LogMode::kDisk}) {
    SCOPED_TRACE(LogModeName(mode));
    StopAll();
    StartServers(2);
    LogClientOptions o = Options(mode);
    o.timeout = std::chrono::milliseconds(5000);
    StartClient(o);
    ASSERT_TRUE(client_->Append(1, 1, Record(0, 0, 100, 1)).ok());
    servers_[0]->server->Shutdown();
    std::atomic<bool> done{false};
    Status appended;
    std::thread writer([&] {
      appended = client_->Append(1, 1, Record(0, 1, 100, 1));
      done = true;
    });
    // The append waits while only one replica is live.
    EXPECT_FALSE(test::WaitFor([&] { return done.load(); }, std::chrono::milliseconds(300)));
    const MonoTime back = MonoNow();
    RestartServer(0, /*wipe=*/false);
    writer.join();
    EXPECT_TRUE(appended.ok()) << appended.ToString();
    EXPECT_LT(MonoNow() - back, std::chrono::milliseconds(3000));
    std::vector<uint64_t> missing;
    auto logs = ReadAll(1, &missing);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_EQ(logs[0].replicas.size(), 2u);
    uint64_t used = 0;
    EXPECT_EQ(ParseLog(logs[0].bytes, 1, &used)[0].size(), 2u);
  }
}

// Issue 20's loss, in one process: a log that goes idle (its memtable is immutable) lost a
// replica when a memory LogC restarted; the background repairer copies it back at once, so
// the other LogC failing next loses nothing.
TEST_F(LogClientTest, IdleLogIsReReplicatedWhenItsLogcReturns) {
  StartServers(2);
  StartClient(Options(LogMode::kMemory));
  const uint64_t seed = test::TestSeed("IdleLogReReplicated");
  std::string expected;
  for (uint32_t i = 0; i < 20; ++i) {
    std::string r = Record(0, i, 50 + i, seed);
    ASSERT_TRUE(client_->Append(1, 4, r).ok());
    expected += r;
  }
  RestartServer(0, /*wipe=*/false);  // memory copies gone
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().rereplications >= 1; }))
      << "the idle log was not re-replicated to the returning LogC";
  ASSERT_TRUE(WaitForRepair([](const LogClient::Stats& st) {
    return st.underreplicated == 0 && st.unsynced_logcs == 0;
  })) << "the returning LogC was not marked in sync";
  servers_[1]->server->Shutdown();
  std::vector<uint64_t> missing;
  auto logs = ReadAll(1, &missing);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(logs[0].bytes.substr(0, expected.size()), expected);
}

// Recovery by a new LTC (a new client) refuses while the only LogCs that can vouch for
// their logs are not enough: a LogC with a new disk (not in sync) and one unreachable. It
// goes on as soon as the unreachable one returns with its files, and finds every write;
// forced (an operator's decision) it goes on without, saying what is lost.
TEST_F(LogClientTest, RecoveryWaitsUntilALogcThatCanVouchIsBack) {
  StartServers(2);
  StartClient(Options(LogMode::kDisk));
  const std::string r = Record(0, 0, 100, 3);
  ASSERT_TRUE(client_->Append(1, 9, r).ok());
  // The LTC dies; LogC 0 comes back with a new, empty disk; LogC 1 is down.
  StopClient();
  RestartServer(0, /*wipe=*/true);
  servers_[1]->server->Shutdown();
  StartClient(Options(LogMode::kDisk));
  std::vector<LogClient::RecoveredLog> logs;
  std::vector<uint64_t> missing;
  Status s = client_->ReadAll(1, 2, &logs, &missing);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.ToString().find("not in sync"), std::string::npos) << s.ToString();
  // And it stays refused: nothing (the repairer included) marks the new disk in sync for
  // a range whose recovery has not gone on.
  EXPECT_FALSE(test::WaitFor([&] { return client_->ReadAll(1, 2, &logs, &missing).ok(); },
                             std::chrono::milliseconds(600)));
  RestartServer(1, /*wipe=*/false);
  logs = ReadAll(1, &missing);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].bytes, r);
  EXPECT_EQ(logs[0].replicas, std::vector<std::string>{"1"});
  // The log read back is re-replicated (to LogC 0) and both LogCs end in sync.
  ASSERT_TRUE(test::WaitFor([&] { return client_->GetStats().rereplications >= 1; }));
  ASSERT_TRUE(WaitForRepair([](const LogClient::Stats& st) {
    return st.underreplicated == 0 && st.unsynced_logcs == 0;
  }));
  logs = ReadAll(1, &missing);
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].replicas.size(), 2u);

  // Every copy lost for good (memory mode, both LogCs restarted): refused, unless forced.
  StopAll();
  StartServers(2);
  StartClient(Options(LogMode::kMemory));
  ASSERT_TRUE(client_->Append(2, 1, r).ok());
  StopClient();
  RestartServer(0, false);
  RestartServer(1, false);
  StartClient(Options(LogMode::kMemory));
  EXPECT_TRUE(client_->ReadAll(2, 2, &logs, &missing).IsUnavailable());
  EXPECT_FALSE(test::WaitFor([&] { return client_->ReadAll(2, 2, &logs, &missing).ok(); },
                             std::chrono::milliseconds(600)));
  StopClient();
  LogClientOptions forced = Options(LogMode::kMemory);
  forced.force_recovery_ranges = {2};
  StartClient(forced);
  ASSERT_TRUE(client_->ReadAll(2, 2, &logs, &missing).ok());
  EXPECT_TRUE(logs.empty());
}

// Every copy of a memory log is a prefix of one stream, and a memory file does not know its
// length: a copy holding less (a replica dropped after a timeout, a copy cut short) must
// never be taken for the whole log, whichever LogC is listed first.
TEST_F(LogClientTest, ShorterMemoryCopyIsNeverPreferred) {
  StartServers(2);
  StartClient(Options(LogMode::kMemory));
  std::string expected;
  for (uint32_t i = 0; i < 10; ++i) {
    std::string rec = Record(0, i, 200, 5);
    ASSERT_TRUE(client_->Append(3, 1, rec).ok());
    expected += rec;
  }
  for (int shorter = 0; shorter < 2; ++shorter) {
    SCOPED_TRACE("shorter copy at LogC " + std::to_string(shorter));
    // Zero the last half of one copy with a one-sided WRITE (what it would hold had it been
    // dropped half-way).
    auto peer = transport_->Connect(servers_[shorter]->address);
    ASSERT_TRUE(peer.ok());
    auto listed = endpoint_->CallSync(peer.value(), kListLogs, Encode(ListLogsRequest{3}),
                                      std::chrono::seconds(5));
    ASSERT_TRUE(listed.ok());
    ListLogsResponse list;
    ASSERT_TRUE(Decode(listed.value(), &list).ok());
    ASSERT_EQ(list.files.size(), 1u);
    const uint64_t half = expected.size() / 2;
    const transport::RemoteAddr at{list.files[0].addr.addr + half, list.files[0].addr.rkey};
    // One-sided WRITE of `bytes` at `at` in the copy.
    auto write_at = [&](std::string bytes) {
      auto mr = transport_->RegisterMemory(bytes.data(), bytes.size(), transport::kLocalOnly);
      ASSERT_TRUE(mr.ok());
      std::promise<Status> done;
      ASSERT_TRUE(transport_
                      ->Write(peer.value(), mr.value(), 0, bytes.size(), at, std::nullopt,
                              [&](const Status& st) { done.set_value(st); })
                      .ok());
      ASSERT_TRUE(done.get_future().get().ok());
      transport_->DeregisterMemory(mr.value()).IgnoreError();
    };
    ASSERT_NO_FATAL_FAILURE(write_at(std::string(expected.size() - half, '\0')));
    std::vector<uint64_t> missing;
    auto logs = ReadAll(3, &missing);
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_EQ(logs[0].bytes.substr(0, expected.size()), expected);
    EXPECT_EQ(logs[0].replicas, std::vector<std::string>{std::to_string(1 - shorter)});
    // Restore the copy for the next round.
    ASSERT_NO_FATAL_FAILURE(write_at(expected.substr(half)));
  }
}

TEST_F(LogClientTest, DeleteRemovesLogsEverywhere) {
  StartServers(3);
  StartClient(Options(LogMode::kMemoryDisk));
  for (uint64_t m = 1; m <= 3; ++m) ASSERT_TRUE(client_->Append(7, m, Record(0, 0, 100, m)).ok());
  std::vector<uint64_t> missing;
  ASSERT_EQ(ReadAll(7, &missing).size(), 3u);
  client_->Delete(7, {1, 3});
  ASSERT_TRUE(test::WaitFor([&] {
    auto logs = ReadAll(7, &missing);
    return logs.size() == 1 && logs[0].memtable == 2 && missing.empty();
  }));
  client_->Delete(7, {2});
  ASSERT_TRUE(test::WaitFor([&] { return ReadAll(7, &missing).empty() && missing.empty(); }));
  for (auto& s : servers_) {
    EXPECT_TRUE(test::WaitFor([&] { return s->server->GetStats().files == 0; }));
  }
}

}  // namespace
}  // namespace nova::logc
