// LogC server and a raw client (transport + RpcEndpoint) in one process over loopback: the
// protocol end to end. LogClient's behaviour on top of it is in log_client_test.cc.
#include "logc/server/logc_server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>

#include "common/mutex.h"
#include "tests/util/test_util.h"

namespace nova::logc {
namespace {

constexpr char kSecret[] = "logc-test-secret";
constexpr auto kTimeout = std::chrono::seconds(10);

// Records kLogPersisted notifications.
class PersistedLog : public rpc::RpcService {
 public:
  void HandleRequest(transport::PeerId, uint16_t type, std::string payload,
                     rpc::Responder) override EXCLUDES(mu_) {
    if (type != kLogPersisted) return;
    LogPersisted m;
    MutexLock lock(&mu_);
    if (Decode(payload, &m).ok()) seen_.push_back(m);
  }
  // The last notification for `handle`, if any.
  bool Last(uint32_t handle, LogPersisted* out) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    for (auto it = seen_.rbegin(); it != seen_.rend(); ++it) {
      if (it->handle == handle) {
        *out = *it;
        return true;
      }
    }
    return false;
  }
  size_t count() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return seen_.size();
  }

 private:
  Mutex mu_;
  std::vector<LogPersisted> seen_ GUARDED_BY(mu_);
};

class LogcServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::TestTempDir("logc_server_test");
    StartServer();
    transport::TransportOptions o;
    o.node_name = "ltc-test";
    o.cluster_secret = kSecret;
    auto t = transport::NewTransport(o, &endpoint_);
    ASSERT_TRUE(t.ok());
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    endpoint_.RegisterService(wire::TypeRange{kLogPersisted, kLogPersisted}, &persisted_, nullptr);
    ASSERT_TRUE(transport_->Init().ok());
    ASSERT_TRUE(transport_->Start().ok());
    Connect();
    buf_.reset(new char[kBuf]);
    back_.reset(new char[kBuf]);
    auto r1 = transport_->RegisterMemory(buf_.get(), kBuf, transport::kLocalOnly);
    auto r2 = transport_->RegisterMemory(back_.get(), kBuf, transport::kLocalOnly);
    ASSERT_TRUE(r1.ok() && r2.ok());
    src_ = r1.value();
    dst_ = r2.value();
  }
  void TearDown() override {
    transport_->Shutdown();
    server_.reset();
  }

  LogcOptions Options() {
    LogcOptions o;
    o.logc_id = "1";
    o.dir = dir_;
    o.persist = persist_;
    o.transport.cluster_secret = kSecret;
    o.transport.max_message_bytes = 64 << 10;  // kReadLog replies come in pages
    o.memory_limit_bytes = 8 << 20;
    o.max_segment_bytes = 4 << 20;
    return o;
  }
  void StartServer() {
    metrics_ = std::make_unique<MetricsRegistry>();
    server_ = std::make_unique<LogcServer>(Options(), metrics_.get());
    Status s = server_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(server_->Start().ok());
  }
  void Connect() {
    auto p = transport_->Connect(server_->address());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    peer_ = p.value();
  }
  void RestartServer() {
    server_.reset();
    StartServer();
    Connect();
  }

  template <typename Req, typename Resp>
  Status Call(uint16_t type, const Req& req, Resp* resp) {
    auto r = endpoint_.CallSync(peer_, type, Encode(req), kTimeout);
    if (!r.ok()) return r.status();
    return Decode(r.value(), resp);
  }
  Result<OpenLogResponse> Open(uint32_t range, uint64_t memtable, uint32_t segment,
                               uint64_t capacity, bool persist) {
    OpenLogResponse resp;
    Status s = Call(kOpenLog, OpenLogRequest{range, memtable, segment, capacity, persist}, &resp);
    if (!s.ok()) return s;
    return resp;
  }
  Result<OpenLogResponse> OpenAt(uint32_t range, uint64_t memtable, uint64_t capacity, bool persist,
                                 uint64_t epoch) {
    OpenLogRequest req{range, memtable, 0, capacity, persist};
    req.owner_epoch = epoch;
    OpenLogResponse resp;
    Status s = Call(kOpenLog, req, &resp);
    if (!s.ok()) return s;
    return resp;
  }
  Result<FenceLogsResponse> Fence(uint32_t range, uint64_t epoch) {
    FenceLogsResponse resp;
    Status s = Call(kFenceLogs, FenceLogsRequest{range, epoch}, &resp);
    if (!s.ok()) return s;
    return resp;
  }
  Result<ListLogsResponse> List(uint32_t range) {
    ListLogsResponse resp;
    Status s = Call(kListLogs, ListLogsRequest{range}, &resp);
    if (!s.ok()) return s;
    return resp;
  }
  Status OneSided(bool write, transport::RemoteAddr addr, uint64_t n,
                  std::optional<uint32_t> imm = std::nullopt) {
    std::promise<Status> done;
    auto cb = [&](const Status& s) { done.set_value(s); };
    Status posted = write ? transport_->Write(peer_, src_, 0, n, addr, imm, cb)
                          : transport_->Read(peer_, addr, n, dst_, 0, cb);
    if (!posted.ok()) return posted;
    return done.get_future().get();
  }
  void Fill(uint64_t n, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < n; ++i) buf_[i] = static_cast<char>(rng());
  }
  // Waits for a kLogPersisted of `handle` reporting at least `length`.
  bool WaitPersisted(uint32_t handle, uint64_t length) {
    return test::WaitFor([&] {
      LogPersisted p;
      return persisted_.Last(handle, &p) && p.status.ok() && p.persisted_length >= length;
    });
  }

  static constexpr uint64_t kBuf = 4 << 20;
  bool persist_ = true;
  std::string dir_;
  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<LogcServer> server_;
  PersistedLog persisted_;
  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  transport::PeerId peer_ = transport::kInvalidPeer;
  std::unique_ptr<char[]> buf_, back_;
  transport::MemoryRegion src_, dst_;
};

TEST_F(LogcServerTest, MemoryLogIsWrittenAndReadOneSided) {
  auto f = Open(1, 5, 0, 1 << 20, false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->capacity, 1u << 20);
  EXPECT_FALSE(f->persisted);
  // The region starts zero-filled.
  ASSERT_TRUE(OneSided(false, f->addr, 1 << 20).ok());
  EXPECT_TRUE(std::all_of(back_.get(), back_.get() + (1 << 20), [](char c) { return c == 0; }));
  Fill(5000, 1);
  ASSERT_TRUE(OneSided(true, f->addr, 3000).ok());
  transport::RemoteAddr tail{f->addr.addr + 3000, f->addr.rkey};
  Fill(5000, 1);
  ASSERT_TRUE(
      transport_->Write(peer_, src_, 3000, 2000, tail, std::nullopt, [](const Status&) {}).ok());
  ASSERT_TRUE(test::WaitFor([&] {
    return OneSided(false, f->addr, 5000).ok() && std::memcmp(back_.get(), buf_.get(), 5000) == 0;
  }));
  // Writing past the region fails at the client and touches nothing else.
  EXPECT_FALSE(
      OneSided(true, transport::RemoteAddr{f->addr.addr + (1 << 20) - 10, f->addr.rkey}, 100).ok());
  // Opening again (a retry, or re-replication) returns the same file.
  auto again = Open(1, 5, 0, 2 << 20, false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->handle, f->handle);
  EXPECT_EQ(again->addr.addr, f->addr.addr);
  EXPECT_EQ(again->capacity, 1u << 20);  // as it exists
  // Memory logs are not read through kReadLog; nor opened as persisted.
  ReadLogResponse r;
  EXPECT_EQ(Call(kReadLog, ReadLogRequest{1, 5, 0, 0, 100}, &r).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(Open(1, 5, 0, 1 << 20, true).status().code(), Status::Code::kInvalidArgument);
  auto list = List(1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->files.size(), 1u);
  EXPECT_EQ(list->files[0].memtable, 5u);
  EXPECT_EQ(list->files[0].addr.addr, f->addr.addr);
  EXPECT_TRUE(List(2).ok() && List(2)->files.empty());
  // Bad capacities.
  EXPECT_EQ(Open(1, 6, 0, 0, false).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Open(1, 6, 0, (4 << 20) + 1, false).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(LogcServerTest, PersistedLogIsAcknowledgedAndSurvivesRestart) {
  constexpr uint64_t kCapacity = 1 << 20;
  auto f = Open(3, 77, 0, kCapacity, true);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->persisted);
  EXPECT_EQ(f->length, 0u);
  // Contiguous appends, one in flight at a time, each with the handle as immediate.
  Fill(kBuf, 42);
  uint64_t written = 0;
  for (uint64_t n : {100ull, 1ull, 65536ull, 200000ull, 3333ull}) {
    transport::RemoteAddr at{f->addr.addr + written, f->addr.rkey};
    std::promise<Status> done;
    ASSERT_TRUE(transport_->Write(peer_, src_, written, n, at, f->handle,
                                  [&](const Status& s) { done.set_value(s); }).ok());
    ASSERT_TRUE(done.get_future().get().ok());
    written += n;
    ASSERT_TRUE(WaitPersisted(f->handle, written)) << written;
  }
  // The bytes are in the disk file before the acknowledgment.
  const std::string path = dir_ + "/logs/r3-m77-s0-c" + std::to_string(kCapacity) + ".log";
  EXPECT_EQ(std::filesystem::file_size(path), written);
  LogcStatsResponse stats = server_->GetStats();
  EXPECT_GE(stats.fsyncs, 1u);
  EXPECT_EQ(stats.persisted_bytes, written);
  EXPECT_EQ(stats.received_bytes, written);

  RestartServer();
  auto list = List(3);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->files.size(), 1u);
  const LogFileInfo info = list->files[0];
  EXPECT_EQ(info.memtable, 77u);
  EXPECT_TRUE(info.persisted);
  EXPECT_EQ(info.capacity, kCapacity);
  EXPECT_EQ(info.length, written);
  EXPECT_EQ(info.persisted_length, written);
  // One-sided READ of the reloaded region...
  ASSERT_TRUE(OneSided(false, info.addr, written).ok());
  EXPECT_EQ(std::memcmp(back_.get(), buf_.get(), written), 0);
  // ...and kReadLog from the disk file, paged by the 64 KiB message limit.
  std::string disk;
  int pages = 0;
  while (disk.size() < written) {
    ReadLogResponse r;
    Status s = Call(kReadLog, ReadLogRequest{3, 77, 0, disk.size(), UINT64_MAX}, &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_FALSE(r.data.empty());
    EXPECT_EQ(r.persisted_length, written);
    disk += r.data;
    ++pages;
  }
  EXPECT_GT(pages, 1);
  ASSERT_EQ(disk.size(), written);
  EXPECT_EQ(std::memcmp(disk.data(), buf_.get(), written), 0);
  ReadLogResponse end;
  ASSERT_TRUE(Call(kReadLog, ReadLogRequest{3, 77, 0, written, 10}, &end).ok());
  EXPECT_TRUE(end.data.empty());
  EXPECT_TRUE(Call(kReadLog, ReadLogRequest{3, 77, 0, written + 1, 10}, &end).IsOutOfRange());
  // Reopening the reloaded file tells how much it holds; appends continue after it.
  auto again = Open(3, 77, 0, kCapacity, true);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->length, written);
  std::promise<Status> done;
  ASSERT_TRUE(transport_->Write(peer_, src_, written, 10,
                                transport::RemoteAddr{again->addr.addr + written, again->addr.rkey},
                                again->handle, [&](const Status& s) { done.set_value(s); }).ok());
  ASSERT_TRUE(done.get_future().get().ok());
  ASSERT_TRUE(WaitPersisted(again->handle, written + 10));
  EXPECT_EQ(std::filesystem::file_size(path), written + 10);
}

TEST_F(LogcServerTest, DeleteRemovesEverySegmentAndItsFile) {
  auto a0 = Open(1, 10, 0, 4096, true);
  auto a1 = Open(1, 10, 1, 8192, true);
  auto b0 = Open(1, 11, 0, 4096, false);
  auto other = Open(2, 10, 0, 4096, false);
  ASSERT_TRUE(a0.ok() && a1.ok() && b0.ok() && other.ok());
  EXPECT_EQ(server_->GetStats().files, 4u);
  EXPECT_EQ(server_->GetStats().memory_bytes, 4096u * 3 + 8192);
  DeleteLogsResponse d;
  ASSERT_TRUE(Call(kDeleteLogs, DeleteLogsRequest{1, {10, 11, 12}}, &d).ok());
  EXPECT_EQ(d.files_deleted, 3u);
  auto list = List(1);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->files.empty());
  EXPECT_EQ(List(2)->files.size(), 1u);  // another range's log is untouched
  EXPECT_EQ(server_->GetStats().memory_bytes, 4096u);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/logs"));
  // The old region is gone: one-sided ops on it fail.
  EXPECT_FALSE(OneSided(true, b0->addr, 10).ok());
  // Deleting what is not there is fine.
  ASSERT_TRUE(Call(kDeleteLogs, DeleteLogsRequest{1, {10}}, &d).ok());
  EXPECT_EQ(d.files_deleted, 0u);
  // Nothing comes back after a restart.
  RestartServer();
  EXPECT_TRUE(List(1)->files.empty());
}

TEST_F(LogcServerTest, MemoryLimitIsEnforcedAndNamesTheFlag) {
  ASSERT_TRUE(Open(1, 1, 0, 4 << 20, false).ok());
  ASSERT_TRUE(Open(1, 2, 0, 3 << 20, false).ok());
  auto refused = Open(1, 3, 0, 2 << 20, false);
  ASSERT_TRUE(refused.status().IsResourceExhausted()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("--logc_memory_limit_mb"), std::string::npos);
  DeleteLogsResponse d;
  ASSERT_TRUE(Call(kDeleteLogs, DeleteLogsRequest{1, {1}}, &d).ok());
  EXPECT_TRUE(Open(1, 3, 0, 2 << 20, false).ok());
}

// A range marked in sync is reported so by kListLogs in this incarnation; a mark for
// another incarnation is refused (the LogC restarted: it may have lost copies), a memory
// mark dies with the process, a persisted one survives it as the range's files do.
TEST_F(LogcServerTest, InSyncMarksFollowTheIncarnation) {
  auto mark = [&](uint32_t range, uint64_t incarnation, bool persist) {
    return endpoint_
        .CallSync(peer_, kMarkInSync, Encode(MarkInSyncRequest{range, incarnation, persist}),
                  kTimeout)
        .status();
  };
  auto listed = List(3);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_FALSE(listed->in_sync);
  const uint64_t first = listed->incarnation;
  ASSERT_NE(first, 0u);
  auto opened = Open(3, 1, 0, 4096, false);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(opened->incarnation, first);

  Status wrong = mark(3, first + 1, false);
  EXPECT_EQ(wrong.code(), Status::Code::kIllegalState) << wrong.ToString();
  EXPECT_FALSE(List(3)->in_sync);
  ASSERT_TRUE(mark(3, first, false).ok());
  EXPECT_TRUE(List(3)->in_sync);
  EXPECT_FALSE(List(4)->in_sync);
  ASSERT_TRUE(mark(4, first, true).ok());

  RestartServer();
  auto after = List(3);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->incarnation, first);
  EXPECT_FALSE(after->in_sync) << "a memory mark survived a restart";
  EXPECT_TRUE(List(4)->in_sync) << "a persisted mark was lost in a restart";

  // Without --logc_persist a persisted mark is refused, not silently kept in memory.
  persist_ = false;
  RestartServer();
  EXPECT_EQ(mark(5, 0, true).code(), Status::Code::kInvalidArgument);
}

TEST_F(LogcServerTest, PersistedOpenRefusedWithoutTheFlag) {
  persist_ = false;
  RestartServer();
  auto f = Open(1, 1, 0, 4096, true);
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(f.status().message().find("--logc_persist"), std::string::npos)
      << f.status().ToString();
  EXPECT_TRUE(Open(1, 1, 0, 4096, false).ok());
}

TEST_F(LogcServerTest, BadImmediatesAreCountedNotFatal) {
  auto mem = Open(1, 1, 0, 4096, false);
  auto disk = Open(1, 2, 0, 4096, true);
  ASSERT_TRUE(mem.ok() && disk.ok());
  Fill(4096, 3);
  const uint64_t errors = server_->GetStats().errors;
  // An unknown handle, and an immediate for a memory log.
  ASSERT_TRUE(OneSided(true, mem->addr, 10, 999999).ok());
  ASSERT_TRUE(OneSided(true, mem->addr, 10, mem->handle).ok());
  ASSERT_TRUE(test::WaitFor([&] { return server_->GetStats().errors >= errors + 2; }));
  // An immediate claiming more than the file holds fences it and is reported.
  ASSERT_TRUE(OneSided(true, disk->addr, 10, disk->handle).ok());
  ASSERT_TRUE(WaitPersisted(disk->handle, 10));
  ASSERT_TRUE(OneSided(true, transport::RemoteAddr{disk->addr.addr + 10, disk->addr.rkey},
                       4086, disk->handle).ok());
  ASSERT_TRUE(WaitPersisted(disk->handle, 4096));
  // Only the region's own bytes could be written; now the next immediate overflows.
  ASSERT_TRUE(OneSided(true, disk->addr, 1, disk->handle).ok());
  ASSERT_TRUE(test::WaitFor([&] {
    LogPersisted p;
    return persisted_.Last(disk->handle, &p) && p.status.IsOutOfRange();
  }));
  // The server still serves.
  EXPECT_TRUE(List(1).ok());
  EXPECT_TRUE(Open(1, 3, 0, 4096, true).ok());
}

TEST_F(LogcServerTest, FilesOutliveTheClientThatOpenedThem) {
  auto f = Open(4, 1, 0, 4096, true);
  ASSERT_TRUE(f.ok());
  Fill(100, 5);
  ASSERT_TRUE(OneSided(true, f->addr, 100, f->handle).ok());
  ASSERT_TRUE(WaitPersisted(f->handle, 100));
  transport_->Disconnect(peer_);
  // Another client finds the file and its bytes.
  rpc::RpcEndpoint endpoint2;
  transport::TransportOptions o;
  o.node_name = "ltc-2";
  o.cluster_secret = kSecret;
  auto t = transport::NewTransport(o, &endpoint2);
  ASSERT_TRUE(t.ok());
  endpoint2.Attach(t.value().get());
  ASSERT_TRUE(t.value()->Init().ok() && t.value()->Start().ok());
  auto p = t.value()->Connect(server_->address());
  ASSERT_TRUE(p.ok());
  auto r = endpoint2.CallSync(p.value(), kListLogs, Encode(ListLogsRequest{4}), kTimeout);
  ASSERT_TRUE(r.ok());
  ListLogsResponse list;
  ASSERT_TRUE(Decode(r.value(), &list).ok());
  ASSERT_EQ(list.files.size(), 1u);
  EXPECT_EQ(list.files[0].persisted_length, 100u);
  t.value()->Shutdown();
}

// A fence makes the older owner's file read-only under a fresh rkey: its WRITEs fail, the
// bytes it wrote before stay readable, and its opens, deletes, in-sync marks and fences are
// refused Fenced. An opener of the newest epoch takes the file over, writable under yet
// another rkey.
TEST_F(LogcServerTest, FenceMakesOlderFilesReadOnlyUnderAFreshRkey) {
  std::set<uint32_t> rkeys;
  auto f = OpenAt(1, 5, 1 << 16, false, 1);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  rkeys.insert(f->addr.rkey);
  Fill(5000, 9);
  ASSERT_TRUE(OneSided(true, f->addr, 3000).ok());
  auto other = OpenAt(2, 5, 4096, false, 1);  // another range: untouched
  ASSERT_TRUE(other.ok());

  auto fenced = Fence(1, 2);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  EXPECT_EQ(fenced->files_fenced, 1u);
  Status w = OneSided(true, f->addr, 10);
  EXPECT_TRUE(w.IsPermissionDenied()) << w.ToString();
  EXPECT_TRUE(OneSided(true, other->addr, 10).ok());
  auto list = List(1);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->files.size(), 1u);
  const transport::RemoteAddr ro = list->files[0].addr;
  EXPECT_EQ(ro.addr, f->addr.addr);
  EXPECT_TRUE(rkeys.insert(ro.rkey).second) << "an rkey was reused";
  ASSERT_TRUE(OneSided(false, ro, 3001).ok());
  EXPECT_EQ(std::memcmp(back_.get(), buf_.get(), 3000), 0);
  EXPECT_EQ(back_[3000], 0);
  EXPECT_FALSE(OneSided(true, ro, 10).ok()) << "a fenced region took a WRITE";

  // The older owner is refused everything that could change the range.
  EXPECT_TRUE(OpenAt(1, 5, 1 << 16, false, 1).status().IsFenced());
  EXPECT_TRUE(OpenAt(1, 6, 1 << 16, false, 0).status().IsFenced());  // legacy too
  DeleteLogsResponse d;
  DeleteLogsRequest del{1, {5}};
  del.owner_epoch = 1;
  EXPECT_TRUE(Call(kDeleteLogs, del, &d).IsFenced());
  MarkInSyncRequest mark{1, 0, false};
  mark.owner_epoch = 1;
  EXPECT_TRUE(endpoint_.CallSync(peer_, kMarkInSync, Encode(mark), kTimeout).status().IsFenced());
  EXPECT_TRUE(Fence(1, 1).status().IsFenced());
  EXPECT_EQ(Fence(1, 0).status().code(), Status::Code::kInvalidArgument);
  // The same fence again is idempotent; another range is not fenced past its own epoch (1,
  // from its first open).
  auto again = Fence(1, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_fenced, 0u);
  EXPECT_TRUE(OpenAt(2, 6, 4096, false, 1).ok());

  // The new owner takes the file over (re-replicating a recovered log here).
  auto taken = OpenAt(1, 5, 1 << 16, false, 2);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_TRUE(rkeys.insert(taken->addr.rkey).second) << "an rkey was reused";
  ASSERT_TRUE(OneSided(true, taken->addr, 3000).ok());
  EXPECT_TRUE(OneSided(true, f->addr, 10).IsPermissionDenied());
  // Its delete is accepted.
  del.owner_epoch = 2;
  ASSERT_TRUE(Call(kDeleteLogs, del, &d).ok());
  EXPECT_EQ(d.files_deleted, 1u);
  // The LogC persists (--logc_persist): the fence is on disk.
  std::ifstream fence_file(dir_ + "/logs/r1.fence");
  std::string text((std::istreambuf_iterator<char>(fence_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "2\n");
}

// A newer owner's first open fences the range at a LogC that missed its kFenceLogs.
TEST_F(LogcServerTest, ANewerOpenFencesTheRange) {
  auto f = OpenAt(1, 5, 4096, false, 1);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(OpenAt(1, 9, 4096, false, 3).ok());
  EXPECT_TRUE(OneSided(true, f->addr, 10).IsPermissionDenied());
  EXPECT_TRUE(OpenAt(1, 5, 4096, false, 2).status().IsFenced());
  EXPECT_TRUE(Fence(1, 2).status().IsFenced());
}

// Disk mode: the fence drains the file (persisted == received) before it answers, refuses
// the older owner's immediates without advancing `received`, and survives a restart.
TEST_F(LogcServerTest, PersistedFenceDrainsRefusesImmediatesAndSurvivesRestart) {
  auto f = OpenAt(3, 7, 1 << 16, true, 1);
  auto g = OpenAt(4, 1, 1 << 16, true, 0);  // another range's file, to carry an immediate
  ASSERT_TRUE(f.ok() && g.ok());
  Fill(1 << 16, 4);
  // Appends in flight when the fence comes: the fence answers only once they are on disk.
  std::vector<std::promise<Status>> writes(20);
  uint64_t sent = 0;
  for (auto& w : writes) {
    ASSERT_TRUE(transport_
                    ->Write(peer_, src_, sent, 1000,
                            transport::RemoteAddr{f->addr.addr + sent, f->addr.rkey}, f->handle,
                            [&w](const Status& s) { w.set_value(s); })
                    .ok());
    sent += 1000;
  }
  auto fenced = Fence(3, 2);
  ASSERT_TRUE(fenced.ok()) << fenced.status().ToString();
  uint64_t completed = 0;
  for (auto& w : writes) completed += w.get_future().get().ok() ? 1000 : 0;
  auto list = List(3);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->files.size(), 1u);
  const LogFileInfo info = list->files[0];
  EXPECT_EQ(info.persisted_length, info.length) << "the fence answered before the drain";
  EXPECT_LE(info.length, completed);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/logs/r3.fence"));

  // An immediate for the fenced file (carried by a WRITE into another file) is refused
  // Fenced and not received.
  ASSERT_TRUE(OneSided(true, g->addr, 100, f->handle).ok());
  ASSERT_TRUE(test::WaitFor([&] {
    LogPersisted p;
    return persisted_.Last(f->handle, &p) && p.status.IsFenced();
  }));
  EXPECT_EQ(List(3)->files[0].length, info.length);
  EXPECT_FALSE(OneSided(true, info.addr, 10, f->handle).ok());

  RestartServer();
  auto after = List(3);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->files.size(), 1u);
  EXPECT_EQ(after->files[0].persisted_length, info.persisted_length);
  EXPECT_FALSE(OneSided(true, after->files[0].addr, 10).ok()) << "reloaded writable";
  ASSERT_TRUE(OneSided(false, after->files[0].addr, info.length).ok());
  EXPECT_EQ(std::memcmp(back_.get(), buf_.get(), info.length), 0);
  EXPECT_TRUE(OpenAt(3, 7, 1 << 16, true, 1).status().IsFenced());
  EXPECT_TRUE(Fence(3, 1).status().IsFenced());
  auto same = Fence(3, 2);
  ASSERT_TRUE(same.ok());
  // The new owner takes the reloaded file over and appends after it.
  auto taken = OpenAt(3, 7, 1 << 16, true, 2);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->length, info.length);
  ASSERT_TRUE(OneSided(true,
                       transport::RemoteAddr{taken->addr.addr + info.length, taken->addr.rkey}, 10,
                       taken->handle)
                  .ok());
  ASSERT_TRUE(WaitPersisted(taken->handle, info.length + 10));
  // A newer fence after the restart is written over the old one.
  ASSERT_TRUE(Fence(3, 5).ok());
  RestartServer();
  EXPECT_TRUE(OpenAt(3, 8, 4096, true, 4).status().IsFenced());
  EXPECT_TRUE(OpenAt(3, 8, 4096, true, 5).ok());
}

}  // namespace
}  // namespace nova::logc
