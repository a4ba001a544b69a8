// Transport conformance suite: every backend must pass it. The verbs instantiation skips
// with "no RDMA device" where there is none (as on CI machines).
#include "common/transport/transport.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <random>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "common/mutex.h"
#include "common/transport/handshake.h"
#include "common/transport/tcp_socket.h"
#include "tests/util/test_util.h"

namespace nova::transport {
namespace {

using namespace std::chrono_literals;
using test::WaitFor;

constexpr char kSecret[] = "conformance-secret";
constexpr auto kOpTimeout = 30s;
// The fixture's transports' message limit: the maximum-size tests send messages of it.
constexpr uint64_t kTestMaxMessageBytes = 16ull << 20;

// Records everything a transport reports.
class RecordingHandler : public TransportHandler {
 public:
  void OnPeerUp(const PeerInfo& peer) override {
    MutexLock l(&mu);
    ups.push_back(peer);
  }
  void OnPeerDown(PeerId peer, const Status& why) override {
    MutexLock l(&mu);
    downs.emplace_back(peer, why);
  }
  void OnMessage(PeerId peer, std::string& payload) override {
    if (echo_to) {
      echo_to->Send(peer, payload, [](const Status&) {}).IgnoreError();
    }
    MutexLock l(&mu);
    messages.emplace_back(peer, payload);
  }
  void OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) override {
    // The written bytes must be visible when the immediate is delivered.
    bool visible = watched_region == nullptr ||
                   std::memcmp(watched_region, expected_bytes.data(),
                               std::min<uint64_t>(length, expected_bytes.size())) == 0;
    MutexLock l(&mu);
    imms.push_back({peer, imm, length, visible});
  }

  size_t NumMessages() {
    MutexLock l(&mu);
    return messages.size();
  }
  size_t NumUps() {
    MutexLock l(&mu);
    return ups.size();
  }
  size_t NumDowns() {
    MutexLock l(&mu);
    return downs.size();
  }
  PeerId LastUpPeer() {
    MutexLock l(&mu);
    return ups.empty() ? kInvalidPeer : ups.back().id;
  }

  struct Imm {
    PeerId peer;
    uint32_t imm;
    uint64_t length;
    bool visible;
  };
  Mutex mu;
  std::vector<PeerInfo> ups;
  std::vector<std::pair<PeerId, Status>> downs;
  std::vector<std::pair<PeerId, std::string>> messages;
  std::vector<Imm> imms;
  Transport* echo_to = nullptr;
  const char* watched_region = nullptr;
  std::string expected_bytes;
};

// Posts an op and waits for its completion.
Status Sync(const std::function<Status(Completion)>& post) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  Status posted = post([promise](const Status& s) { promise->set_value(s); });
  if (!posted.ok()) return posted;
  if (future.wait_for(kOpTimeout) != std::future_status::ready) {
    return Status::TimedOut("operation did not complete");
  }
  return future.get();
}

// Counts completions of many ops.
struct Counter {
  Mutex mu;
  int ok = 0, failed = 0;
  std::vector<Status> errors;
  Completion Done() {
    return [this](const Status& s) {
      MutexLock l(&mu);
      if (s.ok()) {
        ++ok;
      } else {
        ++failed;
        errors.push_back(s);
      }
    };
  }
  int Total() {
    MutexLock l(&mu);
    return ok + failed;
  }
};

std::string Pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

class TransportTest : public ::testing::TestWithParam<Backend> {
 protected:
  TransportOptions Options(const std::string& name) {
    TransportOptions o;
    o.backend = GetParam();
    o.node_name = name;
    o.cluster_secret = kSecret;
    o.xchg_threads = 2;
    o.reconnect_initial_backoff_ms = 20;
    o.reconnect_max_backoff_ms = 200;
    o.max_message_bytes = kTestMaxMessageBytes;  // the maximum-size tests stay small
    return o;
  }

  // Creates and starts a transport, or skips the test when the backend is unavailable.
  std::unique_ptr<Transport> Make(const TransportOptions& o, TransportHandler* h) {
    auto t = NewTransport(o, h);
    if (!t.ok()) {
      skip_reason_ = t.status().ToString();
      return nullptr;
    }
    Status s = t.value()->Init();
    if (s.ok()) s = t.value()->Start();
    if (!s.ok()) {
      if (GetParam() == Backend::kVerbs) {
        skip_reason_ = s.ToString();
      } else {
        ADD_FAILURE() << s.ToString();
      }
      return nullptr;
    }
    return std::move(t.value());
  }

  void SetUp() override {
    a_ = Make(Options("node-a"), &ha_);
    b_ = Make(Options("node-b"), &hb_);
    if (!a_ || !b_) {
      if (!skip_reason_.empty()) GTEST_SKIP() << "no RDMA device: " << skip_reason_;
      return;
    }
    auto p = a_->Connect(b_->listen_address());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    peer_b_ = p.value();
    ASSERT_TRUE(WaitFor([&] { return hb_.NumUps() == 1; }));
    peer_a_ = hb_.LastUpPeer();
  }

  void TearDown() override {
    if (a_) a_->Shutdown();
    if (b_) b_->Shutdown();
  }

  // A buffer registered at a transport; deregistered (waiting for in-flight one-sided ops
  // on it) before its memory is freed, as the Transport contract requires.
  struct Buffer {
    Buffer() = default;
    Buffer(Buffer&& o) noexcept
        : owner(std::exchange(o.owner, nullptr)), mem(std::move(o.mem)), region(o.region) {}
    ~Buffer() {
      if (owner != nullptr) owner->DeregisterMemory(region).IgnoreError();
    }
    Transport* owner = nullptr;
    std::unique_ptr<char[]> mem;
    MemoryRegion region;
  };
  Buffer Register(Transport* t, uint64_t bytes, uint32_t access) {
    Buffer b;
    b.mem.reset(new char[bytes]());
    auto r = t->RegisterMemory(b.mem.get(), bytes, access);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      b.region = r.value();
      b.owner = t;
    }
    return b;
  }

  std::string skip_reason_;
  RecordingHandler ha_, hb_;
  std::unique_ptr<Transport> a_, b_;
  PeerId peer_b_ = kInvalidPeer;  // b, as seen by a
  PeerId peer_a_ = kInvalidPeer;  // a, as seen by b
};

TEST_P(TransportTest, PeersSeeEachOtherUpWithNames) {
  auto info = a_->GetPeerInfo(peer_b_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->name, "node-b");
  EXPECT_EQ(info->address, b_->listen_address());
  MutexLock l(&hb_.mu);
  EXPECT_EQ(hb_.ups.back().name, "node-a");
  EXPECT_TRUE(a_->IsUp(peer_b_));
  EXPECT_TRUE(b_->IsUp(peer_a_));
  // Connecting again returns the same peer.
  auto again = a_->Connect(b_->listen_address());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), peer_b_);
}

// Several threads connecting to one new peer at once get one connection: racing dials
// used to install two lane sets that closed each other forever.
// The initiator side of the tcp handshake for one lane of a made-up node (as the
// transport's own dial does). On return the acceptor has filed the lane: it files it right
// after the verdict, before it accepts the next connection.
Result<int> DialFakeLane(const std::string& address, const std::string& name,
                         uint64_t incarnation, uint16_t lane, uint16_t lanes) {
  const Deadline deadline = Deadline::After(10s);
  auto fd = ConnectTcp(address, deadline);
  if (!fd.ok()) return fd.status();
  Hello hello;
  hello.node_name = name;
  hello.listen_address = "127.0.0.1:1";  // accepted peers are never dialed back
  hello.incarnation = incarnation;
  hello.lane = lane;
  hello.lanes = lanes;
  hello.nonce = RandomNonce();
  Status s = WriteHandshakeFrame(fd.value(), EncodeHello(hello), deadline);
  Challenge ch;
  if (s.ok()) {
    auto bytes = ReadHandshakeFrame(fd.value(), deadline);
    s = bytes.ok() ? DecodeChallenge(bytes.value(), &ch) : bytes.status();
  }
  if (s.ok()) {
    Response resp;
    resp.mac = InitiatorMac(kSecret, lane, ch.nonce, hello.nonce);
    s = WriteHandshakeFrame(fd.value(), EncodeResponse(resp), deadline);
  }
  if (s.ok()) {
    auto verdict = ReadHandshakeFrame(fd.value(), deadline);
    s = verdict.ok() ? DecodeVerdict(verdict.value()) : verdict.status();
  }
  if (!s.ok()) {
    ::close(fd.value());
    return s;
  }
  return fd.value();
}

// A lane an abandoned dial left at the acceptor must not complete the next dial's set.
// It did: the set died at once on the dead lane's EOF, and each redial left its own lane 1
// behind the same way, forever (seen as a LogClientFailoverTest flake after a LogC restart,
// where a Connect and the reconnector dialed at once and mixed their lanes).
TEST_P(TransportTest, LeftoverLaneDoesNotJoinTheNextDial) {
  if (GetParam() != Backend::kTcp) GTEST_SKIP() << "tcp lane assembly";
  const std::string addr = b_->listen_address();
  constexpr uint64_t kInc = 42;
  auto stale = DialFakeLane(addr, "ghost", kInc, 1, 2);  // an abandoned try: lane 1 only
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  ::close(stale.value());
  auto lane0 = DialFakeLane(addr, "ghost", kInc, 0, 2);  // the next try, lane by lane
  ASSERT_TRUE(lane0.ok()) << lane0.status().ToString();
  auto lane1 = DialFakeLane(addr, "ghost", kInc, 1, 2);
  ASSERT_TRUE(lane1.ok()) << lane1.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return hb_.NumUps() == 2; }));  // node-a, then the ghost
  PeerId ghost;
  {
    MutexLock l(&hb_.mu);
    ASSERT_EQ(hb_.ups.back().name, "ghost");
    ghost = hb_.ups.back().id;
  }
  // b's lanes to the ghost are lane0 and lane1: a message on each arrives there. Before the
  // fix the dead stale lane was lane 1 and the peer went down at once.
  Counter sends;
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(b_->Send(ghost, "to the ghost", sends.Done(), k).ok()) << "lane " << k;
  }
  char byte;
  ASSERT_TRUE(ReadFully(lane0.value(), &byte, 1, Deadline::After(10s)).ok());
  ASSERT_TRUE(ReadFully(lane1.value(), &byte, 1, Deadline::After(10s)).ok());
  EXPECT_TRUE(b_->IsUp(ghost));
  EXPECT_EQ(hb_.NumDowns(), 0u);

  // A restarted ghost (new incarnation) still replaces it at once: the same PeerId, the old
  // connection reported down before the new one up.
  auto new0 = DialFakeLane(addr, "ghost", kInc + 1, 0, 2);
  auto new1 = DialFakeLane(addr, "ghost", kInc + 1, 1, 2);
  ASSERT_TRUE(new0.ok() && new1.ok());
  ASSERT_TRUE(WaitFor([&] { return hb_.NumUps() == 3; }));
  {
    MutexLock l(&hb_.mu);
    EXPECT_EQ(hb_.ups.back().id, ghost);
    ASSERT_EQ(hb_.downs.size(), 1u);
    EXPECT_EQ(hb_.downs[0].first, ghost);
  }
  EXPECT_TRUE(b_->IsUp(ghost));
  for (int fd : {lane0.value(), lane1.value(), new0.value(), new1.value()}) ::close(fd);
}

TEST_P(TransportTest, ConcurrentConnectsMakeOneStableConnection) {
  RecordingHandler hc;
  auto c = Make(Options("node-c"), &hc);
  ASSERT_NE(c, nullptr);
  std::vector<std::thread> threads;
  std::vector<Result<PeerId>> got(6, Status::Aborted("not run"));
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = a_->Connect(c->listen_address()); });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g.value(), got[0].value());
  }
  // Stable: messages keep flowing and the peer saw one connection, not a flapping series.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(a_->Send(got[0].value(), "ping", [](const Status&) {}).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return hc.NumMessages() >= 20; }));
  EXPECT_EQ(hc.NumUps(), 1u);
  EXPECT_EQ(hc.NumDowns(), 0u);
  c->Shutdown();
}

TEST_P(TransportTest, SendAndReceiveBothWays) {
  ASSERT_TRUE(Sync([&](Completion d) { return a_->Send(peer_b_, "hello b", d); }).ok());
  ASSERT_TRUE(WaitFor([&] { return hb_.NumMessages() == 1; }));
  ASSERT_TRUE(Sync([&](Completion d) { return b_->Send(peer_a_, "hello a", d); }).ok());
  ASSERT_TRUE(WaitFor([&] { return ha_.NumMessages() == 1; }));
  EXPECT_EQ(hb_.messages[0].second, "hello b");
  EXPECT_EQ(hb_.messages[0].first, peer_a_);
  EXPECT_EQ(ha_.messages[0].second, "hello a");
  // Empty and maximum-size messages.
  ASSERT_TRUE(Sync([&](Completion d) { return a_->Send(peer_b_, "", d); }).ok());
  std::string big = Pattern(a_->options().max_message_bytes, 7);
  ASSERT_TRUE(Sync([&](Completion d) { return a_->Send(peer_b_, big, d); }).ok());
  ASSERT_TRUE(WaitFor([&] { return hb_.NumMessages() == 3; }));
  EXPECT_EQ(hb_.messages[1].second, "");
  EXPECT_TRUE(hb_.messages[2].second == big);
  // One byte too many is refused at the sender.
  std::string too_big(a_->options().max_message_bytes + 1, 'x');
  Status s = a_->Send(peer_b_, too_big, [](const Status&) {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
}

// With the default limit, a 64 MiB message (an LTC entry of the largest default value,
// copied by a live migration) crosses as one message.
TEST_P(TransportTest, DefaultLimitCarriesA64MiBMessage) {
  constexpr uint64_t kBig = 64ull << 20;
  ASSERT_GE(kDefaultMaxMessageBytes, kBig + (64 << 10));
  RecordingHandler hc, hd;
  TransportOptions oc = Options("big-c"), od = Options("big-d");
  oc.max_message_bytes = od.max_message_bytes = kDefaultMaxMessageBytes;
  auto c = Make(oc, &hc);
  auto d = Make(od, &hd);
  ASSERT_TRUE(c && d);
  auto p = c->Connect(d->listen_address());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string big = Pattern(kBig, 11);
  ASSERT_TRUE(Sync([&](Completion done) { return c->Send(p.value(), big, done); }).ok());
  ASSERT_TRUE(WaitFor([&] { return hd.NumMessages() == 1; }));
  EXPECT_TRUE(hd.messages[0].second == big);
  c->Shutdown();
  d->Shutdown();
}

TEST_P(TransportTest, MessagesOnOneLaneArriveInOrder) {
  constexpr int kMessages = 2000;
  Counter c;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(a_->Send(peer_b_, std::to_string(i), c.Done(), /*lane=*/1).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return hb_.NumMessages() == kMessages; }, 30s));
  ASSERT_TRUE(WaitFor([&] { return c.Total() == kMessages; }));
  EXPECT_EQ(c.ok, kMessages);
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(hb_.messages[i].second, std::to_string(i));
}

TEST_P(TransportTest, WriteReadAndWriteWithImm) {
  constexpr uint64_t kBytes = 1 << 20;
  Buffer remote = Register(b_.get(), kBytes, kRemoteRead | kRemoteWrite);
  Buffer local = Register(a_.get(), kBytes, kLocalOnly);
  std::string data = Pattern(kBytes, 1);
  std::memcpy(local.mem.get(), data.data(), kBytes);

  // WRITE without immediate: no application code at b runs.
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer_b_, local.region, 0, kBytes, remote.region.Remote(),
                                 std::nullopt, d);
              }).ok());
  EXPECT_EQ(std::memcmp(remote.mem.get(), data.data(), kBytes), 0);
  EXPECT_TRUE(hb_.imms.empty());

  // WRITE with immediate at an offset: the handler sees the imm after the bytes landed.
  std::string data2 = Pattern(4096, 2);
  std::memcpy(local.mem.get(), data2.data(), data2.size());
  hb_.watched_region = remote.mem.get() + 8192;
  hb_.expected_bytes = data2;
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer_b_, local.region, 0, data2.size(),
                                 remote.region.Remote(8192), 0xdeadbeef, d);
              }).ok());
  ASSERT_TRUE(WaitFor([&] {
    MutexLock l(&hb_.mu);
    return hb_.imms.size() == 1;
  }));
  EXPECT_EQ(hb_.imms[0].imm, 0xdeadbeefu);
  EXPECT_EQ(hb_.imms[0].length, data2.size());
  EXPECT_EQ(hb_.imms[0].peer, peer_a_);
  EXPECT_TRUE(hb_.imms[0].visible);

  // READ back into a different offset of the local buffer.
  Buffer back = Register(a_.get(), kBytes, kLocalOnly);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Read(peer_b_, remote.region.Remote(), kBytes, back.region, 0, d);
              }).ok());
  EXPECT_EQ(std::memcmp(back.mem.get(), remote.mem.get(), kBytes), 0);

  // Small transfers: 1 byte at the very end, and zero bytes.
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer_b_, local.region, 0, 1, remote.region.Remote(kBytes - 1),
                                 std::nullopt, d);
              }).ok());
  EXPECT_EQ(remote.mem[kBytes - 1], local.mem[0]);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Read(peer_b_, remote.region.Remote(kBytes - 1), 1, back.region, 5, d);
              }).ok());
  EXPECT_EQ(back.mem[5], local.mem[0]);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer_b_, local.region, 0, 0, remote.region.Remote(), 7u, d);
              }).ok());
}

TEST_P(TransportTest, LargeTransfers64MiB) {
  constexpr uint64_t kBytes = 64 << 20;
  Buffer remote = Register(b_.get(), kBytes, kRemoteRead | kRemoteWrite);
  Buffer local = Register(a_.get(), kBytes, kLocalOnly);
  Buffer back = Register(a_.get(), kBytes, kLocalOnly);
  std::string data = Pattern(kBytes, 3);
  std::memcpy(local.mem.get(), data.data(), kBytes);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer_b_, local.region, 0, kBytes, remote.region.Remote(), 1u, d);
              }).ok());
  EXPECT_EQ(crc32c::Value(remote.mem.get(), kBytes), crc32c::Value(data));
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Read(peer_b_, remote.region.Remote(), kBytes, back.region, 0, d);
              }).ok());
  EXPECT_EQ(crc32c::Value(back.mem.get(), kBytes), crc32c::Value(data));
}

TEST_P(TransportTest, ManyOutstandingOperations) {
  constexpr int kOps = 5000;
  constexpr uint64_t kBlock = 4096;
  Buffer remote = Register(b_.get(), kOps * kBlock, kRemoteRead | kRemoteWrite);
  Buffer local = Register(a_.get(), kOps * kBlock, kLocalOnly);
  Buffer back = Register(a_.get(), kOps * kBlock, kLocalOnly);
  std::string data = Pattern(kOps * kBlock, 4);
  std::memcpy(local.mem.get(), data.data(), data.size());
  Counter writes;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(a_->Write(peer_b_, local.region, i * kBlock, kBlock,
                          remote.region.Remote(i * kBlock), std::nullopt, writes.Done(), i % 2)
                    .ok());
  }
  Counter sends;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(a_->Send(peer_b_, "m", sends.Done()).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return writes.Total() == kOps && sends.Total() == kOps; }, 60s));
  EXPECT_EQ(writes.ok, kOps);
  EXPECT_EQ(sends.ok, kOps);
  Counter reads;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(a_->Read(peer_b_, remote.region.Remote(i * kBlock), kBlock, back.region,
                         i * kBlock, reads.Done(), i % 2)
                    .ok());
  }
  ASSERT_TRUE(WaitFor([&] { return reads.Total() == kOps; }, 60s));
  EXPECT_EQ(reads.ok, kOps);
  EXPECT_EQ(std::memcmp(back.mem.get(), data.data(), data.size()), 0);
}

TEST_P(TransportTest, BadOneSidedOpsAreRejectedWithoutTouchingMemory) {
  constexpr uint64_t kBytes = 4096;
  constexpr uint64_t kGuard = 4096;
  // Region in the middle of a larger allocation whose guard bytes must stay intact.
  std::unique_ptr<char[]> arena(new char[kBytes + 2 * kGuard]);
  std::memset(arena.get(), 0x5a, kBytes + 2 * kGuard);
  auto wr = b_->RegisterMemory(arena.get() + kGuard, kBytes, kRemoteWrite);
  ASSERT_TRUE(wr.ok());
  MemoryRegion region = wr.value();
  Buffer local = Register(a_.get(), 2 * kBytes, kLocalOnly);
  std::memset(local.mem.get(), 0x11, 2 * kBytes);

  auto write = [&](uint64_t len, RemoteAddr where) {
    return Sync([&](Completion d) {
      return a_->Write(peer_b_, local.region, 0, len, where, std::nullopt, d);
    });
  };
  Status s = write(kBytes + 1, region.Remote());
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange) << s.ToString();
  s = write(16, region.Remote(kBytes - 8));
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange) << s.ToString();
  s = write(16, RemoteAddr{reinterpret_cast<uint64_t>(arena.get()), region.rkey});
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange) << s.ToString();
  s = write(16, RemoteAddr{UINT64_MAX - 4, region.rkey});
  EXPECT_EQ(s.code(), Status::Code::kOutOfRange) << s.ToString();
  s = write(16, RemoteAddr{region.Remote().addr, region.rkey ^ 0x1});
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
  // The region allows writes only: a read is refused.
  s = Sync([&](Completion d) { return a_->Read(peer_b_, region.Remote(), 16, local.region, 0, d); });
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
  s = Sync([&](Completion d) {
    return a_->Read(peer_b_, region.Remote(kBytes), 1, local.region, 0, d);
  });
  EXPECT_FALSE(s.ok());

  for (uint64_t i = 0; i < kBytes + 2 * kGuard; ++i) {
    ASSERT_EQ(arena[i], 0x5a) << "byte " << i << " was modified";
  }
  // verbs counts refusals from asynchronous device events: poll.
  EXPECT_TRUE(WaitFor([&] { return b_->GetStats().rejected_remote_ops == 7u; }))
      << b_->GetStats().rejected_remote_ops;
  EXPECT_GE(a_->GetStats().failed_ops, 7u);

  // The connection still works.
  EXPECT_TRUE(write(kBytes, region.Remote()).ok());
  EXPECT_EQ(arena[kGuard], 0x11);
  EXPECT_EQ(arena[kGuard - 1], 0x5a);
  EXPECT_EQ(arena[kGuard + kBytes], 0x5a);

  // A local buffer outside its region is refused before posting.
  s = a_->Write(peer_b_, local.region, kBytes, kBytes + 1, region.Remote(), std::nullopt,
                [](const Status&) {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);

  // After deregistration the rkey is dead.
  ASSERT_TRUE(b_->DeregisterMemory(region).ok());
  s = write(16, region.Remote());
  EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
}

TEST_P(TransportTest, PeerWithoutSecretIsRefused) {
  RecordingHandler hc;
  TransportOptions o = Options("intruder");
  o.cluster_secret = "wrong-secret";
  auto c = Make(o, &hc);
  ASSERT_TRUE(c);
  auto p = c->Connect(b_->listen_address());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kPermissionDenied) << p.status().ToString();
  EXPECT_TRUE(WaitFor([&] { return b_->GetStats().auth_failures == 1; }));
  EXPECT_EQ(hb_.NumUps(), 1u);  // only a
  // And b refuses to trust a listener without the secret.
  auto q = b_->Connect(c->listen_address());
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Status::Code::kPermissionDenied) << q.status().ToString();
}

TEST_P(TransportTest, LaneCountMismatchIsRefused) {
  RecordingHandler hc;
  TransportOptions o = Options("three-lanes");
  o.xchg_threads = 3;
  auto c = Make(o, &hc);
  ASSERT_TRUE(c);
  auto p = c->Connect(b_->listen_address());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument) << p.status().ToString();
}

TEST_P(TransportTest, ConnectToNothingFailsCleanly) {
  auto listen = b_->listen_address();
  b_->Shutdown();
  TransportOptions o = Options("lonely");
  o.connect_timeout_ms = 500;
  RecordingHandler hc;
  auto c = Make(o, &hc);
  ASSERT_TRUE(c);
  auto p = c->Connect(listen);
  EXPECT_FALSE(p.ok());
  auto bad = c->Connect("not-an-address");
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
}

TEST_P(TransportTest, PeerDownFailsOpsAndReconnects) {
  const std::string address = b_->listen_address();
  b_->Shutdown();
  ASSERT_TRUE(WaitFor([&] { return ha_.NumDowns() == 1; }));
  EXPECT_FALSE(a_->IsUp(peer_b_));
  Status s = a_->Send(peer_b_, "x", [](const Status&) {});
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();

  // A new process (same name) at the same address: a reconnects by itself.
  TransportOptions o = Options("node-b");
  std::string host = address.substr(0, address.rfind(':'));
  o.listen_port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  RecordingHandler hb2;
  auto b2 = Make(o, &hb2);
  ASSERT_TRUE(b2);
  ASSERT_TRUE(WaitFor([&] { return a_->IsUp(peer_b_); }, 20s));
  EXPECT_EQ(ha_.NumUps(), 2u);  // OnPeerUp fires at the initiator too, and again on reconnect
  ASSERT_TRUE(Sync([&](Completion d) { return a_->Send(peer_b_, "again", d); }).ok());
  ASSERT_TRUE(WaitFor([&] { return hb2.NumMessages() == 1; }));
  EXPECT_EQ(hb2.messages[0].second, "again");
  b2->Shutdown();
}

TEST_P(TransportTest, DisconnectDoesNotReconnect) {
  a_->Disconnect(peer_b_);
  ASSERT_TRUE(WaitFor([&] { return ha_.NumDowns() == 1 && hb_.NumDowns() == 1; }));
  EXPECT_FALSE(a_->IsUp(peer_b_));
  EXPECT_EQ(ha_.downs[0].second.code(), Status::Code::kAborted);
  // The other side saw a network failure.
  EXPECT_EQ(hb_.downs[0].second.code(), Status::Code::kNetworkError);
  // Connect again explicitly works.
  auto p = a_->Connect(b_->listen_address());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p.value(), peer_b_);
  EXPECT_TRUE(Sync([&](Completion d) { return a_->Send(peer_b_, "back", d); }).ok());
}

TEST_P(TransportTest, ShutdownFailsOutstandingOps) {
  constexpr uint64_t kBytes = 8 << 20;
  Buffer remote = Register(b_.get(), kBytes, kRemoteWrite);
  Buffer local = Register(a_.get(), kBytes, kLocalOnly);
  Counter c;
  constexpr int kOps = 32;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(a_->Write(peer_b_, local.region, 0, kBytes, remote.region.Remote(), std::nullopt,
                          c.Done())
                    .ok());
  }
  a_->Shutdown();
  // Every op completed exactly once, OK or failed.
  EXPECT_EQ(c.Total(), kOps);
  for (auto& e : c.errors) {
    EXPECT_TRUE(e.code() == Status::Code::kAborted || e.code() == Status::Code::kNetworkError)
        << e.ToString();
  }
  EXPECT_EQ(a_->Send(peer_b_, "late", [](const Status&) {}).code(), Status::Code::kUnavailable);
}

// ---- Two processes over loopback --------------------------------------------------------

class TwoProcessTest : public TransportTest {};

TEST_P(TwoProcessTest, WriteReadAndPeerKilledMidTransfer) {
  constexpr uint64_t kBytes = 64 << 20;
  test::ChildProcess child;
  ASSERT_TRUE(child.Start({test::BinDir() + "/transport_test_peer", BackendName(GetParam()),
                           kSecret, "2", std::to_string(kBytes)}));
  std::string line;
  ASSERT_TRUE(child.ReadLine(&line)) << "peer did not start";
  ASSERT_EQ(line.rfind("LISTEN ", 0), 0u) << line;
  auto p = a_->Connect(line.substr(7));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const PeerId peer = p.value();

  // The peer announces its region.
  ASSERT_TRUE(WaitFor([&] { return ha_.NumMessages() >= 1; }));
  uint64_t addr = 0, len = 0;
  uint32_t rkey = 0;
  {
    MutexLock l(&ha_.mu);
    ASSERT_EQ(std::sscanf(ha_.messages[0].second.c_str(), "REGION %lu %u %lu", &addr, &rkey, &len),
              3)
        << ha_.messages[0].second;
  }
  ASSERT_EQ(len, kBytes);

  Buffer local = Register(a_.get(), kBytes, kLocalOnly);
  std::string data = Pattern(kBytes, 5);
  std::memcpy(local.mem.get(), data.data(), kBytes);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Write(peer, local.region, 0, kBytes, RemoteAddr{addr, rkey}, 42u, d);
              }).ok());
  // The peer computed the CRC of what landed in its memory.
  const std::string expect = "IMM 42 " + std::to_string(kBytes) + " " +
                             std::to_string(crc32c::Value(data));
  ASSERT_TRUE(WaitFor([&] {
    MutexLock l(&ha_.mu);
    for (auto& m : ha_.messages) {
      if (m.second == expect) return true;
    }
    return false;
  }));
  Buffer back = Register(a_.get(), kBytes, kLocalOnly);
  ASSERT_TRUE(Sync([&](Completion d) {
                return a_->Read(peer, RemoteAddr{addr, rkey}, kBytes, back.region, 0, d);
              }).ok());
  EXPECT_EQ(std::memcmp(back.mem.get(), data.data(), kBytes), 0);
  ASSERT_TRUE(Sync([&](Completion d) { return a_->Send(peer, "ping", d); }).ok());

  // Kill -9 the peer while large transfers are in flight: every op completes, the ones
  // not done fail with a network error, and the peer is reported down.
  Counter c;
  constexpr int kOps = 16;
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(a_->Write(peer, local.region, 0, kBytes, RemoteAddr{addr, rkey}, std::nullopt,
                          c.Done())
                    .ok());
  }
  child.Kill();
  ASSERT_TRUE(WaitFor([&] { return c.Total() == kOps; }, 30s));
  EXPECT_GT(c.failed, 0);
  for (auto& e : c.errors) EXPECT_EQ(e.code(), Status::Code::kNetworkError) << e.ToString();
  ASSERT_TRUE(WaitFor([&] { return ha_.NumDowns() >= 1; }));
  EXPECT_FALSE(a_->IsUp(peer));
  EXPECT_EQ(a_->Send(peer, "x", [](const Status&) {}).code(), Status::Code::kUnavailable);
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportTest, ::testing::Values(Backend::kTcp, Backend::kVerbs),
                         [](const auto& info) { return std::string(BackendName(info.param)); });
INSTANTIATE_TEST_SUITE_P(Backends, TwoProcessTest, ::testing::Values(Backend::kTcp, Backend::kVerbs),
                         [](const auto& info) { return std::string(BackendName(info.param)); });

}  // namespace
}  // namespace nova::transport
