// Owner fencing end to end (docs/logc.md "Fencing"): two LogClients on their own endpoints
// play the old owner A and the new owner B of one range over the same in-process LogCs, in
// memory and disk mode. B's fence must leave A no way to acknowledge, copy or delete
// anything more of the range, and B (and any later recovery) must read exactly what A had
// acknowledged before the fence.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/coding.h"
#include "logc/client/log_client.h"
#include "logc/server/logc_server.h"
#include "tests/util/test_util.h"

namespace nova::logc {
namespace {

constexpr char kSecret[] = "log-fencing-test-secret";
constexpr uint32_t kRange = 7;

// A record: [len u32][seq u32][payload of `seq`-derived bytes]; a zero length ends a log.
std::string Record(uint32_t seq) {
  std::string r;
  const size_t payload = 100 + seq % 50;
  PutFixed32(&r, static_cast<uint32_t>(8 + payload));
  PutFixed32(&r, seq);
  for (size_t i = 0; i < payload; ++i) r.push_back(static_cast<char>('a' + (seq + i) % 26));
  return r;
}

// The sequence numbers of the records in `bytes`; fails the test on a malformed record. A
// record cut off by the end is dropped (a torn tail: an append never acknowledged, whose
// next segment was never opened), as the LTC's log reader does.
std::vector<uint32_t> Parse(const std::string& bytes) {
  std::vector<uint32_t> seqs;
  size_t p = 0;
  while (p + 8 <= bytes.size()) {
    const uint32_t len = DecodeFixed32(bytes.data() + p);
    if (len == 0) break;
    if (len < 8) {
      ADD_FAILURE() << "malformed record at " << p;
      break;
    }
    if (p + len > bytes.size()) break;  // torn tail
    const uint32_t seq = DecodeFixed32(bytes.data() + p + 4);
    EXPECT_EQ(bytes.substr(p, len), Record(seq)) << "record " << seq;
    seqs.push_back(seq);
    p += len;
  }
  return seqs;
}

std::vector<uint32_t> Seqs(uint32_t from, uint32_t to) {
  std::vector<uint32_t> v;
  for (uint32_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// One LTC: its transport, endpoint and log client.
struct Ltc {
  std::unique_ptr<rpc::RpcEndpoint> endpoint;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<LogClient> client;
  ~Ltc() {
    if (transport) transport->Shutdown();  // its events reach the client: it goes first
    client.reset();
  }
};

class LogFencingTest : public ::testing::TestWithParam<LogMode> {
 protected:
  void StartServers(int n) {
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<Server>();
      LogcOptions& o = s->options;
      o.logc_id = std::to_string(i);
      o.dir = test::TestTempDir("log_fencing_test-" + std::to_string(i));
      o.persist = true;
      o.transport.cluster_secret = kSecret;
      o.memory_limit_bytes = 256ull << 20;
      s->server = std::make_unique<LogcServer>(o, s->metrics.get());
      ASSERT_TRUE(s->server->Init().ok());
      ASSERT_TRUE(s->server->Start().ok());
      s->address = s->server->address();
      servers_.push_back(std::move(s));
    }
  }
  void StopServer(size_t i) {
    servers_[i]->server->Shutdown();
    servers_[i]->server.reset();
  }
  std::unique_ptr<Ltc> StartLtc(const std::string& name, int min_insync = 0) {
    auto ltc = std::make_unique<Ltc>();
    transport::TransportOptions o;
    o.node_name = name;
    o.cluster_secret = kSecret;
    o.connect_timeout_ms = 1000;
    ltc->endpoint = std::make_unique<rpc::RpcEndpoint>();
    auto t = transport::NewTransport(o, ltc->endpoint.get());
    EXPECT_TRUE(t.ok());
    if (!t.ok()) return nullptr;
    ltc->transport = std::move(t.value());
    ltc->endpoint->Attach(ltc->transport.get());
    LogClientOptions lo;
    lo.mode = GetParam();
    lo.replicas = 2;
    lo.min_insync_replicas = min_insync;
    lo.segment_bytes = 64 << 10;
    lo.timeout = std::chrono::milliseconds(3000);
    ltc->client = std::make_unique<LogClient>(lo, ltc->endpoint.get(), nullptr);
    EXPECT_TRUE(ltc->transport->Init().ok());
    EXPECT_TRUE(ltc->transport->Start().ok());
    std::map<std::string, std::string> logcs;
    for (size_t i = 0; i < servers_.size(); ++i) logcs[std::to_string(i)] = servers_[i]->address;
    ltc->client->SetLogcs(logcs);
    return ltc;
  }
  // Reads the range as `ltc` and returns memtable -> record sequence numbers.
  std::map<uint64_t, std::vector<uint32_t>> ReadAll(Ltc* ltc) {
    std::vector<LogClient::RecoveredLog> logs;
    std::vector<uint64_t> missing;
    Status s = ltc->client->ReadAll(kRange, 2, &logs, &missing);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(missing.empty());
    std::map<uint64_t, std::vector<uint32_t>> out;
    for (const auto& l : logs) out[l.memtable] = Parse(l.bytes);
    return out;
  }
  uint64_t FilesAtLogcs() {
    uint64_t n = 0;
    for (auto& s : servers_) {
      if (s->server) n += s->server->GetStats().files;
    }
    return n;
  }

  struct Server {
    std::unique_ptr<MetricsRegistry> metrics = std::make_unique<MetricsRegistry>();
    std::unique_ptr<LogcServer> server;
    std::string address;
    LogcOptions options;
  };
  // Declared first: destroyed after the LTCs (their transports shut down first).
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_P(LogFencingTest, NewOwnerReadsEverythingAcknowledgedAndTheOldOneIsFencedOff) {
  StartServers(2);
  auto a = StartLtc("ltc-a");
  auto b = StartLtc("ltc-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->client->FenceRange(kRange, 1).ok());
  // A appends to two memtables (each spans several 64 KiB segments).
  constexpr uint32_t kBefore = 1500;
  for (uint32_t i = 0; i < kBefore; ++i) {
    Status s = a->client->Append(kRange, 10 + i % 2, Record(i));
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
  }
  const uint64_t files = FilesAtLogcs();

  // B, the new owner, fences and reads everything A acknowledged.
  ASSERT_TRUE(b->client->FenceRange(kRange, 2).ok());
  auto read = ReadAll(b.get());
  ASSERT_EQ(read.size(), 2u);
  std::vector<uint32_t> even, odd;
  for (uint32_t i = 0; i < kBefore; ++i) (i % 2 == 0 ? even : odd).push_back(i);
  EXPECT_EQ(read[10], even);
  EXPECT_EQ(read[11], odd);

  // A's next append is refused Fenced, in a log it had and in a new one, and stays so.
  EXPECT_FALSE(a->client->IsFenced(kRange));
  Status s = a->client->Append(kRange, 10, Record(kBefore));
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_TRUE(a->client->IsFenced(kRange));
  EXPECT_TRUE(a->client->Append(kRange, 10, Record(kBefore + 1)).IsFenced());
  EXPECT_TRUE(a->client->Append(kRange, 12, Record(kBefore + 2)).IsFenced());
  EXPECT_FALSE(b->client->IsFenced(kRange));
  std::vector<LogClient::RecoveredLog> logs;
  std::vector<uint64_t> missing;
  EXPECT_TRUE(a->client->ReadAll(kRange, 1, &logs, &missing).IsFenced());

  // A deletes, repairs and forgets nothing of the range at the LogCs.
  a->client->Delete(kRange, {10, 11});
  const uint64_t passes = a->client->GetStats().repair_passes;
  const uint64_t copies = a->client->GetStats().rereplications;
  ASSERT_TRUE(test::WaitFor([&] { return a->client->GetStats().repair_passes >= passes + 2; }));
  EXPECT_EQ(a->client->GetStats().rereplications, copies);
  a->client->ForgetRange(kRange);
  EXPECT_EQ(FilesAtLogcs(), files);

  // A stale fence is refused, and marks its sender fenced.
  EXPECT_TRUE(a->client->FenceRange(kRange, 1).IsFenced());

  // A later recovery (a third owner) reads what B read: none of A's bytes after the fence.
  auto c = StartLtc("ltc-c");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->client->FenceRange(kRange, 3).ok());
  auto again = ReadAll(c.get());
  EXPECT_EQ(again, read);
  // B is the old owner now.
  EXPECT_TRUE(b->client->FenceRange(kRange, 2).IsFenced());
  EXPECT_TRUE(b->client->IsFenced(kRange));

  // The new owner writes on: its own logs, and appends after the recovered ones' memtables.
  for (uint32_t i = 0; i < 50; ++i) ASSERT_TRUE(c->client->Append(kRange, 20, Record(i)).ok());
  c->client->Delete(kRange, {10, 11});
  ASSERT_TRUE(test::WaitFor([&] { return FilesAtLogcs() < files; }));
}

TEST_P(LogFencingTest, FencedWhileAppending) {
  // A's appends race B's fence: every append A had acknowledged is read by B, the first
  // one refused is Fenced, and nothing A appended after that is ever read.
  StartServers(2);
  auto a = StartLtc("ltc-a");
  auto b = StartLtc("ltc-b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->client->FenceRange(kRange, 1).ok());
  std::atomic<uint32_t> acked{0};
  Status last;
  std::thread writer([&] {
    for (uint32_t i = 0;; ++i) {
      Status s = a->client->Append(kRange, 10, Record(i));
      if (!s.ok()) {
        last = s;
        return;
      }
      acked = i + 1;
    }
  });
  ASSERT_TRUE(test::WaitFor([&] { return acked.load() >= 200; }));
  ASSERT_TRUE(b->client->FenceRange(kRange, 2).ok());
  const uint32_t acked_at_fence = acked.load();
  writer.join();
  EXPECT_TRUE(last.IsFenced()) << last.ToString();
  const uint32_t total_acked = acked.load();
  EXPECT_GE(total_acked, acked_at_fence);
  auto read = ReadAll(b.get());
  // What was acknowledged (some acknowledgments may reach the writer after the fence
  // answered: their WRITEs completed before it), and perhaps the one append that was
  // refused: its WRITE may have completed at a LogC fenced after it, and recovery reads
  // the longest copy (docs/logc.md "Fencing": such a record was never acknowledged).
  // Nothing later: A's turn stopped at the first Fenced.
  const std::vector<uint32_t> got = read[10];
  EXPECT_TRUE(got == Seqs(0, total_acked) || got == Seqs(0, total_acked + 1))
      << got.size() << " records read, " << total_acked << " acknowledged";
  auto c = StartLtc("ltc-c");
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->client->FenceRange(kRange, 3).ok());
  EXPECT_EQ(ReadAll(c.get()), read);
}

TEST_P(LogFencingTest, FenceNeedsAllButMinInsyncMinusOneLogcs) {
  StartServers(2);
  // M = 1: an acknowledged write may be on one LogC only, so both must confirm.
  auto b = StartLtc("ltc-b", /*min_insync=*/1);
  ASSERT_TRUE(b);
  StopServer(1);
  Status s = b->client->FenceRange(kRange, 2);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.ToString().find("not confirmed: 1 ("), std::string::npos) << s.ToString();
  // M = 2 (every write on both): one confirmation leaves the old owner one LogC, too few.
  auto c = StartLtc("ltc-c");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->client->FenceRange(kRange, 3).ok());
}

// The range comes back to the client that owned it before (A -> A at a newer epoch, after
// a tenure it missed or a restart of the range): its older logs are read back, not kept
// with the regions the fence made read-only, and it writes on.
TEST_P(LogFencingTest, TheSameClientOwnsTheRangeAgain) {
  StartServers(2);
  auto a = StartLtc("ltc-a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->client->FenceRange(kRange, 1).ok());
  for (uint32_t i = 0; i < 300; ++i) ASSERT_TRUE(a->client->Append(kRange, 10, Record(i)).ok());
  a->client->ForgetRange(kRange);
  ASSERT_TRUE(a->client->FenceRange(kRange, 3).ok());
  auto read = ReadAll(a.get());
  EXPECT_EQ(read[10], Seqs(0, 300));
  for (uint32_t i = 0; i < 100; ++i) ASSERT_TRUE(a->client->Append(kRange, 11, Record(i)).ok());
  EXPECT_FALSE(a->client->IsFenced(kRange));
  const uint64_t files = FilesAtLogcs();
  a->client->Delete(kRange, {10});
  ASSERT_TRUE(test::WaitFor([&] { return FilesAtLogcs() < files; }));
}

INSTANTIATE_TEST_SUITE_P(Modes, LogFencingTest, ::testing::Values(LogMode::kMemory, LogMode::kDisk),
                         [](const ::testing::TestParamInfo<LogMode>& info) {
                           return info.param == LogMode::kMemory ? "Memory" : "Disk";
                         });

}  // namespace
}  // namespace nova::logc
