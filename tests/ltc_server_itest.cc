// Multi-process tests of nova_ltc, its client library and nova_cli: 3 nova_stoc and two
// nova_ltc daemons (--engine=nova) splitting 4 ranges, plus a --engine=leveldb LTC.
#include <gtest/gtest.h>

#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "client/ltc_connection.h"
#include "client/nova_client.h"
#include "common/clock.h"
#include "common/coding.h"
#include "common/transport/tcp_socket.h"
#include "common/wire/message.h"
#include "ltc/protocol/client_protocol.h"
#include "ltc/server/ltc_assignment.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

namespace nova {
namespace {

using namespace std::chrono_literals;
using client::ClientOptions;
using client::NovaClient;
using ltc::ClientMsg;

constexpr int kStocs = 3;
constexpr uint64_t kEpoch = 5;  // the LTCs' static epoch

// One key in each of the 4 equal ranges (split at 0x40, 0x80, 0xc0).
std::string KeyIn(int range, const std::string& suffix) {
  static const char kFirst[] = {'\x10', '\x50', '\x90', '\xd0'};
  return std::string(1, kFirst[range]) + suffix;
}

// The LTC's connection-level error message type (docs/protocol.md "Connection-level
// errors"): request id 0, error flag, then the LTC closes the connection.
constexpr uint16_t kConnectionErrorType = 0x0300;

// A plain TCP connection to an LTC's client port that sends whatever bytes the test gives
// it, for requests the client library would never send. Reads are bounded by deadlines.
class RawConn {
 public:
  static std::unique_ptr<RawConn> Connect(const std::string& addr) {
    auto fd = transport::ConnectTcp(addr, Deadline::After(5s));
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return nullptr;
    return std::unique_ptr<RawConn>(new RawConn(fd.value()));
  }
  ~RawConn() { ::close(fd_); }

  Status Send(std::string_view bytes) {
    return transport::WriteFully(fd_, bytes.data(), bytes.size(), Deadline::After(5s));
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads one whole message. IOError/TimedOut/NetworkError if the stream ends or stalls.
  Status Read(wire::MessageHeader* h, std::string* payload,
              std::chrono::milliseconds timeout = 10s) {
    const Deadline deadline = Deadline::After(timeout);
    std::string header(wire::kHeaderBytes, '\0');
    NOVA_RETURN_NOT_OK(transport::ReadFully(fd_, header.data(), header.size(), deadline));
    size_t total = 0;
    NOVA_RETURN_NOT_OK(wire::PeekMessageLength(header, kMaxResponse, &total));
    std::string message = header;
    message.resize(total);
    NOVA_RETURN_NOT_OK(
        transport::ReadFully(fd_, message.data() + header.size(), total - header.size(), deadline));
    std::string_view p;
    NOVA_RETURN_NOT_OK(wire::DecodeMessage(message, h, &p, kMaxResponse));
    payload->assign(p);
    return Status::OK();
  }

  // Reads one response and returns the error it carries (OK for a success response, whose
  // payload goes to *payload). Checks that it answers (type, request_id).
  Status Call(uint16_t type, uint64_t request_id, std::string* payload = nullptr) {
    wire::MessageHeader h;
    std::string p;
    Status s = Read(&h, &p);
    if (!s.ok()) return s.Prepend("no response");
    EXPECT_TRUE(h.is_response());
    EXPECT_EQ(h.type, type);
    EXPECT_EQ(h.request_id, request_id);
    if (payload != nullptr) *payload = p;
    return h.is_error() ? wire::DecodeErrorPayload(p) : Status::OK();
  }

  // True if the LTC closes the connection (EOF, or a reset) within `timeout` without
  // sending anything more.
  bool ClosedByPeer(std::chrono::milliseconds timeout = 10s) {
    const Deadline deadline = Deadline::After(timeout);
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining());
      if (left.count() <= 0) return false;
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char c;
      const ssize_t n = ::recv(fd_, &c, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      return n == 0 || (n < 0 && errno == ECONNRESET);
    }
  }

 private:
  static constexpr size_t kMaxResponse = 8 << 20;
  explicit RawConn(int fd) : fd_(fd) {}
  const int fd_;
};

// A well-formed request frame.
std::string Frame(ltc::ClientMsg type, uint64_t request_id, const std::string& payload) {
  return wire::EncodeMessage(static_cast<uint16_t>(type), request_id, payload);
}

class LtcServerITest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::TestTempDir("ltc_server_itest"));
    auto secret = test::WriteClusterSecret(*dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    secret_ = new std::string(secret.value());
    std::string stoc_list;
    for (int id = 1; id <= kStocs; ++id) {
      stocs_[id] = new test::ExternalDaemon(test::StocDaemonOptions(
          *dir_, *secret_, id, {"--stoc_memory_limit_mb=128", "--stoc_file_buffer_mb=32"}));
      Status s = stocs_[id]->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stoc_list +=
          (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" + stocs_[id]->address();
    }
    for (int i = 0; i < 2; ++i) {
      ltcs_[i] = StartLtc("ltc-" + std::to_string(i + 1),
                          {"--engine=nova", "--ltc_id=" + std::to_string(i + 1), "--ranges=4",
                           i == 0 ? "--ltc_ranges=0,1" : "--ltc_ranges=2,3",
                           "--ltc_epoch=" + std::to_string(kEpoch), "--stoc=" + stoc_list,
                           "--ltc_memtable_size_mb=1", "--ltc_sstable_size_mb=1",
                           "--ltc_max_key_bytes=64", "--ltc_max_value_bytes=65536",
                           "--ltc_max_batch_ops=50", "--ltc_max_request_mb=1",
                           "--ltc_client_threads=3"});
    }
    leveldb_ = StartLtc("ltc-leveldb", {"--engine=leveldb", "--ltc_id=9", "--ranges=2",
                                        "--ltc_max_connections=3"});
  }

  static test::ExternalDaemon* StartLtc(const std::string& id, std::vector<std::string> flags) {
    auto* d =
        new test::ExternalDaemon(test::LtcDaemonOptions(*dir_, *secret_, id, std::move(flags)));
    Status s = d->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return d;
  }

  static void TearDownTestSuite() {
    delete leveldb_;
    for (auto*& d : ltcs_) delete d;
    for (auto& [id, d] : stocs_) delete d;
    stocs_.clear();
  }

  std::unique_ptr<NovaClient> Client(std::vector<std::string> ltcs,
                                     std::chrono::milliseconds timeout = 10s) {
    ClientOptions o;
    o.ltcs = std::move(ltcs);
    o.timeout = timeout;
    auto c = std::make_unique<NovaClient>(o);
    Status s = c->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  }
  std::unique_ptr<NovaClient> ClusterClient(std::chrono::milliseconds timeout = 10s) {
    return Client({ltcs_[0]->address(), ltcs_[1]->address()}, timeout);
  }

  // One raw request on a fresh connection (bypassing the client's routing).
  static std::pair<Status, std::string> Raw(const std::string& addr, ClientMsg type,
                                            const std::string& payload) {
    auto c = client::LtcConnection::Connect(addr, Deadline::After(5s), 64 << 20);
    if (!c.ok()) return {c.status(), ""};
    std::promise<std::pair<Status, std::string>> p;
    c.value()->Call(static_cast<uint16_t>(type), payload, Deadline::After(10s),
                    [&p](const Status& s, std::string r) { p.set_value({s, std::move(r)}); });
    return p.get_future().get();
  }

  struct CliResult {
    int exit_code;
    std::string out, err;
  };
  // Runs nova_cli with `args` (shell-quoted by the caller) against `ltcs` (by default the
  // two nova LTCs) and captures its output.
  static CliResult Cli(const std::string& args, std::string ltcs = "") {
    if (ltcs.empty()) ltcs = ltcs_[0]->address() + "," + ltcs_[1]->address();
    const std::string err_path = *dir_ + "/cli.err";
    const std::string cmd = test::BinDir() + "/nova_cli --ltc=" + ltcs + " --timeout_ms=5000 " +
                            args + " 2>" + err_path;
    CliResult r{-1, "", ""};
    FILE* f = ::popen(cmd.c_str(), "r");
    if (f == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
    const int st = ::pclose(f);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::ifstream e(err_path);
    r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
    return r;
  }

  static std::string* dir_;
  static std::string* secret_;
  static std::map<int, test::ExternalDaemon*> stocs_;
  static test::ExternalDaemon* ltcs_[2];
  static test::ExternalDaemon* leveldb_;
};

std::string* LtcServerITest::dir_ = nullptr;
std::string* LtcServerITest::secret_ = nullptr;
std::map<int, test::ExternalDaemon*> LtcServerITest::stocs_;
test::ExternalDaemon* LtcServerITest::ltcs_[2] = {nullptr, nullptr};
test::ExternalDaemon* LtcServerITest::leveldb_ = nullptr;

TEST_F(LtcServerITest, CrudBatchesAndScansAcrossRangesAndLtcs) {
  auto c = ClusterClient();
  const client::RoutingTable t = c->routing();
  ASSERT_EQ(t.routes.size(), 4u);
  EXPECT_EQ(t.epoch, kEpoch);
  std::map<std::string, std::string> model;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 50; ++i) {
      const std::string k = KeyIn(r, "crud" + std::to_string(1000 + i));
      const std::string v = "v" + std::to_string(r * 1000 + i);
      ASSERT_TRUE(c->Put(k, v).ok());
      model[k] = v;
    }
  }
  for (const auto& [k, v] : model) {
    auto g = c->Get(k);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g.value(), v);
  }
  // Deletes in every range.
  for (int r = 0; r < 4; ++r) {
    const std::string k = KeyIn(r, "crud1000");
    ASSERT_TRUE(c->Delete(k).ok());
    model.erase(k);
    EXPECT_TRUE(c->Get(k).status().IsNotFound());
  }
  // A batch spanning all four ranges (and both LTCs) is split per range.
  std::vector<ltc::BatchEntry> batch;
  for (int r = 0; r < 4; ++r) {
    batch.push_back({ltc::BatchOp::kPut, KeyIn(r, "crud9999"), "batched"});
    batch.push_back({ltc::BatchOp::kDelete, KeyIn(r, "crud1001"), ""});
    model[KeyIn(r, "crud9999")] = "batched";
    model.erase(KeyIn(r, "crud1001"));
  }
  ASSERT_TRUE(c->Write(batch).ok());
  // A full scan crosses both LTCs and returns exactly the model, in order.
  std::vector<std::pair<std::string, std::string>> got;
  ASSERT_TRUE(c->Scan(KeyIn(0, "crud"), 100000, &got).ok());
  std::vector<std::pair<std::string, std::string>> want;
  for (const auto& kv : model) {
    if (kv.first >= KeyIn(0, "crud")) want.push_back(kv);
  }
  // Other tests may have written keys too: keep only this test's.
  std::vector<std::pair<std::string, std::string>> mine;
  for (auto& kv : got) {
    if (kv.first.substr(1, 4) == "crud") mine.push_back(kv);
  }
  EXPECT_EQ(mine, want);
  // A limited scan starting in range 1 stops at the limit.
  got.clear();
  ASSERT_TRUE(c->Scan(KeyIn(1, "crud"), 60, &got).ok());
  ASSERT_EQ(got.size(), 60u);
  EXPECT_EQ(got.front().first, KeyIn(1, "crud1002"));
  auto n = c->Count(KeyIn(0, "crud"), KeyIn(3, "crud~"));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value(), want.size());
  // Snapshots: a read at a snapshot does not see later writes.
  const std::string sk = KeyIn(2, "snap");
  ASSERT_TRUE(c->Put(sk, "old").ok());
  auto snap = c->GetSnapshot(sk);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(c->Put(sk, "new").ok());
  auto at = c->GetAt(snap.value(), sk);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(at.value(), "old");
  EXPECT_EQ(c->Get(sk).value(), "new");
  EXPECT_TRUE(c->ReleaseSnapshot(snap.value()).ok());
}

TEST_F(LtcServerITest, WrongRangeForUnownedRangeAndOldEpoch) {
  // LTC 1 owns ranges 0 and 1 only.
  auto [s, p] = Raw(ltcs_[0]->address(), ClientMsg::kGet,
                    ltc::EncodeKeyRequest(ClientMsg::kGet, {kEpoch, KeyIn(2, "x"), "", 0}));
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  EXPECT_EQ(ltc::ParseWrongRangeEpoch(s), kEpoch);
  // An old epoch is refused even for an owned key.
  std::tie(s, p) = Raw(ltcs_[0]->address(), ClientMsg::kPut,
                       ltc::EncodeKeyRequest(ClientMsg::kPut, {kEpoch - 1, KeyIn(0, "x"), "v", 0}));
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  EXPECT_EQ(ltc::ParseWrongRangeEpoch(s), kEpoch);
  // A batch spanning two ranges of the same LTC is refused as a whole.
  std::tie(s, p) = Raw(ltcs_[0]->address(), ClientMsg::kWrite,
                       ltc::EncodeWriteRequest({kEpoch,
                                                {{ltc::BatchOp::kPut, KeyIn(0, "a"), "1"},
                                                 {ltc::BatchOp::kPut, KeyIn(1, "a"), "1"}}}));
  EXPECT_TRUE(s.IsWrongRange()) << s.ToString();
  // A newer epoch than the LTC's: not yet, retry.
  std::tie(s, p) = Raw(ltcs_[0]->address(), ClientMsg::kGet,
                       ltc::EncodeKeyRequest(ClientMsg::kGet, {kEpoch + 1, KeyIn(0, "x"), "", 0}));
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  // A client that knows only LTC 1 cannot reach range 2: a clear error at its deadline.
  auto c = Client({ltcs_[0]->address()}, 500ms);
  Status put = c->Put(KeyIn(2, "x"), "v");
  EXPECT_TRUE(put.IsUnavailable()) << put.ToString();
  EXPECT_NE(put.message().find("deadline"), std::string::npos) << put.ToString();
}

TEST_F(LtcServerITest, LimitsGiveClearErrors) {
  auto c = ClusterClient();
  Status s = c->Put(std::string(65, 'k'), "v");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("--ltc_max_key_bytes"), std::string::npos) << s.ToString();
  s = c->Put("k", std::string(65537, 'v'));
  EXPECT_NE(s.message().find("--ltc_max_value_bytes"), std::string::npos) << s.ToString();
  std::vector<ltc::BatchEntry> big(51, ltc::BatchEntry{ltc::BatchOp::kDelete, KeyIn(0, "b"), ""});
  s = c->Write(big);
  EXPECT_NE(s.message().find("--ltc_max_batch_ops"), std::string::npos) << s.ToString();
  // A request over --ltc_max_request_mb is refused by the client before sending (it knows the
  // LTC's limits; the LTC's own refusal is checked with raw frames below).
  std::vector<ltc::BatchEntry> fat;
  for (int i = 0; i < 20; ++i)
    fat.push_back({ltc::BatchOp::kPut, KeyIn(0, "f" + std::to_string(i)), std::string(60000, 'x')});
  s = c->Write(fat);
  EXPECT_NE(s.message().find("--ltc_max_request_mb"), std::string::npos) << s.ToString();
  // The client goes on working.
  EXPECT_TRUE(c->Put(KeyIn(0, "after-limit"), "ok").ok());
  // Connections over --ltc_max_connections (3 on the leveldb LTC) are refused with a reason.
  std::vector<std::shared_ptr<client::LtcConnection>> held;
  for (int i = 0; i < 3; ++i) {
    auto conn = client::LtcConnection::Connect(leveldb_->address(), Deadline::After(5s), 1 << 20);
    ASSERT_TRUE(conn.ok());
    std::promise<Status> p;
    conn.value()->Call(static_cast<uint16_t>(ClientMsg::kDescribe), "", Deadline::After(5s),
                       [&p](const Status& st, std::string) { p.set_value(st); });
    ASSERT_TRUE(p.get_future().get().ok());
    held.push_back(conn.value());
  }
  auto [rs, rp] = Raw(leveldb_->address(), ClientMsg::kDescribe, "");
  EXPECT_TRUE(rs.IsResourceExhausted()) << rs.ToString();
  EXPECT_NE(rs.message().find("--ltc_max_connections"), std::string::npos) << rs.ToString();
}

TEST_F(LtcServerITest, LevelDbEngineServesTheSameProtocol) {
  auto c = Client({leveldb_->address()});
  ASSERT_EQ(c->routing().routes.size(), 2u);
  ASSERT_TRUE(c->Put("a", "1").ok());
  ASSERT_TRUE(c->Put("\xf0z", "2").ok());
  ASSERT_TRUE(c->Write({{ltc::BatchOp::kPut, "b", "3"}, {ltc::BatchOp::kDelete, "a", ""}}).ok());
  EXPECT_TRUE(c->Get("a").status().IsNotFound());
  EXPECT_EQ(c->Get("b").value(), "3");
  std::vector<std::pair<std::string, std::string>> got;
  ASSERT_TRUE(c->Scan("", 10, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].first, "\xf0z");
  auto snap = c->GetSnapshot("b");
  ASSERT_TRUE(snap.ok());
  ASSERT_TRUE(c->Put("b", "4").ok());
  EXPECT_EQ(c->GetAt(snap.value(), "b").value(), "3");
  EXPECT_TRUE(c->ReleaseSnapshot(snap.value()).ok());
}

// Writes `contents` to a file of the test directory with mode 0600; returns its path.
std::string WriteSecretFile(const std::string& dir, const std::string& name,
                            const std::string& contents) {
  const std::string path = dir + "/" + name;
  {
    std::ofstream out(path, std::ios::trunc);
    out << contents;
  }
  EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
  return path;
}

// An LTC started with --ltc_client_secret_file serves nova_cli and the client library only
// with the same secret (--client_secret_file, ClientOptions::client_secret); without it, or
// with another one, they fail at once with PermissionDenied naming the flag.
TEST_F(LtcServerITest, ClientSecretIsRequiredByAnLtcThatHasOne) {
  const std::string secret = WriteSecretFile(*dir_, "client.secret", "the client secret\n");
  const std::string wrong = WriteSecretFile(*dir_, "wrong.secret", "another secret\n");
  std::unique_ptr<test::ExternalDaemon> ltc(
      StartLtc("ltc-auth", {"--engine=leveldb", "--ltc_id=10", "--ranges=1",
                            "--ltc_client_secret_file=" + secret}));
  ASSERT_TRUE(ltc->IsRunning());
  const std::string addr = ltc->address();

  CliResult r = Cli("put authkey v", addr);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("PermissionDenied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--client_secret_file"), std::string::npos) << r.err;
  r = Cli("--client_secret_file=" + wrong + " put authkey v", addr);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("wrong client secret"), std::string::npos) << r.err;
  r = Cli("--client_secret_file=" + *dir_ + "/missing.secret put authkey v", addr);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("--client_secret_file"), std::string::npos) << r.err;

  r = Cli("--client_secret_file=" + secret + " put authkey v", addr);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Cli("--client_secret_file=" + secret + " get authkey", addr);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "v\n");

  // The library: refused at Init, long before its deadline (PermissionDenied is final).
  ClientOptions o;
  o.ltcs = {addr};
  o.timeout = 30s;
  {
    NovaClient refused(o);
    const MonoTime start = MonoNow();
    const Status s = refused.Init();
    EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
    EXPECT_LT(MonoNow() - start, 10s);
  }
  o.client_secret = "the client secret";
  NovaClient client(o);
  ASSERT_TRUE(client.Init().ok());
  auto got = client.Get("authkey");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), "v");
  // A secret given to LTCs that require none is harmless.
  r = Cli("--client_secret_file=" + secret + " get clinope");
  EXPECT_EQ(r.exit_code, 1) << r.err;
}

TEST_F(LtcServerITest, CliCommandsExitCodesAndHex) {
  CliResult r = Cli("put clikey clivalue");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Cli("get clikey");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "clivalue\n");
  r = Cli("get clinope");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "not found\n");
  // Hex keys and values: the key 0xd0 0x00 lives in range 3 (LTC 2).
  r = Cli("--hex --hex_values put d000 00ff");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Cli("--hex --hex_values get d000");
  EXPECT_EQ(r.out, "00ff\n");
  r = Cli("--hex --hex_values scan d000 --limit=1");
  EXPECT_EQ(r.out, "d000\t00ff\n");
  r = Cli("--hex count d000 d001");
  EXPECT_EQ(r.out, "1\n") << r.err;
  r = Cli("delete clikey");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(Cli("get clikey").exit_code, 1);
  r = Cli("scan clikey --limit=1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Cli("stats");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("engine=nova"), std::string::npos) << r.out;
  r = Cli("--hex get zz");
  EXPECT_EQ(r.exit_code, 2);
  r = Cli("--zk=localhost:2181 get a");  // (ZooKeeper mode: tests/local_cluster_itest.sh)
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--zk and --cluster go together"), std::string::npos) << r.err;
  r = Cli("put " + std::string(65, 'k') + " v");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("--ltc_max_key_bytes"), std::string::npos) << r.err;
}

TEST_F(LtcServerITest, ConcurrentPipelinedClients) {
  auto c = ClusterClient();
  constexpr int kThreads = 4, kPerThread = 300;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::future<Status>> puts;
      for (int i = 0; i < kPerThread; ++i) {
        const std::string k = KeyIn(i % 4, "pipe" + std::to_string(t) + "-" + std::to_string(i));
        puts.push_back(c->PutFuture(k, k + "=v"));
      }
      for (auto& f : puts) failures += f.get().ok() ? 0 : 1;
      std::vector<std::pair<std::string, std::future<Result<std::string>>>> gets;
      for (int i = 0; i < kPerThread; ++i) {
        const std::string k = KeyIn(i % 4, "pipe" + std::to_string(t) + "-" + std::to_string(i));
        gets.emplace_back(k, c->GetFuture(k));
      }
      for (auto& [k, f] : gets) {
        auto r = f.get();
        if (!r.ok() || r.value() != k + "=v") ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// Reads `n` responses from `c` (they may come in any order) into request id -> (header,
// error carried, or OK). A missing response is recorded as a failure.
std::map<uint64_t, std::pair<wire::MessageHeader, Status>> ReadResponses(RawConn* c, int n) {
  std::map<uint64_t, std::pair<wire::MessageHeader, Status>> out;
  for (int i = 0; i < n; ++i) {
    wire::MessageHeader h;
    std::string p;
    Status s = c->Read(&h, &p);
    if (!s.ok()) {
      ADD_FAILURE() << "response " << i + 1 << " of " << n << ": " << s.ToString();
      break;
    }
    EXPECT_TRUE(h.is_response());
    EXPECT_EQ(out.count(h.request_id), 0u) << "two responses to request " << h.request_id;
    out[h.request_id] = {h, h.is_error() ? wire::DecodeErrorPayload(p) : Status::OK()};
  }
  return out;
}

// Bad input on some connections gets the documented error (docs/protocol.md) and never
// disturbs the LTC's other clients: a well-behaved client keeps getting right answers from
// the same LTC throughout, and the LTC stays up.
TEST_F(LtcServerITest, BadRequestsGetErrorsAndOthersKeepBeingServed) {
  const std::string addr = ltcs_[0]->address();   // LTC 1: ranges 0 and 1, 64-byte keys, 1 MiB
  constexpr uint64_t kMaxRequestBytes = 1 << 20;  // its --ltc_max_request_mb=1

  // The well-behaved client: puts and reads back keys of LTC 1 until told to stop.
  std::atomic<bool> stop{false};
  std::atomic<int> good_ops{0};
  std::atomic<int> good_failures{0};
  std::mutex failure_mu;
  std::string first_failure;
  std::thread good([&] {
    auto c = ClusterClient();
    constexpr int kMaxOps = 1000000;  // a bound; the test stops it long before
    for (int i = 0; i < kMaxOps && !stop; ++i) {
      const std::string k = KeyIn(i % 2, "robust-good-" + std::to_string(i));
      const std::string v = "v" + std::to_string(i);
      Status put = c->Put(k, v);
      Result<std::string> get = c->Get(k);
      if (!put.ok() || !get.ok() || get.value() != v) {
        std::lock_guard<std::mutex> l(failure_mu);
        if (good_failures++ == 0) {
          first_failure = k + ": put " + put.ToString() + ", get " +
                          (get.ok() ? "'" + get.value() + "'" : get.status().ToString());
        }
      }
      ++good_ops;
    }
  });
  // Waits until the good client has completed a few more operations.
  auto expect_good_client_served = [&](const char* after) {
    const int before = good_ops.load();
    EXPECT_TRUE(test::WaitFor([&] { return good_ops.load() >= before + 3; }, 20s))
        << "the well-behaved client made no progress after: " << after;
  };
  expect_good_client_served("start");

  const std::string truncated_key = KeyIn(0, "robust-truncated");
  const std::string put = Frame(
      ClientMsg::kPut, 7, ltc::EncodeKeyRequest(ClientMsg::kPut, {kEpoch, truncated_key, "v", 0}));

  // (a) Truncated frames: the connection closes mid-frame. Nothing arrived whole, so
  // nothing is answered or applied; the LTC just closes its side.
  {
    SCOPED_TRACE("(a) truncated frame, then a half-close");
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Send(put.substr(0, put.size() - 2)).ok());
    c->ShutdownWrite();
    EXPECT_TRUE(c->ClosedByPeer()) << "the LTC answered a frame it never received whole";
  }
  {
    SCOPED_TRACE("(a) truncated header, then a close");
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Send(put.substr(0, wire::kHeaderBytes / 2)).ok());
  }
  {
    SCOPED_TRACE("(a) a header promising a payload that never comes, then a close");
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Send(put.substr(0, wire::kHeaderBytes)).ok());
  }
  expect_good_client_served("truncated frames");
  EXPECT_TRUE(ClusterClient()->Get(truncated_key).status().IsNotFound());

  // (b) Unknown types get a per-request NotSupported, and malformed payloads of known types
  // a per-request Corruption; the connection stays usable.
  {
    SCOPED_TRACE("(b) unknown types and malformed payloads");
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    // (0x033e and 0x033f are the authentication handshake's, answered even without a
    // client secret: docs/protocol.md "Client authentication"; 0x033d is DeclareSynchronous,
    // which refuses a payload: below.)
    const std::vector<uint16_t> unknown = {0x033c, 0x03ff, kConnectionErrorType, 0x0100, 0x0001,
                                           0x0401, 0xffff};
    std::string frames;
    for (size_t i = 0; i < unknown.size(); ++i) {
      frames += wire::EncodeMessage(unknown[i], 100 + i, "some payload");
    }
    frames += Frame(ClientMsg::kGet, 200, "\x01\x02");         // truncated fields
    frames += Frame(ClientMsg::kDescribe, 201, "unexpected");  // Describe has no payload
    frames += Frame(ClientMsg::kWrite, 202, std::string(40, '\xff'));
    frames += Frame(ClientMsg::kDeclareSynchronous, 203, "unexpected");
    ASSERT_TRUE(c->Send(frames).ok());
    auto got = ReadResponses(c.get(), static_cast<int>(unknown.size()) + 4);
    for (size_t i = 0; i < unknown.size(); ++i) {
      ASSERT_EQ(got.count(100 + i), 1u) << "type " << unknown[i];
      const auto& [h, st] = got[100 + i];
      EXPECT_EQ(h.type, unknown[i]);
      EXPECT_TRUE(h.is_error());
      EXPECT_EQ(st.code(), Status::Code::kNotSupported)
          << "type " << unknown[i] << ": " << st.ToString();
    }
    for (uint64_t id : {200, 201, 202, 203}) {
      ASSERT_EQ(got.count(id), 1u) << id;
      EXPECT_TRUE(got[id].second.IsCorruption()) << id << ": " << got[id].second.ToString();
    }
    EXPECT_EQ(got[200].first.type, static_cast<uint16_t>(ClientMsg::kGet));
    // The same connection still serves.
    ASSERT_TRUE(c->Send(Frame(ClientMsg::kDescribe, 203, "")).ok());
    std::string payload;
    Status s = c->Call(static_cast<uint16_t>(ClientMsg::kDescribe), 203, &payload);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ltc::DescribeResponse d;
    ASSERT_TRUE(ltc::DecodeDescribeResponse(payload, &d).ok());
    EXPECT_EQ(d.ltc_id, 1u);
    EXPECT_EQ(d.epoch, kEpoch);
  }
  expect_good_client_served("unknown types");

  // (c) A stream that cannot be parsed: one connection-level error (type 0x0300, request
  // id 0), then the LTC closes the connection. A frame over the request limit: that
  // request's InvalidArgument, then the close (the LTC will not read the payload).
  struct Damaged {
    const char* what;
    std::string bytes;
    uint16_t type;        // of the error response
    uint64_t request_id;  // of the error response
    Status::Code code;
    const char* message;  // in the error's message
  };
  auto damage = [&](size_t offset, char value) {
    std::string f = put;
    f[offset] = value;
    return f;
  };
  std::string bad_crc = put;
  bad_crc.back() ^= 0x01;
  std::string over_limit = put.substr(0, wire::kHeaderBytes);
  EncodeFixed32(over_limit.data() + 16, static_cast<uint32_t>(kMaxRequestBytes));
  std::string huge = put.substr(0, wire::kHeaderBytes);
  EncodeFixed32(huge.data() + 16, UINT32_MAX);
  const std::vector<Damaged> damaged = {
      {"bad magic", damage(0, 'X'), kConnectionErrorType, 0, Status::Code::kCorruption, "magic"},
      {"bad crc", bad_crc, kConnectionErrorType, 0, Status::Code::kCorruption, "crc"},
      {"non-zero reserved field", damage(6, 1), kConnectionErrorType, 0, Status::Code::kCorruption,
       "reserved"},
      // (message.h: another wire version is NotSupported.)
      {"unknown wire version", damage(2, 9), kConnectionErrorType, 0, Status::Code::kNotSupported,
       "version"},
      {"a response sent by the client",
       wire::EncodeMessage(static_cast<uint16_t>(ClientMsg::kDescribe), 8, "", wire::kFlagResponse),
       kConnectionErrorType, 0, Status::Code::kCorruption, "a client sent a response"},
      {"payload length over --ltc_max_request_mb", over_limit,
       static_cast<uint16_t>(ClientMsg::kPut), 7, Status::Code::kInvalidArgument,
       "--ltc_max_request_mb"},
      {"payload length 4 GiB", huge, static_cast<uint16_t>(ClientMsg::kPut), 7,
       Status::Code::kInvalidArgument, "--ltc_max_request_mb"},
  };
  for (const Damaged& d : damaged) {
    SCOPED_TRACE(std::string("(c) ") + d.what);
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Send(d.bytes).ok());
    Status s = c->Call(d.type, d.request_id);
    EXPECT_EQ(s.code(), d.code) << s.ToString();
    EXPECT_NE(s.message().find(d.message), std::string::npos) << s.ToString();
    EXPECT_TRUE(c->ClosedByPeer()) << "the LTC kept a broken stream open";
    expect_good_client_served(d.what);
  }
  // Garbage that is not Nova at all (an HTTP request, random bytes): an error response
  // naming the reason, then the close. Which error depends on where the garbage's "length"
  // field points: over the limit (InvalidArgument) or not (Corruption: bad magic).
  const uint64_t seed = test::TestSeed("BadRequestsGetErrorsAndOthersKeepBeingServed");
  std::mt19937_64 rnd(seed);
  std::string random_bytes(1000, '\0');
  for (char& ch : random_bytes) ch = static_cast<char>(rnd());
  for (const std::string& garbage :
       {std::string("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"), random_bytes}) {
    SCOPED_TRACE("(c) garbage, seed " + std::to_string(seed));
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Send(garbage).ok());
    wire::MessageHeader h;
    std::string p;
    Status s = c->Read(&h, &p);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(h.is_response() && h.is_error());
    Status carried = wire::DecodeErrorPayload(p);
    EXPECT_TRUE(carried.IsCorruption() || carried.code() == Status::Code::kInvalidArgument)
        << carried.ToString();
    if (carried.IsCorruption()) {
      EXPECT_EQ(h.type, kConnectionErrorType);
    }
    EXPECT_TRUE(c->ClosedByPeer());
    expect_good_client_served("garbage");
  }

  // (d) Well-formed requests with an oversized key (--ltc_max_key_bytes=64): each gets its
  // own InvalidArgument naming the flag, pipelined with good requests on the same
  // connection, which are served.
  {
    SCOPED_TRACE("(d) oversized keys");
    auto c = RawConn::Connect(addr);
    ASSERT_NE(c, nullptr);
    const std::string big = KeyIn(0, std::string(64, 'k'));  // 65 bytes
    const std::string ok_key = KeyIn(1, "robust-after-big-keys");
    const std::string batch_key = KeyIn(0, "robust-batch");
    std::string frames;
    frames +=
        Frame(ClientMsg::kPut, 1, ltc::EncodeKeyRequest(ClientMsg::kPut, {kEpoch, big, "v", 0}));
    frames +=
        Frame(ClientMsg::kGet, 2, ltc::EncodeKeyRequest(ClientMsg::kGet, {kEpoch, big, "", 0}));
    frames += Frame(ClientMsg::kDelete, 3,
                    ltc::EncodeKeyRequest(ClientMsg::kDelete, {kEpoch, big, "", 0}));
    frames += Frame(ClientMsg::kGetSnapshot, 4,
                    ltc::EncodeKeyRequest(ClientMsg::kGetSnapshot, {kEpoch, big, "", 0}));
    frames += Frame(
        ClientMsg::kWrite, 5,
        ltc::EncodeWriteRequest(
            {kEpoch, {{ltc::BatchOp::kPut, batch_key, "1"}, {ltc::BatchOp::kDelete, big, ""}}}));
    frames += Frame(ClientMsg::kScan, 6, ltc::EncodeScanRequest({kEpoch, big, 10, 0, false}));
    frames += Frame(ClientMsg::kPut, 10,
                    ltc::EncodeKeyRequest(ClientMsg::kPut, {kEpoch, ok_key, "fine", 0}));
    ASSERT_TRUE(c->Send(frames).ok());
    auto got = ReadResponses(c.get(), 7);
    for (uint64_t id = 1; id <= 6; ++id) {
      ASSERT_EQ(got.count(id), 1u) << id;
      const Status& st = got[id].second;
      EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << id << ": " << st.ToString();
      EXPECT_NE(
          st.message().find("key of 65 bytes exceeds the limit of 64 bytes (--ltc_max_key_bytes)"),
          std::string::npos)
          << id << ": " << st.ToString();
    }
    ASSERT_EQ(got.count(10), 1u);
    EXPECT_TRUE(got[10].second.ok()) << got[10].second.ToString();
    // Nothing of the refused batch was applied (it is atomic), and the good put was.
    ASSERT_TRUE(c->Send(Frame(ClientMsg::kGet, 11,
                              ltc::EncodeKeyRequest(ClientMsg::kGet, {kEpoch, ok_key, "", 0})))
                    .ok());
    std::string payload, value;
    Status s = c->Call(static_cast<uint16_t>(ClientMsg::kGet), 11, &payload);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(ltc::DecodeBytes(payload, &value).ok());
    EXPECT_EQ(value, "fine");
    ASSERT_TRUE(c->Send(Frame(ClientMsg::kGet, 12,
                              ltc::EncodeKeyRequest(ClientMsg::kGet, {kEpoch, batch_key, "", 0})))
                    .ok());
    s = c->Call(static_cast<uint16_t>(ClientMsg::kGet), 12);
    EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  }
  expect_good_client_served("oversized keys");

  stop = true;
  good.join();
  EXPECT_EQ(good_failures.load(), 0) << "first: " << first_failure;
  EXPECT_TRUE(ltcs_[0]->IsRunning());
  // A fresh client is served too.
  auto fresh = ClusterClient();
  ASSERT_TRUE(fresh->Put(KeyIn(0, "robust-end"), "yes").ok());
  EXPECT_EQ(fresh->Get(KeyIn(0, "robust-end")).value(), "yes");
}

// Runs last (gtest runs tests in definition order): it kills LTC 2.
TEST_F(LtcServerITest, KilledLtcFailsCallsWithinTheirDeadline) {
  auto c = ClusterClient(1500ms);
  ASSERT_TRUE(c->Put(KeyIn(3, "kill"), "v").ok());
  ltcs_[1]->Kill();
  const MonoTime start = MonoNow();
  auto g = c->Get(KeyIn(3, "kill"));
  const auto took = MonoNow() - start;
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(g.status().IsNetworkError() || g.status().IsUnavailable()) << g.status().ToString();
  EXPECT_NE(g.status().message().find("deadline"), std::string::npos) << g.status().ToString();
  EXPECT_LT(took, 1500ms + 2s);
  // Ranges on the surviving LTC still work.
  EXPECT_TRUE(c->Put(KeyIn(0, "kill"), "v").ok());
  // Pipelined calls outstanding when the LTC dies fail too, none hangs.
  ASSERT_TRUE(ltcs_[1]->Restart().ok());
  auto c2 = ClusterClient(1500ms);
  std::vector<std::future<Status>> futures;
  for (int i = 0; i < 100; ++i) futures.push_back(c2->PutFuture(KeyIn(2, std::to_string(i)), "v"));
  ltcs_[1]->Kill();
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  }
}

// ---- Big entries (issue 19) ---------------------------------------------------------------

// Sum of `name`=N over every range line of the LTCs' Stats text (range_backend.cc).
uint64_t SumStat(const std::string& stats, const std::string& name) {
  uint64_t sum = 0;
  const std::string key = " " + name + "=";
  for (size_t at = stats.find(key); at != std::string::npos; at = stats.find(key, at + 1)) {
    sum += std::strtoull(stats.c_str() + at + key.size(), nullptr, 10);
  }
  return sum;
}

// n bytes of a pattern that a misplaced or repeated piece would break.
std::string BigPattern(size_t n, char first, uint64_t seed) {
  std::string s(n, '\0');
  s[0] = first;
  std::mt19937_64 rng(seed);
  for (size_t i = 1; i + 8 <= n; i += 8) {
    const uint64_t x = rng();
    std::memcpy(&s[i], &x, 8);
  }
  return s;
}

double MillisSince(MonoTime start) {
  return std::chrono::duration<double, std::milli>(MonoNow() - start).count();
}

// A 64 MiB value and a 64 KiB key with the default limits, end to end over real daemons:
// through the client and the wire, into the LTC's log at two LogCs (log_mode=memory) and
// its memtable, read back, recovered from the log after a kill -9, flushed to tables on the
// StoCs, compacted (offloaded to a StoC), and read back from the tables after another kill
// -9. Prints the write and read latencies of the 64 MiB value. Memory stays at a few
// copies of the value per daemon.
TEST(BigEntryITest, SixtyFourMiBValueAndSixtyFourKiBKeyEndToEnd) {
  constexpr size_t kValueBytes = 64 << 20;
  constexpr size_t kKeyBytes = 64 << 10;
  const std::string dir = test::TestTempDir("big_entry_itest");
  auto secret = test::WriteClusterSecret(dir);
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  std::vector<std::unique_ptr<test::ExternalDaemon>> stocs, logcs;
  std::string stoc_list, logc_list;
  for (uint32_t id = 1; id <= 2; ++id) {
    stocs.push_back(std::make_unique<test::ExternalDaemon>(test::StocDaemonOptions(
        dir, secret.value(), id, {"--stoc_memory_limit_mb=64", "--stoc_file_buffer_mb=32"})));
    ASSERT_TRUE(stocs.back()->Start().ok());
    stoc_list += (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" + stocs.back()->address();
    logcs.push_back(std::make_unique<test::ExternalDaemon>(
        test::LogcDaemonOptions(dir, secret.value(), static_cast<int>(id), {"--logc_memory_limit_mb=512"})));
    ASSERT_TRUE(logcs.back()->Start().ok());
    logc_list += (logc_list.empty() ? "" : ",") + std::to_string(id) + "@" + logcs.back()->address();
  }
  // One range, one Drange (every table spans the keys written, so a Level-0 compaction
  // takes them all), 1 MiB memtables, compactions offloaded to the StoCs. The size limits
  // are nova_ltc's defaults.
  test::ExternalDaemon ltc(test::LtcDaemonOptions(
      dir, secret.value(), "ltc-1",
      {"--engine=nova", "--ltc_id=1", "--ranges=1", "--stoc=" + stoc_list, "--logc=" + logc_list,
       "--log_mode=memory", "--log_replicas=2", "--ltc_memtable_size_mb=1",
       "--ltc_sstable_size_mb=1", "--ltc_dranges_per_range=1", "--ltc_recovery_wait_ms=200",
       "--ltc_compaction_offload=round-robin"}));
  ASSERT_TRUE(ltc.Start().ok());
  auto client = [&] {
    ClientOptions o;
    o.ltcs = {ltc.address()};
    o.timeout = 60s;
    o.max_response_bytes = 2 * kValueBytes;  // a Get of the value and its framing
    auto c = std::make_unique<NovaClient>(o);
    Status s = c->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return c;
  };
  auto c = client();
  const std::string big_key = BigPattern(kKeyBytes, 'k', 1);
  const std::string big_value = BigPattern(kValueBytes, 'v', 2);
  auto expect_big = [&](NovaClient* cl, const std::string& when, double* millis) {
    const MonoTime start = MonoNow();
    auto g = cl->Get(big_key);
    if (millis != nullptr) *millis = MillisSince(start);
    ASSERT_TRUE(g.ok()) << when << ": " << g.status().ToString();
    ASSERT_EQ(g.value().size(), kValueBytes) << when;
    EXPECT_TRUE(g.value() == big_value) << when << ": same size, different bytes";
  };

  // A batch with the big entry, a big key with a small value and two small entries that
  // make the memtable (and so its table) span the keys the fillers below write.
  const std::string other_big_key = BigPattern(kKeyBytes, 'm', 3);
  MonoTime start = MonoNow();
  Status w = c->Write({{ltc::BatchOp::kPut, big_key, big_value},
                       {ltc::BatchOp::kPut, other_big_key, "small"},
                       {ltc::BatchOp::kPut, "a", "first"},
                       {ltc::BatchOp::kPut, "z", "first"}});
  const double batch_ms = MillisSince(start);
  ASSERT_TRUE(w.ok()) << w.ToString();
  start = MonoNow();
  Status p = c->Put(big_key, big_value);  // the same value again: a Put's latency
  const double put_ms = MillisSince(start);
  ASSERT_TRUE(p.ok()) << p.ToString();
  double get_ms = 0;
  ASSERT_NO_FATAL_FAILURE(expect_big(c.get(), "from the memtable", &get_ms));
  EXPECT_EQ(c->Get(other_big_key).value(), "small");

  // kill -9: the memtable holding the big entry is rebuilt from the LogCs.
  c.reset();
  ltc.Kill();
  ASSERT_TRUE(ltc.Restart().ok());
  c = client();
  double recovered_get_ms = 0;
  ASSERT_NO_FATAL_FAILURE(expect_big(c.get(), "recovered from the log", &recovered_get_ms));
  EXPECT_EQ(c->Get(other_big_key).value(), "small");
  EXPECT_EQ(c->Get("a").value(), "first");

  // Fillers flush memtables until Level 0 triggers a compaction. Every table spans the big
  // keys (each filler memtable holds an "a" and a "z" key), so Level 0's first compaction
  // takes all of its tables, the big entry's among them.
  std::string stats;
  const std::string filler(256 << 10, 'f');
  int round = 0;
  const bool compacted = test::WaitFor(
      [&] {
        for (int i = 0; i < 4; ++i, ++round) {
          const std::string n = std::to_string(round);
          if (!c->Put("a" + n, filler).ok() || !c->Put("z" + n, filler).ok()) return false;
        }
        auto st = c->Stats();
        if (!st.ok()) return false;
        stats = st.value();
        return SumStat(stats, "compactions") > 0;
      },
      120s);
  ASSERT_TRUE(compacted) << "no compaction after " << round << " filler rounds: " << stats;
  EXPECT_GT(SumStat(stats, "flushes"), 0u) << stats;
  uint64_t deeper = 0;
  for (int level = 1; level < 7; ++level) deeper += SumStat(stats, "L" + std::to_string(level));
  EXPECT_GT(deeper, 0u) << "nothing below Level 0: " << stats;
  double table_get_ms = 0;
  ASSERT_NO_FATAL_FAILURE(expect_big(c.get(), "from a compacted table", &table_get_ms));

  // kill -9 again: the big entry is read from the tables the MANIFEST lists.
  c.reset();
  ltc.Kill();
  ASSERT_TRUE(ltc.Restart().ok());
  c = client();
  ASSERT_NO_FATAL_FAILURE(expect_big(c.get(), "after a restart, from the tables", nullptr));
  EXPECT_EQ(c->Get(other_big_key).value(), "small");
  // Every filler survives too (no table lost its files to a compaction job of the killed
  // incarnation still running on a StoC).
  for (int i = 0; i < round; ++i) {
    for (const char* prefix : {"a", "z"}) {
      auto g = c->Get(prefix + std::to_string(i));
      ASSERT_TRUE(g.ok()) << prefix << i << ": " << g.status().ToString();
      EXPECT_EQ(g.value().size(), filler.size()) << prefix << i;
    }
  }
  std::printf(
      "64 MiB value, 64 KiB key: batch write %.0f ms, Put %.0f ms, Get from the memtable %.0f "
      "ms, after log recovery %.0f ms, from a compacted table %.0f ms (%d filler rounds)\n",
      batch_ms, put_ms, get_ms, recovered_get_ms, table_get_ms, round);
  c.reset();
  EXPECT_TRUE(ltc.Shutdown().ok());
}

}  // namespace
}  // namespace nova
