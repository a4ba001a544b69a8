// ConnectionListener with a test handler, driven by the client library's LtcConnection:
// requests reach the handler and are answered in any order; connections over the limit are
// refused with ResourceExhausted; a connection's requests in flight are bounded; a request
// over the size limit is answered and the connection closed; Shutdown returns while a
// reader waits for room. Client authentication: the right secret is accepted, a wrong one,
// none, or a request before the handshake (an old client) is refused with a
// connection-level PermissionDenied naming the flag before anything reaches the handler;
// before authentication an oversized message is refused from its header, a connection is
// closed at the handshake deadline, and AuthChallenges beyond the limit are refused.
#include "ltc/server/connection_listener.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <deque>
#include <future>

#include "client/ltc_connection.h"
#include "common/mutex.h"
#include "common/transport/tcp_socket.h"
#include "common/wire/message.h"
#include "ltc/protocol/client_auth.h"
#include "ltc/protocol/client_protocol.h"
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
                  std::string payload, bool /*may_run_inline*/) {
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

std::shared_ptr<client::LtcConnection> Connect(const ConnectionListener& l,
                                               const std::string& secret = "") {
  auto c = client::LtcConnection::Connect(l.address(), Deadline::After(10s), kMaxResponseBytes,
                                          secret);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c.value() : nullptr;
}

// The connection-level error type (docs/protocol.md).
constexpr uint16_t kConnectionErrorType = 0x0300;
constexpr char kSecret[] = "the client secret";

// A plain socket to the listener, for byte sequences the client library never sends.
class RawClient {
 public:
  explicit RawClient(const ConnectionListener& l) {
    auto fd = transport::ConnectTcp(l.address(), Deadline::After(10s));
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    fd_ = fd.ok() ? fd.value() : -1;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Send(uint16_t type, uint64_t id, std::string_view payload) {
    return SendRaw(wire::EncodeMessage(type, id, payload));
  }
  Status SendRaw(std::string_view bytes) {
    return transport::WriteFully(fd_, bytes.data(), bytes.size(), Deadline::After(10s));
  }
  // Reads one message; an error if the stream ends or stalls.
  Status Read(wire::MessageHeader* h, std::string* payload) {
    const Deadline deadline = Deadline::After(10s);
    std::string m(wire::kHeaderBytes, '\0');
    NOVA_RETURN_NOT_OK(transport::ReadFully(fd_, m.data(), m.size(), deadline));
    size_t total = 0;
    NOVA_RETURN_NOT_OK(wire::PeekMessageLength(m, kMaxResponseBytes, &total));
    m.resize(total);
    NOVA_RETURN_NOT_OK(transport::ReadFully(fd_, m.data() + wire::kHeaderBytes,
                                            total - wire::kHeaderBytes, deadline));
    std::string_view p;
    NOVA_RETURN_NOT_OK(wire::DecodeMessage(m, h, &p, kMaxResponseBytes));
    payload->assign(p);
    return Status::OK();
  }
  // True once the listener has closed the connection (EOF).
  bool Closed() {
    char c;
    return transport::ReadFully(fd_, &c, 1, Deadline::After(10s)).ok() == false;
  }

 private:
  int fd_ = -1;
};

// A listener requiring kSecret (or `secret`), with a handler that answers at once.
struct AuthRig {
  explicit AuthRig(std::string secret = kSecret, std::chrono::milliseconds auth_timeout =
                                                     ConnectionListenerOptions().auth_timeout)
      : metrics(&registry),
        handler(/*answer_at_once=*/true),
        listener(
            [&] {
              ConnectionListenerOptions o;
              o.client_secret = std::move(secret);
              o.auth_timeout = auth_timeout;
              return o;
            }(),
            handler.handler(), &metrics) {}
  MetricsRegistry registry;
  ClientMetrics metrics;
  Handler handler;
  ConnectionListener listener;
};

// Checks `h`/`payload` are the connection-level error and returns its Status.
Status ConnectionError(const wire::MessageHeader& h, const std::string& payload) {
  EXPECT_EQ(h.type, kConnectionErrorType);
  EXPECT_EQ(h.request_id, 0u);
  EXPECT_TRUE(h.is_response() && h.is_error());
  return wire::DecodeErrorPayload(payload);
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

TEST(ConnectionListenerAuthTest, TheRightSecretIsAccepted) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  auto c = Connect(rig.listener, kSecret);
  ASSERT_NE(c, nullptr);
  auto [s, r] = Call(c.get(), "after the handshake").get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r, "after the handshake");
  EXPECT_EQ(rig.metrics.requests->value(), 1u);  // the handshake is not a request
  EXPECT_EQ(rig.metrics.auth_refused->value(), 0u);
  rig.listener.Shutdown();
}

TEST(ConnectionListenerAuthTest, AWrongSecretIsRefusedNamingTheFlags) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  auto c = client::LtcConnection::Connect(rig.listener.address(), Deadline::After(10s),
                                          kMaxResponseBytes, "not the secret");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().IsPermissionDenied()) << c.status().ToString();
  EXPECT_NE(c.status().message().find("--client_secret_file"), std::string::npos);
  EXPECT_NE(c.status().message().find("--ltc_client_secret_file"), std::string::npos);
  EXPECT_NE(c.status().message().find(rig.listener.address()), std::string::npos);
  EXPECT_EQ(rig.metrics.auth_refused->value(), 1u);
  EXPECT_EQ(rig.metrics.requests->value(), 0u);
  rig.listener.Shutdown();
}

TEST(ConnectionListenerAuthTest, AClientWithoutTheSecretIsRefusedNamingTheFlag) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  auto c = Connect(rig.listener);  // no secret: no handshake, as before it existed
  ASSERT_NE(c, nullptr);
  const Status s = Call(c.get(), "x").get().first;
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_NE(s.message().find("--client_secret_file"), std::string::npos) << s.ToString();
  ASSERT_TRUE(test::WaitFor([&] { return !c->healthy(); }));
  EXPECT_EQ(rig.metrics.requests->value(), 0u);  // nothing reached the handler
  EXPECT_EQ(rig.metrics.auth_refused->value(), 1u);
  rig.listener.Shutdown();
}

TEST(ConnectionListenerAuthTest, ASecretGivenToAListenerThatRequiresNoneIsHarmless) {
  AuthRig rig(/*secret=*/"");
  ASSERT_TRUE(rig.listener.Start().ok());
  auto c = Connect(rig.listener, kSecret);
  ASSERT_NE(c, nullptr);
  auto [s, r] = Call(c.get(), "served").get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r, "served");
  // On the wire: the challenge says "not required" and carries no nonce.
  RawClient raw(rig.listener);
  ASSERT_TRUE(raw.Send(static_cast<uint16_t>(ClientMsg::kAuthChallenge), 1, "").ok());
  wire::MessageHeader h;
  std::string payload;
  ASSERT_TRUE(raw.Read(&h, &payload).ok());
  AuthChallenge challenge;
  ASSERT_TRUE(DecodeAuthChallenge(payload, &challenge).ok());
  EXPECT_FALSE(challenge.required);
  EXPECT_TRUE(challenge.nonce.empty());
  rig.listener.Shutdown();
}

// A client older than the handshake sends a request first: it is told which flag to set, on
// the connection-level error message, and the connection is closed.
TEST(ConnectionListenerAuthTest, AnOldClientSendingARequestFirstGetsTheConnectionError) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  RawClient raw(rig.listener);
  ASSERT_TRUE(raw.Send(static_cast<uint16_t>(ClientMsg::kDescribe), 1, "").ok());
  wire::MessageHeader h;
  std::string payload;
  ASSERT_TRUE(raw.Read(&h, &payload).ok());
  const Status s = ConnectionError(h, payload);
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_NE(s.message().find("--client_secret_file"), std::string::npos) << s.ToString();
  EXPECT_TRUE(raw.Closed());
  EXPECT_EQ(rig.metrics.requests->value(), 0u);
  rig.listener.Shutdown();
}

// Each challenge is answered once, on its own connection: a MAC seen on the wire cannot be
// replayed on another connection, and Authenticate without a challenge is refused.
TEST(ConnectionListenerAuthTest, AMacAnswersOnlyItsOwnChallenge) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  const uint16_t challenge_type = static_cast<uint16_t>(ClientMsg::kAuthChallenge);
  const uint16_t authenticate_type = static_cast<uint16_t>(ClientMsg::kAuthenticate);
  wire::MessageHeader h;
  std::string payload;

  RawClient first(rig.listener);
  ASSERT_TRUE(first.Send(challenge_type, 1, "").ok());
  ASSERT_TRUE(first.Read(&h, &payload).ok());
  AuthChallenge challenge;
  ASSERT_TRUE(DecodeAuthChallenge(payload, &challenge).ok());
  ASSERT_TRUE(challenge.required);
  const std::string mac = ClientAuthMac(kSecret, challenge.nonce);
  ASSERT_TRUE(first.Send(authenticate_type, 2, EncodeAuthenticate(mac)).ok());
  // Pipelined right behind Authenticate: served, in order, after it.
  ASSERT_TRUE(first.Send(7, 3, "pipelined").ok());
  ASSERT_TRUE(first.Read(&h, &payload).ok());
  EXPECT_EQ(h.type, authenticate_type);
  EXPECT_FALSE(h.is_error());
  ASSERT_TRUE(first.Read(&h, &payload).ok());
  EXPECT_EQ(h.request_id, 3u);
  EXPECT_EQ(payload, "pipelined");

  RawClient replay(rig.listener);
  ASSERT_TRUE(replay.Send(challenge_type, 1, "").ok());
  ASSERT_TRUE(replay.Read(&h, &payload).ok());
  ASSERT_TRUE(replay.Send(authenticate_type, 2, EncodeAuthenticate(mac)).ok());
  ASSERT_TRUE(replay.Read(&h, &payload).ok());
  Status s = ConnectionError(h, payload);
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_TRUE(replay.Closed());

  RawClient unasked(rig.listener);
  ASSERT_TRUE(unasked.Send(authenticate_type, 1, EncodeAuthenticate(mac)).ok());
  ASSERT_TRUE(unasked.Read(&h, &payload).ok());
  s = ConnectionError(h, payload);
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_TRUE(unasked.Closed());
  EXPECT_EQ(rig.metrics.auth_refused->value(), 2u);
  EXPECT_EQ(rig.metrics.requests->value(), 1u);
  rig.listener.Shutdown();
}

// Before authentication a message longer than kMaxHandshakeMessageBytes is refused from its
// header: the LTC answers and closes the connection while most of the payload its header
// announces has not even been sent (so it never buffered it).
TEST(ConnectionListenerAuthTest, AnOversizedMessageBeforeAuthenticationIsRefusedFromItsHeader) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  constexpr size_t kAnnouncedPayload = 16 << 20;
  constexpr size_t kSentPayload = 1000;  // the rest is never sent
  for (ClientMsg type : {ClientMsg::kAuthChallenge, ClientMsg::kDescribe}) {
    SCOPED_TRACE(ClientMsgName(static_cast<uint16_t>(type)));
    RawClient raw(rig.listener);
    const std::string m =
        wire::EncodeMessage(static_cast<uint16_t>(type), 1, std::string(kAnnouncedPayload, 'x'));
    ASSERT_TRUE(raw.SendRaw(std::string_view(m).substr(0, wire::kHeaderBytes + kSentPayload)).ok());
    wire::MessageHeader h;
    std::string payload;
    ASSERT_TRUE(raw.Read(&h, &payload).ok());
    const Status s = ConnectionError(h, payload);
    EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
    // A handshake message is told the limit; a request (an old client's) the missing flag.
    const std::string expected = type == ClientMsg::kAuthChallenge
                                     ? "exceeds the limit of 256 bytes before authentication"
                                     : "--client_secret_file";
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.ToString();
    EXPECT_TRUE(raw.Closed());
  }
  EXPECT_EQ(rig.metrics.auth_refused->value(), 2u);
  EXPECT_EQ(rig.metrics.requests->value(), 0u);
  rig.listener.Shutdown();
}

// A connection not authenticated within auth_timeout is refused and closed, whether its peer
// stays idle, stops after a challenge or trickles a header; an authenticated one is not.
TEST(ConnectionListenerAuthTest, AConnectionNotAuthenticatedInTimeIsClosed) {
  constexpr auto kAuthTimeout = 200ms;
  AuthRig rig(kSecret, kAuthTimeout);
  ASSERT_TRUE(rig.listener.Start().ok());
  const auto start = std::chrono::steady_clock::now();
  auto authenticated = Connect(rig.listener, kSecret);
  ASSERT_NE(authenticated, nullptr);
  RawClient idle(rig.listener);
  RawClient challenged(rig.listener);
  RawClient trickling(rig.listener);
  wire::MessageHeader h;
  std::string payload;
  ASSERT_TRUE(challenged.Send(static_cast<uint16_t>(ClientMsg::kAuthChallenge), 1, "").ok());
  ASSERT_TRUE(challenged.Read(&h, &payload).ok());
  EXPECT_FALSE(h.is_error());
  const std::string m =
      wire::EncodeMessage(static_cast<uint16_t>(ClientMsg::kAuthChallenge), 1, "");
  ASSERT_TRUE(trickling.SendRaw(std::string_view(m).substr(0, wire::kHeaderBytes / 2)).ok());
  for (RawClient* raw : {&idle, &challenged, &trickling}) {
    ASSERT_TRUE(raw->Read(&h, &payload).ok());  // within Read's deadline of 10 s
    const Status s = ConnectionError(h, payload);
    EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
    EXPECT_NE(s.message().find("not authenticated within 200 ms"), std::string::npos)
        << s.ToString();
    EXPECT_TRUE(raw->Closed());
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, kAuthTimeout);
  ASSERT_TRUE(test::WaitFor([&] { return rig.metrics.connections->value() == 1; }));
  // The authenticated connection outlived the deadline.
  auto [s, r] = Call(authenticated.get(), "still served").get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r, "still served");
  EXPECT_EQ(rig.metrics.auth_refused->value(), 3u);
  rig.listener.Shutdown();
}

// Up to kMaxAuthChallenges challenges are answered (the latest nonce authenticates); one more
// before authentication is refused and the connection closed.
TEST(ConnectionListenerAuthTest, ChallengesBeyondTheLimitAreRefused) {
  AuthRig rig;
  ASSERT_TRUE(rig.listener.Start().ok());
  const uint16_t challenge_type = static_cast<uint16_t>(ClientMsg::kAuthChallenge);
  const uint16_t authenticate_type = static_cast<uint16_t>(ClientMsg::kAuthenticate);
  wire::MessageHeader h;
  std::string payload;
  AuthChallenge challenge;
  uint64_t id = 1;

  RawClient within(rig.listener);
  for (int i = 0; i < ConnectionListener::kMaxAuthChallenges; ++i) {
    ASSERT_TRUE(within.Send(challenge_type, id++, "").ok());
    ASSERT_TRUE(within.Read(&h, &payload).ok());
    ASSERT_FALSE(h.is_error());
    ASSERT_TRUE(DecodeAuthChallenge(payload, &challenge).ok());
  }
  ASSERT_TRUE(within
                  .Send(authenticate_type, id++,
                        EncodeAuthenticate(ClientAuthMac(kSecret, challenge.nonce)))
                  .ok());
  ASSERT_TRUE(within.Read(&h, &payload).ok());
  EXPECT_EQ(h.type, authenticate_type);
  EXPECT_FALSE(h.is_error());

  RawClient beyond(rig.listener);
  for (int i = 0; i < ConnectionListener::kMaxAuthChallenges; ++i) {
    ASSERT_TRUE(beyond.Send(challenge_type, id++, "").ok());
    ASSERT_TRUE(beyond.Read(&h, &payload).ok());
    ASSERT_FALSE(h.is_error());
  }
  ASSERT_TRUE(beyond.Send(challenge_type, id++, "").ok());
  ASSERT_TRUE(beyond.Read(&h, &payload).ok());
  const Status s = ConnectionError(h, payload);
  EXPECT_TRUE(s.IsPermissionDenied()) << s.ToString();
  EXPECT_NE(s.message().find("more than 4 AuthChallenge"), std::string::npos) << s.ToString();
  EXPECT_TRUE(beyond.Closed());
  EXPECT_EQ(rig.metrics.auth_refused->value(), 1u);
  rig.listener.Shutdown();
}

}  // namespace
}  // namespace nova::ltc
