// StoC server and client in one process (over loopback): the protocol end to end. The
// multi-process tests (kill -9, disk full, many clients) are in tests/stoc_itest.cc.
#include "stoc/server/stoc_server.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "common/crc32c.h"
#include "common/fault_point.h"
#include "stoc/client/stoc_client.h"
#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

constexpr char kSecret[] = "stoc-test-secret";

StocOptions ServerOptions(const std::string& dir) {
  StocOptions o;
  o.stoc_id = 1;
  o.dir = dir;
  o.transport.cluster_secret = kSecret;
  o.memory_region_bytes = 1 << 20;
  o.memory_limit_bytes = 8 << 20;
  o.file_buffer_bytes = 64 << 20;
  o.max_block_bytes = 16 << 20;
  return o;
}

class StocServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::TestTempDir("stoc_server_test");
    StartServer();
    transport::TransportOptions o;
    o.node_name = "client";
    o.cluster_secret = kSecret;
    auto t = transport::NewTransport(o, &endpoint_);
    ASSERT_TRUE(t.ok());
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    client_ = std::make_unique<StocClient>(&endpoint_);
    ASSERT_TRUE(transport_->Init().ok());
    ASSERT_TRUE(transport_->Start().ok());
    ASSERT_TRUE(client_->AddStoc(1, server_->address()).ok());
    buf_.reset(new char[kBuf]);
    back_.reset(new char[kBuf]);
    auto r1 = transport_->RegisterMemory(buf_.get(), kBuf, transport::kLocalOnly);
    auto r2 = transport_->RegisterMemory(back_.get(), kBuf, transport::kRemoteWrite);
    ASSERT_TRUE(r1.ok() && r2.ok());
    src_ = r1.value();
    dst_ = r2.value();
  }
  void TearDown() override {
    transport_->Shutdown();
    server_.reset();
  }
  void StartServer() {
    server_ = std::make_unique<StocServer>(ServerOptions(dir_), metrics_.get());
    Status s = server_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(server_->Start().ok());
  }
  // Restarts the server on the same port and directory; the client reconnects by itself.
  void RestartServer() {
    const std::string addr = server_->address();
    server_.reset();
    metrics_ = std::make_unique<MetricsRegistry>();
    StocOptions o = ServerOptions(dir_);
    o.transport.listen_port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
    server_ = std::make_unique<StocServer>(o, metrics_.get());
    ASSERT_TRUE(server_->Init().ok());
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_TRUE(test::WaitFor([&] { return client_->Stats(1).ok(); }, std::chrono::seconds(20)));
  }
  // A second client of the StoC, with a transport of its own and a registered buffer
  // (kRemoteWrite) of `bytes` to read into. The destructor shuts its transport down.
  struct OtherClient {
    rpc::RpcEndpoint endpoint;
    std::unique_ptr<transport::Transport> transport;
    std::unique_ptr<StocClient> client;
    std::unique_ptr<char[]> mem;
    transport::MemoryRegion dst;
    ~OtherClient() {
      if (transport) transport->Shutdown();
    }
  };
  void StartOtherClient(const std::string& node_name, const StocClientOptions& co,
                        size_t bytes, OtherClient* c) {
    transport::TransportOptions o;
    o.node_name = node_name;
    o.cluster_secret = kSecret;
    auto t = transport::NewTransport(o, &c->endpoint);
    ASSERT_TRUE(t.ok());
    c->transport = std::move(t.value());
    c->endpoint.Attach(c->transport.get());
    c->client = std::make_unique<StocClient>(&c->endpoint, co);
    ASSERT_TRUE(c->transport->Init().ok());
    ASSERT_TRUE(c->transport->Start().ok());
    ASSERT_TRUE(c->client->AddStoc(1, server_->address()).ok());
    c->mem.reset(new char[bytes]);
    auto dst = c->transport->RegisterMemory(c->mem.get(), bytes, transport::kRemoteWrite);
    ASSERT_TRUE(dst.ok());
    c->dst = dst.value();
  }
  void Fill(uint64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < n; ++i) buf_[i] = static_cast<char>(rng());
  }
  // Creates disk file `name` through `c` (slots of `slot_bytes`) holding one block: the
  // first `bytes` bytes of buf_ after Fill(bytes, seed), appended from `src` (buf_
  // registered with c's transport); closes it and returns where the block lives.
  Result<BlockHandle> WriteDiskBlock(StocClient* c, const transport::MemoryRegion& src,
                                     const std::string& name, uint64_t bytes, uint64_t seed,
                                     uint64_t slot_bytes) {
    auto f = c->Open(1, name, FileKind::kDisk, OpenOptions{true, true, slot_bytes});
    if (!f.ok()) return f.status();
    Fill(bytes, seed);
    auto h = c->Append(f.value().get(), src, 0, bytes);
    if (!h.ok()) return h.status();
    NOVA_RETURN_NOT_OK(c->Close(f.value().get()));
    return h;
  }

  static constexpr uint64_t kBuf = 16 << 20;
  std::string dir_;
  std::unique_ptr<MetricsRegistry> metrics_ = std::make_unique<MetricsRegistry>();
  std::unique_ptr<StocServer> server_;
  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<StocClient> client_;
  std::unique_ptr<char[]> buf_, back_;
  transport::MemoryRegion src_, dst_;
};

TEST_F(StocServerTest, DiskAppendAndReadBlocksOfManySizes) {
  auto f = client_->Open(1, "r1-t7-f0-p0", FileKind::kDisk, OpenOptions{true, true, 16 << 20});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::pair<BlockHandle, uint32_t>> blocks;
  for (uint64_t size : {1ull, 100ull, 4096ull, 65536ull, 1ull << 20, 16ull << 20}) {
    Fill(size, size);
    auto h = client_->Append(f.value().get(), src_, 0, size);
    ASSERT_TRUE(h.ok()) << size << ": " << h.status().ToString();
    EXPECT_EQ(h->size, size);
    blocks.emplace_back(h.value(), crc32c::Value(buf_.get(), size));
  }
  for (auto& [h, crc] : blocks) {
    std::memset(back_.get(), 0, h.size);
    Status s = client_->Read(h, dst_, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(crc32c::Value(back_.get(), h.size), crc);
  }
  // A sub-range of a block.
  const auto& big = blocks.back().first;
  Fill(big.size, big.size);
  ASSERT_TRUE(client_->Read(big.Slice(1000, 5000), dst_, 0).ok());
  EXPECT_EQ(std::memcmp(back_.get(), buf_.get() + 1000, 5000), 0);
  ASSERT_TRUE(client_->Close(f.value().get()).ok());
  auto list = client_->List(1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "r1-t7-f0-p0");
  auto stats = client_->Stats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->appends, 6u);
  EXPECT_GE(stats->fsyncs, 1u);
}

// Disk blocks are read inline (kReadInline, the default: the bytes in the response) and,
// by a client with inline_reads off, by the StoC's WRITE (kRead); both give the same bytes.
TEST_F(StocServerTest, DiskBlocksReadInlineAndByWrite) {
  auto h = WriteDiskBlock(client_.get(), src_, "r1-t8-f0-p0", 300000, 42, 16 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const uint64_t reads_before = client_->Stats(1)->reads;

  StocClientOptions co;
  co.inline_reads = false;
  OtherClient other;
  ASSERT_NO_FATAL_FAILURE(StartOtherClient("client-by-write", co, 300000, &other));
  StocClient& by_write = *other.client;
  char* const mem = other.mem.get();
  const transport::MemoryRegion dst = other.dst;

  for (auto [offset, size] : {std::pair<uint64_t, uint64_t>{0, 300000}, {12345, 4096}, {299999, 1}}) {
    std::memset(back_.get(), 0, size);
    std::memset(mem, 0, size);
    Status s = client_->Read(h->Slice(offset, size), dst_, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(std::memcmp(back_.get(), buf_.get() + offset, size), 0) << offset;
    s = by_write.Read(h->Slice(offset, size), dst, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(std::memcmp(mem, buf_.get() + offset, size), 0) << offset;
  }
  EXPECT_EQ(client_->Stats(1)->reads, reads_before + 6);
}

// A client with local_reads reads the disk blocks of a StoC on its host from the data file
// (no request reaches the StoC), gives the same bytes, stops when the file is deleted or
// the StoC goes down, and starts again once the StoC is back. Memory files stay one-sided.
TEST_F(StocServerTest, LocalReadsServeBlocksWithoutRequests) {
  auto h = WriteDiskBlock(client_.get(), src_, "r1-t10-f0-p0", 200000, 11, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();

  MetricsRegistry registry;
  StocClientOptions co;
  co.local_reads = true;
  co.metrics = &registry;
  OtherClient other;
  ASSERT_NO_FATAL_FAILURE(StartOtherClient("client-local", co, 200000, &other));
  StocClient& local = *other.client;
  ASSERT_NE(local.local_files(), nullptr);
  Counter* local_reads = registry.GetCounter("stoc_client_local_reads_total", "");
  Counter* reads = registry.GetCounter("stoc_client_reads_total", "");
  const uint64_t served_before = client_->Stats(1)->reads;
  for (auto [offset, size] : {std::pair<uint64_t, uint64_t>{0, 200000}, {777, 4096}, {199999, 1}}) {
    std::memset(other.mem.get(), 0, size);
    Status s = local.Read(h->Slice(offset, size), other.dst, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(std::memcmp(other.mem.get(), buf_.get() + offset, size), 0) << offset;
  }
  // ReadLocal: straight into any memory, counted the same; false without local_reads.
  std::string direct(4096, '\0');
  ASSERT_TRUE(local.ReadLocal(h->Slice(777, 4096), direct.data()));
  EXPECT_EQ(std::memcmp(direct.data(), buf_.get() + 777, 4096), 0);
  EXPECT_FALSE(client_->ReadLocal(h->Slice(777, 4096), direct.data()));
  EXPECT_EQ(local_reads->value(), 4u);
  EXPECT_EQ(reads->value(), 4u);
  EXPECT_EQ(client_->Stats(1)->reads, served_before) << "no read reached the StoC";
  EXPECT_EQ(local.local_files()->open_files(), 1u);

  // Deleted: the sweep closes the descriptor; a read asks the StoC, which says NotFound.
  ASSERT_TRUE(client_->Delete(1, "r1-t10-f0-p0").ok());
  local.local_files()->Sweep();
  EXPECT_EQ(local.local_files()->open_files(), 0u);
  Status gone = local.Read(h->Slice(0, 10), other.dst, 0);
  EXPECT_TRUE(gone.IsNotFound()) << gone.ToString();

  // A StoC that goes down is not read locally; once it is back, it is again.
  auto h2 = WriteDiskBlock(client_.get(), src_, "r1-t11-f0-p0", 5000, 12, 1 << 20);
  ASSERT_TRUE(h2.ok()) << h2.status().ToString();
  ASSERT_TRUE(local.Read(h2.value(), other.dst, 0).ok());
  EXPECT_EQ(local_reads->value(), 5u);
  EXPECT_EQ(local.local_files()->open_files(), 1u);
  RestartServer();
  ASSERT_TRUE(test::WaitFor([&] { return local.local_files()->open_files() == 0; }))
      << "the client saw the StoC go down";
  ASSERT_TRUE(test::WaitFor([&] {
    return local.Read(h2.value(), other.dst, 0).ok() && local.local_files()->open_files() == 1;
  }));
  EXPECT_EQ(std::memcmp(other.mem.get(), buf_.get(), 5000), 0);

  // In-memory files are read one-sided, never from a file.
  auto m = client_->Open(1, "r1-t12-f0-p0", FileKind::kMemory);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto hm = client_->Append(m.value().get(), src_, 0, 1000);
  ASSERT_TRUE(hm.ok()) << hm.status().ToString();
  ASSERT_TRUE(client_->Close(m.value().get()).ok());
  const uint64_t local_before = local_reads->value();
  ASSERT_TRUE(local.Read(hm.value(), other.dst, 0).ok());
  EXPECT_EQ(std::memcmp(other.mem.get(), buf_.get(), 1000), 0);
  EXPECT_EQ(local_reads->value(), local_before);
}

// A StoC started with local_reads false answers kLocalFile NotSupported: a client that
// would read locally reads by request, and asks once.
TEST_F(StocServerTest, LocalReadsOffAtTheStocMeansRequests) {
  server_.reset();
  StocOptions o = ServerOptions(dir_);
  o.local_reads = false;
  server_ = std::make_unique<StocServer>(o, metrics_.get());
  ASSERT_TRUE(server_->Init().ok());
  ASSERT_TRUE(server_->Start().ok());
  StocClientOptions co;
  co.local_reads = true;
  OtherClient other;
  ASSERT_NO_FATAL_FAILURE(StartOtherClient("client-local-off", co, 65536, &other));
  StocClient& c = *other.client;
  auto src = other.transport->RegisterMemory(buf_.get(), 65536, transport::kLocalOnly);
  ASSERT_TRUE(src.ok());
  auto h = WriteDiskBlock(&c, src.value(), "r1-t13-f0-p0", 65536, 3, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Read(h->Slice(100, 4000), other.dst, 0).ok());
    EXPECT_EQ(std::memcmp(other.mem.get(), buf_.get() + 100, 4000), 0);
  }
  EXPECT_EQ(c.local_files()->local_reads(), 0u);
  EXPECT_EQ(c.Stats(1)->reads, 3u);
}

// A client given a registry counts every Read and its time (failed ones too); every
// client adds its reads' time to the calling thread's tally (ThreadReadNanos).
TEST_F(StocServerTest, ReadsAreCountedAndTimed) {
  auto h = WriteDiskBlock(client_.get(), src_, "r1-t9-f0-p0", 65536, 7, 1 << 20);
  ASSERT_TRUE(h.ok()) << h.status().ToString();

  MetricsRegistry registry;
  StocClientOptions co;
  co.metrics = &registry;
  OtherClient other;
  ASSERT_NO_FATAL_FAILURE(StartOtherClient("client-timed", co, 65536, &other));
  StocClient& timed = *other.client;
  const transport::MemoryRegion dst = other.dst;

  Counter* reads = registry.GetCounter("stoc_client_reads_total", "");
  Counter* read_us = registry.GetCounter("stoc_client_read_us_total", "");
  const uint64_t thread_before = StocClient::ThreadReadNanos();
  for (uint64_t size : {65536ull, 4096ull, 1ull}) {
    ASSERT_TRUE(timed.Read(h->Slice(0, size), dst, 0).ok());
  }
  BlockHandle missing = h.value();
  missing.file_id += 1000;  // no such file
  EXPECT_FALSE(timed.Read(missing, dst, 0).ok());
  EXPECT_EQ(reads->value(), 4u);
  // Each of these reads crossed loopback to the StoC and back: at least a microsecond.
  EXPECT_GE(read_us->value(), 4u);
  const uint64_t timed_ns = StocClient::ThreadReadNanos() - thread_before;
  // The counter rounds each read to the nearest microsecond.
  EXPECT_GE(timed_ns + 4 * 500, read_us->value() * 1000);
  EXPECT_LE(timed_ns, read_us->value() * 1000 + 4 * 500);
  // A client without a registry counts nothing anywhere, but still on the thread's tally.
  ASSERT_TRUE(client_->Read(h.value(), dst_, 0).ok());
  EXPECT_EQ(reads->value(), 4u);
  EXPECT_GT(StocClient::ThreadReadNanos(), thread_before + timed_ns);
}

TEST_F(StocServerTest, BadRequestsGetClearErrors) {
  auto f = client_->Open(1, "f", FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  Fill(100, 1);
  auto h = client_->Append(f.value().get(), src_, 0, 100);
  ASSERT_TRUE(h.ok());
  // Past the end of the block / file.
  EXPECT_TRUE(client_->Read(h->Slice(50, 100), dst_, 0).IsOutOfRange());
  BlockHandle nowhere = h.value();
  nowhere.offset = 1 << 20;
  EXPECT_TRUE(client_->Read(nowhere, dst_, 0).IsOutOfRange());
  // Unknown file.
  BlockHandle unknown = h.value();
  unknown.file_id = 999;
  EXPECT_TRUE(client_->Read(unknown, dst_, 0).IsNotFound());
  EXPECT_TRUE(
      client_->Open(1, "missing", FileKind::kDisk, OpenOptions{false}).status().IsNotFound());
  EXPECT_TRUE(client_->Delete(1, "missing").IsNotFound());
  // Bad names and kinds.
  EXPECT_EQ(client_->Open(1, "a/b", FileKind::kDisk).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(client_->Open(1, "f", FileKind::kMemory).status().code(),
            Status::Code::kInvalidArgument);
  // Too large a block.
  EXPECT_FALSE(client_->Append(f.value().get(), src_, 0, (16 << 20) + 1).ok());
  // Unknown StoC.
  EXPECT_EQ(client_->Stats(7).status().code(), Status::Code::kInvalidArgument);
  // The server still serves.
  EXPECT_TRUE(client_->Read(h.value(), dst_, 0).ok());
}

TEST_F(StocServerTest, MemoryFilesAppendAcrossRegionsAndReadOneSided) {
  auto f = client_->Open(1, "log-r1-m5", FileKind::kMemory);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<std::pair<BlockHandle, uint32_t>> blocks;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 40; ++i) {
    const uint64_t size = 1 + rng() % (300 << 10);  // crosses 1 MiB regions several times
    Fill(size, i);
    auto h = client_->Append(f.value().get(), src_, 0, size);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    blocks.emplace_back(h.value(), crc32c::Value(buf_.get(), size));
  }
  EXPECT_GT(f.value()->regions.size(), 1u);
  for (auto& [h, crc] : blocks) {
    ASSERT_TRUE(client_->Read(h, dst_, 0).ok());
    EXPECT_EQ(crc32c::Value(back_.get(), h.size), crc);
  }
  ASSERT_TRUE(client_->Close(f.value().get()).ok());
  // Another reader finds the length and regions.
  auto st = client_->StatFile(1, f.value()->file_id);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->length, f.value()->length);
  EXPECT_EQ(st->regions.size(), f.value()->regions.size());
  // The memory limit (8 MiB) is enforced.
  auto g = client_->Open(1, "big", FileKind::kMemory);
  ASSERT_TRUE(g.ok());
  Status last;
  for (int i = 0; i < 16 && last.ok(); ++i) {
    last = client_->Append(g.value().get(), src_, 0, 1 << 20).status();
  }
  EXPECT_TRUE(last.IsResourceExhausted()) << last.ToString();
  ASSERT_TRUE(client_->Delete(1, "big").ok());
  auto stats = client_->Stats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_LE(stats->memory_bytes_used, stats->memory_bytes_limit);
}

TEST_F(StocServerTest, PersistentFilesSurviveRestartMemoryFilesDoNot) {
  auto f = client_->Open(1, "durable", FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  std::vector<std::pair<BlockHandle, uint32_t>> blocks;
  for (int i = 0; i < 50; ++i) {
    const uint64_t size = 1000 + i * 37;
    Fill(size, i);
    auto h = client_->Append(f.value().get(), src_, 0, size);
    ASSERT_TRUE(h.ok());
    blocks.emplace_back(h.value(), crc32c::Value(buf_.get(), size));
  }
  ASSERT_TRUE(client_->Open(1, "volatile", FileKind::kMemory).ok());
  RestartServer();
  for (auto& [h, crc] : blocks) {
    Status s = client_->Read(h, dst_, 0);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(crc32c::Value(back_.get(), h.size), crc);
  }
  auto list = client_->List(1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "durable");
  // The old slot is gone with the old process: appending needs a reopen.
  Fill(10, 1);
  EXPECT_FALSE(client_->Append(f.value().get(), src_, 0, 10).ok());
  auto again = client_->Open(1, "durable", FileKind::kDisk);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value()->file_id, f.value()->file_id);
  auto h = client_->Append(again.value().get(), src_, 0, 10);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_GT(h->offset, blocks.back().first.offset);
}

TEST_F(StocServerTest, StatFileListsTheBlocksOfPersistentFiles) {
  auto f = client_->Open(1, "r2-manifest-000001", FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  std::vector<BlockHandle> appended;
  for (uint64_t size : {1ull, 777ull, 4096ull, 100ull}) {
    Fill(size, size);
    auto h = client_->Append(f.value().get(), src_, 0, size);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    appended.push_back(h.value());
  }
  auto check = [&] {
    auto st = client_->StatFile(1, f.value()->file_id);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->blocks.size(), appended.size());
    for (size_t i = 0; i < appended.size(); ++i) {
      EXPECT_EQ(st->blocks[i].first, appended[i].offset);
      EXPECT_EQ(st->blocks[i].second, appended[i].size);
    }
    // A listing stays small: no extents.
    auto list = client_->List(1);
    ASSERT_TRUE(list.ok());
    ASSERT_EQ(list->size(), 1u);
    EXPECT_TRUE((*list)[0].blocks.empty());
  };
  ASSERT_NO_FATAL_FAILURE(check());
  // The extents are recovered from the file after a restart, and read back by them alone.
  RestartServer();
  ASSERT_NO_FATAL_FAILURE(check());
  auto st = client_->StatFile(1, f.value()->file_id);
  ASSERT_TRUE(st.ok());
  const auto [offset, size] = st->blocks[1];
  ASSERT_TRUE(
      client_->Read(BlockHandle{1, st->file_id, FileKind::kDisk, offset, size}, dst_, 0).ok());
  Fill(size, size);
  EXPECT_EQ(std::memcmp(back_.get(), buf_.get(), size), 0);
}

TEST_F(StocServerTest, ConcurrentAppendersShareFsyncs) {
  constexpr int kThreads = 4, kBlocks = 50;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto f = client_->Open(1, "shared-" + std::to_string(t % 2), FileKind::kDisk);
      if (!f.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < kBlocks; ++i) {
        if (!client_->Append(f.value().get(), src_, t * 4096, 4096).ok()) ++failures;
      }
      client_->Close(f.value().get()).IgnoreError();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = client_->Stats(1);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->appends, static_cast<uint64_t>(kThreads * kBlocks));
  EXPECT_LE(stats->fsyncs, stats->appends);
  std::fprintf(stderr, "%llu appends, %llu fsyncs\n", (unsigned long long)stats->appends,
               (unsigned long long)stats->fsyncs);
}

// ---- Owner fencing -------------------------------------------------------------------

OpenOptions AtEpoch(uint64_t epoch) {
  OpenOptions o;
  o.owner_epoch = epoch;
  return o;
}

std::set<std::string> Names(const Result<std::vector<FileState>>& list) {
  std::set<std::string> out;
  if (list.ok()) {
    for (const auto& f : list.value()) out.insert(f.name);
  }
  return out;
}

TEST(StocProtocolTest, OwnerEpochIsATrailingFieldOnlyWhenSet) {
  // Epoch 0 encodes exactly as before fencing, so a legacy StoC still decodes it.
  OpenRequest legacy{"r1-t000001-f0-p0", FileKind::kDisk, true, true, 4096};
  OpenRequest fenced = legacy;
  fenced.owner_epoch = 9;
  const std::string a = Encode(legacy), b = Encode(fenced);
  EXPECT_EQ(b.size(), a.size() + 8);
  EXPECT_EQ(b.substr(0, a.size()), a);
  OpenRequest back;
  ASSERT_TRUE(Decode(a, &back).ok());
  EXPECT_EQ(back.owner_epoch, 0u);
  ASSERT_TRUE(Decode(b, &back).ok());
  EXPECT_EQ(back.owner_epoch, 9u);
  EXPECT_FALSE(Decode(b + "x", &back).ok());  // still nothing beyond the epoch
  NameRequest del{"r1-t000001-f0-p0", 4}, del_back;
  ASSERT_TRUE(Decode(Encode(del), &del_back).ok());
  EXPECT_EQ(del_back.owner_epoch, 4u);
  ASSERT_TRUE(Decode(Encode(NameRequest{"x"}), &del_back).ok());
  EXPECT_EQ(del_back.owner_epoch, 0u);
  ReserveSlotRequest slot{3, 4096, 2, 5}, slot_back;
  ASSERT_TRUE(Decode(Encode(slot), &slot_back).ok());
  EXPECT_EQ(slot_back.owner_epoch, 5u);
  FenceRequest fence{7, 1ull << 40}, fence_back;
  ASSERT_TRUE(Decode(Encode(fence), &fence_back).ok());
  EXPECT_EQ(fence_back.range_id, 7u);
  EXPECT_EQ(fence_back.owner_epoch, 1ull << 40);
}

TEST_F(StocServerTest, FenceRefusesStaleWritersAndAdmitsNewerOnes) {
  const std::string table = "r5-t000001-f0-p0";
  auto old_file = client_->Open(1, table, FileKind::kDisk, AtEpoch(1));
  ASSERT_TRUE(old_file.ok()) << old_file.status().ToString();
  Fill(100, 1);
  ASSERT_TRUE(client_->Append(old_file.value().get(), src_, 0, 100).ok());

  ASSERT_TRUE(client_->FenceRange(1, 5, 2).ok());
  // The old owner's append, open and delete are refused and change nothing.
  auto h = client_->Append(old_file.value().get(), src_, 0, 100);
  EXPECT_TRUE(h.status().IsFenced()) << h.status().ToString();
  auto st = client_->StatFile(1, old_file.value()->file_id);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->blocks.size(), 1u);
  EXPECT_EQ(st->blocks[0].second, 100u);
  auto opened = client_->Open(1, "r5-t000002-f0-p0", FileKind::kDisk, AtEpoch(1));
  EXPECT_TRUE(opened.status().IsFenced()) << opened.status().ToString();
  EXPECT_TRUE(client_->Delete(1, table, 1).IsFenced());
  EXPECT_TRUE(client_->Delete(1, table).IsFenced());  // a legacy writer is older than any
  EXPECT_EQ(Names(client_->List(1)), (std::set<std::string>{table}));
  // A stale fence is refused; the same one again is fine.
  EXPECT_TRUE(client_->FenceRange(1, 5, 1).IsFenced());
  EXPECT_TRUE(client_->FenceRange(1, 5, 2).ok());
  EXPECT_EQ(client_->FenceRange(1, 5, 0).code(), Status::Code::kInvalidArgument);

  // The new owner writes; other ranges and files without a range are not concerned.
  auto new_file = client_->Open(1, table, FileKind::kDisk, AtEpoch(2));
  ASSERT_TRUE(new_file.ok()) << new_file.status().ToString();
  ASSERT_TRUE(client_->Append(new_file.value().get(), src_, 0, 100).ok());
  auto other = client_->Open(1, "r6-t000001-f0-p0", FileKind::kDisk);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(client_->Append(other.value().get(), src_, 0, 100).ok());
  ASSERT_TRUE(client_->Open(1, "no-range", FileKind::kDisk, AtEpoch(1)).ok());

  // An open by a still newer owner fences the range by itself: epoch 2 is refused next.
  ASSERT_TRUE(client_->Open(1, "r5-t000003-f0-p0", FileKind::kDisk, AtEpoch(3)).ok());
  EXPECT_TRUE(client_->Append(new_file.value().get(), src_, 0, 100).status().IsFenced());
  EXPECT_TRUE(client_->FenceRange(1, 5, 2).IsFenced());
  EXPECT_TRUE(client_->Delete(1, table, 3).ok());
}

TEST_F(StocServerTest, FenceSurvivesARestart) {
  ASSERT_TRUE(client_->FenceRange(1, 5, 4).ok());
  ASSERT_TRUE(client_->FenceRange(1, 8, 1).ok());
  RestartServer();
  EXPECT_TRUE(
      client_->Open(1, "r5-manifest-000001", FileKind::kDisk, AtEpoch(3)).status().IsFenced());
  EXPECT_TRUE(client_->FenceRange(1, 5, 3).IsFenced());
  EXPECT_TRUE(client_->Open(1, "r5-manifest-000001", FileKind::kDisk, AtEpoch(4)).ok());
  EXPECT_TRUE(client_->Open(1, "r8-manifest-000001", FileKind::kDisk).status().IsFenced());
}

TEST_F(StocServerTest, FenceAnswersOnlyOnceQueuedAppendsAreWritten) {
  const std::string name = "r5-manifest-000001";
  auto f = client_->Open(1, name, FileKind::kDisk, AtEpoch(1));
  ASSERT_TRUE(f.ok());
  // Hold the drain of the next append long enough that a fence not waiting for it would
  // answer first.
  ASSERT_TRUE(FaultPoints::Arm("stoc.storage=delay:1500ms:once").ok());
  Fill(300, 3);
  Result<BlockHandle> appended = Status::IllegalState("not run");
  std::thread writer([&] { appended = client_->Append(f.value().get(), src_, 0, 300); });
  ASSERT_TRUE(test::WaitFor([] { return FaultPoints::HitCount("stoc.storage") >= 1; },
                            std::chrono::seconds(20)));
  Status fenced = client_->FenceRange(1, 5, 2);
  // Answered: the append the StoC had accepted is durable already.
  auto st = client_->StatFile(1, f.value()->file_id);
  writer.join();
  FaultPoints::DisarmAll();
  ASSERT_TRUE(fenced.ok()) << fenced.ToString();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->blocks.size(), 1u);
  EXPECT_EQ(st->blocks[0].second, 300u);
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();
  // And the next one is refused.
  EXPECT_TRUE(client_->Append(f.value().get(), src_, 0, 300).status().IsFenced());
}

// A newer owner (another client) deletes a file an older owner still appends to (its old
// MANIFEST): the older owner's slot is not freed under it (its WRITEs could land in a slot
// reused by someone else) and its next append is refused with Fenced.
TEST_F(StocServerTest, DeletingAnotherClientsFileOrphansItsSlot) {
  const std::string name = "r5-manifest-000001";
  auto old_file = client_->Open(1, name, FileKind::kDisk, AtEpoch(1));
  ASSERT_TRUE(old_file.ok());
  rpc::RpcEndpoint endpoint;
  transport::TransportOptions o;
  o.node_name = "newer-owner";
  o.cluster_secret = kSecret;
  auto t = transport::NewTransport(o, &endpoint);
  ASSERT_TRUE(t.ok());
  endpoint.Attach(t.value().get());
  StocClient newer(&endpoint);
  ASSERT_TRUE(t.value()->Init().ok());
  ASSERT_TRUE(t.value()->Start().ok());
  ASSERT_TRUE(newer.AddStoc(1, server_->address()).ok());
  ASSERT_TRUE(newer.FenceRange(1, 5, 2).ok());
  ASSERT_TRUE(newer.Delete(1, name, 2).ok());
  const uint64_t used = client_->Stats(1)->file_buffer_bytes_used;
  // A new file takes a slot of its own: the orphaned one is still reserved.
  auto other = newer.Open(1, "r5-manifest-000002", FileKind::kDisk, AtEpoch(2));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other.value()->slot.addr, old_file.value()->slot.addr);
  Fill(100, 5);
  auto h = client_->Append(old_file.value().get(), src_, 0, 100);
  EXPECT_TRUE(h.status().IsFenced()) << h.status().ToString();
  // The holder's Close frees it (and says the file is gone).
  EXPECT_TRUE(client_->Close(old_file.value().get()).IsNotFound());
  EXPECT_LT(client_->Stats(1)->file_buffer_bytes_used, used + other.value()->slot.bytes);
  t.value()->Shutdown();
}

}  // namespace
}  // namespace nova::stoc
