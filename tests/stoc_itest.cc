// Multi-process StoC tests: real nova_stoc daemons over the tcp transport, killed with -9,
// restarted, run out of disk, and slowed down with a fault point.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/rpc/rpc_endpoint.h"
#include "stoc/client/placement.h"
#include "stoc/client/stoc_client.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kBufBytes = 16 << 20;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// One client process-worth of state: transport, endpoint, StoC client and buffers.
struct Client {
  // connect_timeout_ms: the transport's (0 = its default).
  Client(const std::string& name, const std::string& secret, int connect_timeout_ms = 0) {
    transport::TransportOptions o;
    o.node_name = name;
    o.cluster_secret = secret;
    if (connect_timeout_ms > 0) o.connect_timeout_ms = connect_timeout_ms;
    o.reconnect_initial_backoff_ms = 20;
    o.reconnect_max_backoff_ms = 200;
    auto t = transport::NewTransport(o, &endpoint);
    EXPECT_TRUE(t.ok());
    transport = std::move(t.value());
    endpoint.Attach(transport.get());
    client = std::make_unique<StocClient>(&endpoint, StocClientOptions{10s});
    EXPECT_TRUE(transport->Init().ok());
    EXPECT_TRUE(transport->Start().ok());
    src.reset(new char[kBufBytes]);
    dst.reset(new char[kBufBytes]);
    src_mr = transport->RegisterMemory(src.get(), kBufBytes, transport::kLocalOnly).value();
    dst_mr = transport->RegisterMemory(dst.get(), kBufBytes, transport::kRemoteWrite).value();
  }
  ~Client() { transport->Shutdown(); }
  // Fills src[0, n) from a seed; returns the CRC.
  uint32_t Fill(uint64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < n; i += 8) {
      uint64_t v = rng();
      std::memcpy(src.get() + i, &v, std::min<uint64_t>(8, n - i));
    }
    return crc32c::Value(src.get(), n);
  }
  // Reads a block back and returns its CRC (or the error).
  Result<uint32_t> ReadCrc(const BlockHandle& h) {
    Status s = client->Read(h, dst_mr, 0);
    if (!s.ok()) return s;
    return crc32c::Value(dst.get(), h.size);
  }

  rpc::RpcEndpoint endpoint;
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<StocClient> client;
  std::unique_ptr<char[]> src, dst;
  transport::MemoryRegion src_mr, dst_mr;
};

struct Acked {
  BlockHandle handle;
  uint32_t crc;
};

class StocClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::TestTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_file_ = secret.value();
    secret_ = ReadFile(secret_file_);
  }

  test::ExternalDaemon* StartStoc(uint32_t id, std::vector<std::string> flags = {},
                                  std::optional<uint64_t> file_limit = std::nullopt) {
    flags.insert(flags.begin(), {"--stoc_memory_limit_mb=1024", "--stoc_file_buffer_mb=128"});
    test::ExternalDaemonOptions o = test::StocDaemonOptions(dir_, secret_file_, id, flags);
    o.file_size_limit_bytes = file_limit;
    auto d = std::make_unique<test::ExternalDaemon>(o);
    Status s = d->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return nullptr;
    stocs_[id] = std::move(d);
    return stocs_[id].get();
  }

  std::unique_ptr<Client> NewClient(const std::string& name) {
    auto c = std::make_unique<Client>(name, secret_);
    for (auto& [id, d] : stocs_) EXPECT_TRUE(c->client->AddStoc(id, d->address()).ok());
    return c;
  }

  std::string dir_, secret_file_, secret_;
  std::map<uint32_t, std::unique_ptr<test::ExternalDaemon>> stocs_;
};

TEST_F(StocClusterTest, ManyClientsAppendReadDeleteMemoryAndDiskFiles) {
  const uint64_t seed = test::TestSeed("ManyClientsAppendReadDeleteMemoryAndDiskFiles");
  for (uint32_t id = 0; id < 3; ++id) ASSERT_TRUE(StartStoc(id));
  constexpr int kClients = 4, kBlocksPerClient = 600;
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(NewClient("client-" + std::to_string(c)));

  std::vector<std::vector<Acked>> acked(kClients);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      Client& cl = *clients[c];
      std::mt19937_64 rng(seed + c);
      std::vector<std::unique_ptr<StocFile>> files;
      for (uint32_t s = 0; s < 3; ++s) {
        for (FileKind kind : {FileKind::kDisk, FileKind::kMemory}) {
          auto f = cl.client->Open(s, "c" + std::to_string(c) + "-s" + std::to_string(s) +
                                          (kind == FileKind::kDisk ? "-disk" : "-mem"),
                                   kind, OpenOptions{true, true, 256 << 10});
          if (!f.ok()) {
            ++errors;
            ADD_FAILURE() << f.status().ToString();
            return;
          }
          files.push_back(std::move(f.value()));
        }
      }
      for (int i = 0; i < kBlocksPerClient; ++i) {
        // Mostly small blocks, a few up to 16 MiB; 1 B blocks too.
        const uint64_t r = rng() % 100;
        const uint64_t size = r < 5    ? 1
                              : r < 97 ? 1 + rng() % (64 << 10)
                                       : 1 + rng() % kBufBytes;
        StocFile* f = files[rng() % files.size()].get();
        const uint32_t crc = cl.Fill(size, rng());
        auto h = cl.client->Append(f, cl.src_mr, 0, size);
        if (!h.ok()) {
          ++errors;
          ADD_FAILURE() << "client " << c << " append " << size << ": " << h.status().ToString();
          continue;
        }
        acked[c].push_back({h.value(), crc});
      }
      for (auto& f : files) EXPECT_TRUE(cl.client->Close(f.get()).ok());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors.load(), 0);

  // Every block reads back identically, from any client.
  int checked = 0;
  for (int c = 0; c < kClients; ++c) {
    Client& reader = *clients[(c + 1) % kClients];
    for (const Acked& a : acked[c]) {
      auto crc = reader.ReadCrc(a.handle);
      ASSERT_TRUE(crc.ok()) << crc.status().ToString();
      ASSERT_EQ(crc.value(), a.crc);
      ++checked;
    }
  }
  EXPECT_EQ(checked, kClients * kBlocksPerClient);

  // Delete everything; reads then fail with NotFound and the listings are empty.
  Client& admin = *clients[0];
  for (uint32_t s = 0; s < 3; ++s) {
    auto list = admin.client->List(s);
    ASSERT_TRUE(list.ok());
    EXPECT_EQ(list->size(), static_cast<size_t>(kClients * 2));
    for (const FileState& f : list.value()) ASSERT_TRUE(admin.client->Delete(s, f.name).ok());
    list = admin.client->List(s);
    ASSERT_TRUE(list.ok());
    EXPECT_TRUE(list->empty());
  }
  auto gone = admin.ReadCrc(acked[0].front().handle);
  EXPECT_TRUE(gone.status().IsNotFound()) << gone.status().ToString();
}

TEST_F(StocClusterTest, KilledStocKeepsEveryAcknowledgedBlock) {
  const uint64_t seed = test::TestSeed("KilledStocKeepsEveryAcknowledgedBlock");
  test::ExternalDaemon* stoc = StartStoc(0);
  ASSERT_TRUE(stoc);
  auto client = NewClient("writer");
  std::mt19937_64 rng(seed);
  std::vector<Acked> acked;
  std::mutex mu;
  constexpr int kRounds = 3, kWriters = 2;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<int> acked_this_round{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      const uint64_t wseed = rng();
      writers.emplace_back([&, w, wseed] {
        // Each writer has its own file and buffer region (src is shared: use halves).
        auto f = client->client->Open(0, "crash-" + std::to_string(w), FileKind::kDisk,
                                      OpenOptions{true, true, 1 << 20});
        if (!f.ok()) return;
        std::mt19937_64 wr(wseed);
        const uint64_t base = w * (8 << 20);
        // Bounded in count and time: stop after a kill, at most 5000 appends.
        for (int i = 0; i < 5000 && !stop; ++i) {
          const uint64_t size = 1 + wr() % (1 << 20);
          std::mt19937_64 fill(wr());
          for (uint64_t k = 0; k < size; ++k) client->src[base + k] = static_cast<char>(fill());
          const uint32_t crc = crc32c::Value(client->src.get() + base, size);
          auto h = client->client->Append(f.value().get(), client->src_mr, base, size);
          if (!h.ok()) break;  // the StoC died under us
          std::lock_guard l(mu);
          acked.push_back({h.value(), crc});
          ++acked_this_round;
        }
      });
    }
    // Kill -9 at a random moment after some appends were acknowledged.
    const int kill_after = 20 + static_cast<int>(rng() % 80);
    ASSERT_TRUE(test::WaitFor([&] { return acked_this_round.load() >= kill_after; }, 60s));
    stoc->Kill();
    stop = true;
    for (auto& t : writers) t.join();
    ASSERT_TRUE(stoc->Restart().ok());
    // The client's transport reconnects to the same address by itself.
    ASSERT_TRUE(test::WaitFor([&] { return client->client->Stats(0).ok(); }, 30s));
    std::lock_guard l(mu);
    for (const Acked& a : acked) {
      auto crc = client->ReadCrc(a.handle);
      ASSERT_TRUE(crc.ok()) << "round " << round << ": " << crc.status().ToString();
      ASSERT_EQ(crc.value(), a.crc) << "acknowledged block changed";
    }
  }
  EXPECT_GT(acked.size(), static_cast<size_t>(kRounds * 20));
}

// A StoC that is down when it is added (an LTC restarted while a StoC of the configuration
// is dead, or removed and stopped but still listed): AddStoc fails but keeps the address,
// requests fail at once with NetworkError, and once the StoC is back a request connects.
TEST_F(StocClusterTest, StocDownWhenAddedIsConnectedOnceItIsBack) {
  test::ExternalDaemon* stoc = StartStoc(0);
  ASSERT_TRUE(stoc);
  const std::string address = stoc->address();
  stoc->Kill();
  Client c("late", secret_);
  Status added = c.client->AddStoc(0, address);
  ASSERT_FALSE(added.ok());
  EXPECT_TRUE(c.client->stocs().empty());
  Status down = c.client->Stats(0).status();
  EXPECT_TRUE(down.IsNetworkError()) << down.ToString();
  EXPECT_TRUE(c.client->Stats(1).status().IsInvalidArgument());  // never added
  ASSERT_TRUE(stoc->Restart().ok());
  // Bounded: the first request after StocClient::kReconnectInterval connects.
  ASSERT_TRUE(test::WaitFor([&] { return c.client->Stats(0).ok(); }, 30s));
  EXPECT_EQ(c.client->stocs(), std::vector<uint32_t>{0});
  const uint32_t crc = c.Fill(4096, 7);
  auto f = c.client->Open(0, "late-file", FileKind::kDisk);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto h = c.client->Append(f.value().get(), c.src_mr, 0, 4096);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  auto read = c.ReadCrc(h.value());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read.value(), crc);
}

// A StoC whose address accepts connections but never answers the handshake (a blackholed
// host, as far as the dialer can tell): while one request dials it (up to the connect
// timeout), every other request fails at once with NetworkError instead of queueing behind
// the dial, no second dial starts, and the next dial waits kReconnectInterval after this one
// ended. Without the per-StoC `dialing` flag a request arriving a second into the dial would
// queue on the transport's dial lock for the rest of it.
TEST_F(StocClusterTest, RequestsToAStocBeingDialedFailAtOnce) {
  constexpr int kConnectTimeoutMs = 3000;
  constexpr auto kPrompt = 250ms;  // far below the dial, far above a failing lookup
  int listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listen_fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listen_fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  // Counts dials; closes the first (AddStoc's dial fails fast), holds the others silent.
  std::atomic<int> dials{0};
  std::atomic<bool> stop{false};
  std::vector<int> held;
  std::thread acceptor([&] {
    while (!stop) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) continue;
      if (dials.fetch_add(1) == 0) {
        ::close(fd);
      } else {
        held.push_back(fd);
      }
    }
  });
  Client c("patient", secret_, kConnectTimeoutMs);
  EXPECT_FALSE(c.client->AddStoc(0, address).ok());
  // One request thread; its first call after kReconnectInterval dials and hangs.
  Status dial_status;
  std::atomic<bool> dial_done{false};
  MonoTime dial_end;
  std::thread dialer([&] {
    test::WaitFor(
        [&] {
          const MonoTime start = MonoNow();
          dial_status = c.client->Stats(0).status();
          const MonoTime end = MonoNow();
          if (end - start < kPrompt) return false;
          dial_end = end;
          return true;
        },
        30s);
    dial_done = true;
  });
  ASSERT_TRUE(test::WaitFor([&] { return dials.load() >= 2; }, 10s));
  const MonoTime dial_start = MonoNow();
  // Longer than kReconnectInterval, well within the dial.
  while (MonoNow() - dial_start < StocClient::kReconnectInterval * 3 / 2) {
    const MonoTime start = MonoNow();
    Status s = c.client->Stats(0).status();
    EXPECT_LT(MonoNow() - start, kPrompt) << s.ToString();
    EXPECT_TRUE(s.IsNetworkError()) << s.ToString();
  }
  EXPECT_FALSE(dial_done.load()) << "the dial ended before the check did: raise kConnectTimeoutMs";
  EXPECT_EQ(dials.load(), 2);
  dialer.join();
  EXPECT_FALSE(dial_status.ok());
  // The next dial waits kReconnectInterval from the end of this one.
  Status after = c.client->Stats(0).status();
  if (MonoNow() < dial_end + StocClient::kReconnectInterval) {
    EXPECT_TRUE(after.IsNetworkError()) << after.ToString();
    EXPECT_EQ(dials.load(), 2);
  }
  stop = true;
  acceptor.join();
  for (int fd : held) ::close(fd);
  ::close(listen_fd);
}

TEST_F(StocClusterTest, FullDiskGivesErrorsAndNoCorruption) {
  constexpr uint64_t kLimit = 24 << 20;
  test::ExternalDaemon* stoc = StartStoc(0, {}, kLimit);
  ASSERT_TRUE(stoc);
  auto client = NewClient("filler");
  auto f = client->client->Open(0, "filler", FileKind::kDisk, OpenOptions{true, true, 1 << 20});
  ASSERT_TRUE(f.ok());
  std::vector<Acked> acked;
  Status last;
  for (int i = 0; i < 100; ++i) {  // 100 MiB would exceed the 24 MiB limit
    const uint32_t crc = client->Fill(1 << 20, i);
    auto h = client->client->Append(f.value().get(), client->src_mr, 0, 1 << 20);
    if (!h.ok()) {
      last = h.status();
      break;
    }
    acked.push_back({h.value(), crc});
  }
  ASSERT_FALSE(last.ok()) << "the file-size limit was never hit";
  EXPECT_TRUE(last.IsResourceExhausted()) << last.ToString();
  EXPECT_GT(acked.size(), 10u);
  // A second attempt fails the same way; the StoC keeps serving.
  client->Fill(1 << 20, 999);
  EXPECT_TRUE(client->client->Append(f.value().get(), client->src_mr, 0, 1 << 20)
                  .status()
                  .IsResourceExhausted());
  auto check = [&] {
    for (const Acked& a : acked) {
      auto crc = client->ReadCrc(a.handle);
      ASSERT_TRUE(crc.ok()) << crc.status().ToString();
      ASSERT_EQ(crc.value(), a.crc);
    }
  };
  check();
  // The refused block left nothing behind: the file ends right after the last good block.
  auto st = client->client->StatFile(0, f.value()->file_id);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->length, acked.back().handle.offset + acked.back().handle.size);
  // Small blocks still fit where a big one did not.
  auto small = client->client->Append(f.value().get(), client->src_mr, 0, 100);
  EXPECT_TRUE(small.ok() || small.status().IsResourceExhausted()) << small.status().ToString();
  // After a crash the same holds.
  stoc->Kill();
  ASSERT_TRUE(stoc->Restart().ok());
  ASSERT_TRUE(test::WaitFor([&] { return client->client->Stats(0).ok(); }, 30s));
  check();
}

TEST_F(StocClusterTest, PowerOfDAvoidsASlowStoc) {
  // stoc-2's storage thread sleeps 30 ms per append group.
  for (uint32_t id = 0; id < 2; ++id) ASSERT_TRUE(StartStoc(id));
  ASSERT_TRUE(StartStoc(2, {"--fault_points=stoc.storage=delay:30ms"}));
  auto client = NewClient("placer");
  // Load: one appender per fast StoC, four on the slow one, bounded in time and count.
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const std::vector<uint32_t> targets = {0, 1, 2, 2, 2, 2};
  for (size_t t = 0; t < targets.size(); ++t) {
    threads.emplace_back([&, t] {
      auto f = client->client->Open(targets[t], "load-" + std::to_string(t), FileKind::kDisk);
      if (!f.ok()) return;
      for (int i = 0; i < 2000 && !stop; ++i) {
        if (!client->client->Append(f.value().get(), client->src_mr, t * 4096, 4096).ok()) return;
      }
    });
  }
  // Wait until every StoC has reported a load, then place 1,000 single-fragment tables.
  const LoadView& view = client->client->load_view();
  ASSERT_TRUE(test::WaitFor([&] { return view.Get(2).queue_depth > 1; }, 20s))
      << "the slow StoC never reported a queue";
  std::mt19937_64 rng(test::TestSeed("PowerOfDAvoidsASlowStoc"));
  int slow_power = 0, slow_random = 0;
  constexpr int kTables = 1000;
  for (int i = 0; i < kTables; ++i) {
    std::vector<uint32_t> out;
    ASSERT_TRUE(
        ChooseStocs(lsm::PlacementPolicy::kPowerOfD, {0, 1, 2}, view, 1, 0, &rng, &out).ok());
    slow_power += out[0] == 2;
    ASSERT_TRUE(ChooseStocs(lsm::PlacementPolicy::kRandom, {0, 1, 2}, view, 1, 0, &rng, &out).ok());
    slow_random += out[0] == 2;
  }
  stop = true;
  for (auto& t : threads) t.join();
  std::fprintf(stderr, "slow StoC chosen: power-of-d %d / %d, random %d / %d\n", slow_power,
               kTables, slow_random, kTables);
  EXPECT_LT(slow_power, kTables / 10);
  EXPECT_GT(slow_random, kTables / 5);
}

TEST_F(StocClusterTest, ClientDisconnectingMidWriteLeavesNoTornBlock) {
  test::ExternalDaemon* stoc = StartStoc(0);
  ASSERT_TRUE(stoc);
  auto writer = NewClient("vanishing-writer");
  auto f = writer->client->Open(0, "half", FileKind::kDisk, OpenOptions{true, true, 16 << 20});
  ASSERT_TRUE(f.ok());
  const uint32_t crc = writer->Fill(1 << 20, 7);
  auto first = writer->client->Append(f.value().get(), writer->src_mr, 0, 1 << 20);
  ASSERT_TRUE(first.ok());
  // Start a 16 MiB append and drop the connection while it is on the wire.
  writer->Fill(16 << 20, 8);
  std::thread t([&] {
    auto h = writer->client->Append(f.value().get(), writer->src_mr, 0, 16 << 20);
    EXPECT_FALSE(h.ok() && h->offset != first->offset + first->size)
        << "an append reported a wrong place";
  });
  writer->transport->Shutdown();
  t.join();
  // Another client sees the file as the first block left it, and the StoC still serves.
  auto reader = NewClient("reader");
  auto st = reader->client->StatFile(0, f.value()->file_id);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  if (st->length != first->offset + first->size) {
    // The whole 16 MiB block arrived before the connection closed: it must be intact.
    EXPECT_EQ(st->length, first->offset + first->size + 8 + (16 << 20));
  }
  auto got = reader->ReadCrc(first.value());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), crc);
  EXPECT_TRUE(test::WaitFor([&] {
    std::ifstream log(stoc->log_path());
    std::stringstream ss;
    ss << log.rdbuf();
    return ss.str().find("peer vanishing-writer") != std::string::npos;
  })) << "the StoC did not log the lost client";
}

// A port that was free a moment ago (for the daemon's --metrics_port).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST_F(StocClusterTest, MetricsEndpointExportsStorageFigures) {
  const int port = FreePort();
  ASSERT_TRUE(StartStoc(0, {"--metrics_port=" + std::to_string(port)}));
  auto client = NewClient("metrics");
  auto f = client->client->Open(0, "m", FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  client->Fill(4096, 1);
  ASSERT_TRUE(client->client->Append(f.value().get(), client->src_mr, 0, 4096).ok());
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "no /metrics answer on port " << port;
  ASSERT_EQ(res->status, 200);
  for (const char* want : {"stoc_appends_total 1", "stoc_append_bytes_total 4096",
                           "stoc_queue_depth ", "stoc_pending_bytes ", "stoc_fsyncs_total 1",
                           "stoc_append_latency_us_bucket", "stoc_read_latency_us_count",
                           "xchg_peers_up 1"}) {
    EXPECT_NE(res->body.find(want), std::string::npos) << want << " missing from:\n" << res->body;
  }
}

}  // namespace
}  // namespace nova::stoc
