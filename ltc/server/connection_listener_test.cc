// ConnectionListener with a test handler, driven by the client library's LtcConnection:
// requests reach the handler and are answered in any order; connections over the limit are
// refused with ResourceExhausted; a connection's requests in flight are bounded; a request
// over the size limit is answered and the connection closed; Shutdown returns while a
// reader waits for room.
#include "ltc/server/connection_listener.h"

#include <gtest/gtest.h>

#include <deque>
#include <future>

#include "client/ltc_connection.h"
#include "common/mutex.h"
#include "common/wire/message.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMaxResponseBytes = 1 << 20;

// Keeps the requests it is given until the test answers them (or answers at once).
class Handler {
 public:
  struct Request {
    std::shared_ptr<ClientConn> conn;
    uint16_t type;
    uint64_t id;
    std::string payload;
  };

  explicit Handler(bool answer_at_once) : answer_at_once_(answer_at_once) {}

  RequestHandler handler() {
    return [this](const std::shared_ptr<ClientConn>& conn, uint16_t type, uint64_t id,
                  std::string payload) {
      Request r{conn, type, id, std::move(payload)};
      if (answer_at_once_) {
        Answer(r);
        return Status::OK();
      }
      MutexLock l(&mu_);
      held_.push_back(std::move(r));
      return Status::OK();
    };
  }

  // Echoes the payload back and ends the request.
  static void Answer(const Request& r) {
    r.conn->Send(wire::EncodeMessage(r.type, r.id, r.payload, wire::kFlagResponse));
    r.conn->EndRequest(r.payload.size());
  }

  size_t held() {
    MutexLock l(&mu_);
    return held_.size();
  }
  void AnswerOldest() {
    Request r;
    {
      MutexLock l(&mu_);
      r = std::move(held_.front());
      held_.pop_front();
    }
    Answer(r);
  }

 private:
  const bool answer_at_once_;
  Mutex mu_;
  std::deque<Request> held_ GUARDED_BY(mu_);
};

std::future<std::pair<Status, std::string>> Call(client::LtcConnection* c, std::string payload) {
  auto p = std::make_shared<std::promise<std::pair<Status, std::string>>>();
  auto f = p->get_future();
  c->Call(7, payload, Deadline::After(10s),
          [p](const Status& s, std::string r) { p->set_value({s, std::move(r)}); });
  return f;
}

std::shared_ptr<client::LtcConnection> Connect(const ConnectionListener& l) {
  auto c = client::LtcConnection::Connect(l.address(), Deadline::After(10s), kMaxResponseBytes);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c.value() : nullptr;
}

TEST(ConnectionListenerTest, RequestsReachTheHandlerAndAreAnswered) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/true);
  ConnectionListener listener(ConnectionListenerOptions(), h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto c = Connect(listener);
  ASSERT_NE(c, nullptr);
  auto a = Call(c.get(), "first");
  auto b = Call(c.get(), "second");
  auto [sa, ra] = a.get();
  auto [sb, rb] = b.get();
  EXPECT_TRUE(sa.ok()) << sa.ToString();
  EXPECT_TRUE(sb.ok()) << sb.ToString();
  EXPECT_EQ(ra, "first");
  EXPECT_EQ(rb, "second");
  EXPECT_EQ(metrics.requests->value(), 2u);
  EXPECT_EQ(metrics.connections->value(), 1.0);
  c->Close();
  ASSERT_TRUE(test::WaitFor([&] { return metrics.connections->value() == 0.0; }));
  listener.Shutdown();
}

TEST(ConnectionListenerTest, ConnectionsOverTheLimitAreRefused) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/true);
  ConnectionListenerOptions o;
  o.max_connections = 1;
  ConnectionListener listener(o, h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto first = Connect(listener);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(Call(first.get(), "x").get().first.ok());  // admitted
  auto second = Connect(listener);
  ASSERT_NE(second, nullptr);
  const Status s = Call(second.get(), "y").get().first;
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(s.message().find("--ltc_max_connections"), std::string::npos) << s.ToString();
  EXPECT_EQ(metrics.connections_refused->value(), 1u);
  EXPECT_TRUE(Call(first.get(), "z").get().first.ok());  // the first one still serves
  listener.Shutdown();
}

TEST(ConnectionListenerTest, RequestsInFlightPerConnectionAreBounded) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/false);
  ConnectionListenerOptions o;
  o.max_inflight_per_connection = 2;
  ConnectionListener listener(o, h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto c = Connect(listener);
  ASSERT_NE(c, nullptr);
  auto r1 = Call(c.get(), "1");
  auto r2 = Call(c.get(), "2");
  auto r3 = Call(c.get(), "3");
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }));
  EXPECT_EQ(h.held(), 2u);  // the third waits in the reader until one is answered
  h.AnswerOldest();
  EXPECT_EQ(r1.get().second, "1");
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }));
  h.AnswerOldest();
  h.AnswerOldest();
  EXPECT_EQ(r2.get().second, "2");
  EXPECT_EQ(r3.get().second, "3");
  // A reader waiting for room does not hold Shutdown up.
  auto r4 = Call(c.get(), "4");
  auto r5 = Call(c.get(), "5");
  auto r6 = Call(c.get(), "6");
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }));
  listener.Shutdown();
  EXPECT_FALSE(r6.get().first.ok());
}

// Requests in flight on a connection hold at most max_request_bytes of payload together
// (so raising the request limit does not multiply a connection's memory by the count).
TEST(ConnectionListenerTest, RequestBytesInFlightPerConnectionAreBounded) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/false);
  ConnectionListenerOptions o;
  o.max_request_bytes = 1000;
  ConnectionListener listener(o, h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto c = Connect(listener);
  ASSERT_NE(c, nullptr);
  const std::string p1(400, '1'), p2(400, '2'), p3(400, '3');
  auto r1 = Call(c.get(), p1);
  auto r2 = Call(c.get(), p2);
  auto r3 = Call(c.get(), p3);
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }));
  EXPECT_EQ(h.held(), 2u);  // 1200 bytes would be in flight: the third waits in the reader
  h.AnswerOldest();
  EXPECT_EQ(r1.get().second, p1);
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }));
  h.AnswerOldest();
  h.AnswerOldest();
  EXPECT_EQ(r2.get().second, p2);
  EXPECT_EQ(r3.get().second, p3);
  listener.Shutdown();
}

TEST(ConnectionListenerTest, SmallRequestInFlightDoesNotHoldABigOneBack) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/false);
  ConnectionListenerOptions o;
  o.max_request_bytes = 1000;
  ConnectionListener listener(o, h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto c = Connect(listener);
  ASSERT_NE(c, nullptr);
  const std::string small(50, 's'), big(960, 'b');  // big + header fit the 1000-byte limit
  auto r1 = Call(c.get(), small);  // held, like a long CompactRange
  auto r2 = Call(c.get(), big);    // 1010 bytes together: admitted (the small one is < 1/16)
  ASSERT_TRUE(test::WaitFor([&] { return h.held() == 2; }))
      << "the big request waited behind a small one";
  h.AnswerOldest();
  h.AnswerOldest();
  EXPECT_EQ(r1.get().second, small);
  EXPECT_EQ(r2.get().second, big);
  listener.Shutdown();
}

TEST(ConnectionListenerTest, RequestOverTheSizeLimitIsAnsweredAndTheConnectionClosed) {
  MetricsRegistry registry;
  ClientMetrics metrics(&registry);
  Handler h(/*answer_at_once=*/true);
  ConnectionListenerOptions o;
  o.max_request_bytes = 100;
  ConnectionListener listener(o, h.handler(), &metrics);
  ASSERT_TRUE(listener.Start().ok());
  auto c = Connect(listener);
  ASSERT_NE(c, nullptr);
  const Status s = Call(c.get(), std::string(200, 'x')).get().first;
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos) << s.ToString();
  EXPECT_EQ(metrics.request_errors->value(), 1u);
  ASSERT_TRUE(test::WaitFor([&] { return !c->healthy(); }));
  listener.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
