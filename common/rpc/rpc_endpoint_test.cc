#include "common/rpc/rpc_endpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "common/mutex.h"
#include "common/transport/transport.h"
#include "tests/util/test_util.h"

namespace nova::rpc {
namespace {

using namespace std::chrono_literals;
constexpr uint16_t kEcho = 0x0101;
constexpr uint16_t kHold = 0x0102;
constexpr uint16_t kBlock = 0x0103;
constexpr uint16_t kNote = 0x0104;
constexpr uint16_t kUnknown = 0x0201;

class TestService : public RpcService {
 public:
  void HandleRequest(PeerId peer, uint16_t type, std::string payload, Responder r) override {
    if (type == kEcho) {
      if (payload == "fail") return r.ReplyError(Status::NotFound("no such thing"));
      return r.Reply("echo:" + payload);
    }
    MutexLock l(&mu);
    if (type == kNote) {
      notes.push_back(payload);
      return;  // the responder of a notification sends nothing
    }
    if (type == kBlock) {
      ++blocked;
      cv.Wait(&l, [&] { return released; });
      return r.Reply("released");
    }
    held.push_back(std::make_unique<Responder>(std::move(r)));
  }
  void Release() {
    MutexLock l(&mu);
    released = true;
    cv.NotifyAll();
  }
  Mutex mu;
  CondVar cv;
  bool released = false;
  int blocked = 0;
  std::vector<std::string> notes;
  std::vector<std::unique_ptr<Responder>> held;
};

struct Node {
  explicit Node(const std::string& name) {
    transport::TransportOptions o;
    o.node_name = name;
    o.cluster_secret = "rpc-test";
    auto t = transport::NewTransport(o, &endpoint);
    EXPECT_TRUE(t.ok());
    transport = std::move(t.value());
    endpoint.Attach(transport.get());
  }
  Status Start() {
    NOVA_RETURN_NOT_OK(transport->Init());
    return transport->Start();
  }
  RpcEndpoint endpoint;
  std::unique_ptr<transport::Transport> transport;
};

class RpcEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.endpoint.RegisterService(wire::kStocTypes, &service_, &pool_);
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_TRUE(client_.Start().ok());
    auto p = client_.transport->Connect(server_.transport->listen_address());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    peer_ = p.value();
  }
  void TearDown() override {
    client_.transport->Shutdown();
    server_.transport->Shutdown();
    pool_.Shutdown();
  }
  // Destroyed bottom-up: held responders (in service_) must go before the endpoints.
  Node server_{"server"};
  Node client_{"client"};
  ThreadPool pool_{"rpc-test", 2, 4};
  TestService service_;
  PeerId peer_ = transport::kInvalidPeer;
};

TEST_F(RpcEndpointTest, CallGetsResponseOrRemoteError) {
  auto r = client_.endpoint.CallSync(peer_, kEcho, "hi", 5s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), "echo:hi");
  auto e = client_.endpoint.CallSync(peer_, kEcho, "fail", 5s);
  EXPECT_TRUE(e.status().IsNotFound()) << e.status().ToString();
  EXPECT_EQ(e.status().message(), "no such thing");
  EXPECT_EQ(client_.endpoint.pending_calls(), 0u);
}

TEST_F(RpcEndpointTest, NotificationsGetNoAnswer) {
  ASSERT_TRUE(client_.endpoint.Notify(peer_, kNote, "n1").ok());
  ASSERT_TRUE(test::WaitFor([&] {
    MutexLock l(&service_.mu);
    return service_.notes.size() == 1;
  }));
  EXPECT_EQ(service_.notes[0], "n1");
  // A later call still gets its own answer (a stray reply would have been dropped).
  auto r = client_.endpoint.CallSync(peer_, kEcho, "x", 5s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), "echo:x");
}

TEST_F(RpcEndpointTest, UnknownTypeIsNotSupported) {
  auto r = client_.endpoint.CallSync(peer_, kUnknown, "x", 5s);
  EXPECT_EQ(r.status().code(), Status::Code::kNotSupported) << r.status().ToString();
}

TEST_F(RpcEndpointTest, DeadlinePassesAndLateReplyIsDropped) {
  auto r = client_.endpoint.CallSync(peer_, kHold, "x", 100ms);
  EXPECT_TRUE(r.status().IsTimedOut()) << r.status().ToString();
  EXPECT_EQ(client_.endpoint.pending_calls(), 0u);
  {
    MutexLock l(&service_.mu);
    ASSERT_EQ(service_.held.size(), 1u);
    service_.held[0]->Reply("late");
  }
  // The endpoint keeps working.
  EXPECT_TRUE(client_.endpoint.CallSync(peer_, kEcho, "after", 5s).ok());
}

TEST_F(RpcEndpointTest, DroppedResponderAnswersAborted) {
  std::atomic<bool> done{false};
  Status got;
  client_.endpoint.Call(peer_, kHold, "x", Deadline::After(10s), [&](const Status& s, std::string) {
    got = s;
    done = true;
  });
  ASSERT_TRUE(test::WaitFor([&] {
    MutexLock l(&service_.mu);
    return service_.held.size() == 1;
  }));
  {
    MutexLock l(&service_.mu);
    service_.held.clear();  // destroyed without a reply
  }
  ASSERT_TRUE(test::WaitFor([&] { return done.load(); }));
  EXPECT_EQ(got.code(), Status::Code::kAborted) << got.ToString();
}

TEST_F(RpcEndpointTest, PeerDownFailsPendingCalls) {
  std::atomic<int> failed{0};
  for (int i = 0; i < 3; ++i) {
    client_.endpoint.Call(peer_, kHold, "x", Deadline::After(30s), [&](const Status& s, std::string) {
      if (s.IsNetworkError()) ++failed;
    });
  }
  ASSERT_TRUE(test::WaitFor([&] {
    MutexLock l(&service_.mu);
    return service_.held.size() == 3;
  }));
  server_.transport->Shutdown();
  ASSERT_TRUE(test::WaitFor([&] { return failed.load() == 3; }));
  {
    MutexLock l(&service_.mu);
    service_.held.clear();
  }
}

TEST_F(RpcEndpointTest, FullPoolAnswersResourceExhausted) {
  // Both workers block and 4 requests wait in the queue; the rest are refused, not lost.
  std::atomic<int> busy{0}, ok{0};
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) {
    client_.endpoint.Call(peer_, kBlock, "x", Deadline::After(30s),
                          [&](const Status& s, std::string) {
                            if (s.IsResourceExhausted()) ++busy;
                            if (s.ok()) ++ok;
                          });
  }
  // Every call is either refused or held (running on a blocked worker, or queued).
  auto accepted = [&] {
    MutexLock l(&service_.mu);
    return service_.blocked + static_cast<int>(pool_.queue_depth());
  };
  ASSERT_TRUE(test::WaitFor([&] { return busy.load() + accepted() == kCalls; }))
      << busy.load() << " refused, " << accepted() << " accepted";
  EXPECT_GE(busy.load(), kCalls - 6);  // 2 workers + a queue of 4
  service_.Release();
  ASSERT_TRUE(test::WaitFor([&] { return ok.load() + busy.load() == kCalls; }));
}

}  // namespace
}  // namespace nova::rpc
