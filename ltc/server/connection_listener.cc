#include "ltc/server/connection_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "common/adaptive_spin.h"
#include "common/clock.h"
#include "common/coding.h"
#include "common/transport/tcp_socket.h"
#include "common/wire/message.h"
#include "common/wire/message_stream.h"
#include "ltc/protocol/client_auth.h"
#include "ltc/protocol/client_protocol.h"

namespace nova::ltc {
namespace {

// Socket buffer size for client connections.
constexpr int kSocketBufferBytes = 1 << 20;

// The connection-level error message type (request id 0): sent before the LTC closes a
// connection it refuses or cannot parse. DO NOT CHANGE: on the wire.
constexpr uint16_t kConnectionErrorType = 0x0300;

// Offset of the type in a message header (common/wire/message.h). DO NOT CHANGE: on the wire.
constexpr size_t kHeaderTypeOffset = 4;

bool IsHandshakeType(uint16_t type) {
  return type == static_cast<uint16_t>(ClientMsg::kAuthChallenge) ||
         type == static_cast<uint16_t>(ClientMsg::kAuthenticate);
}

// Reads exactly one message from `fd` before `deadline`, and not a byte past it: OK with
// *h and *payload (a view into *message). A message longer than
// ConnectionListener::kMaxHandshakeMessageBytes is refused from its header alone
// (PermissionDenied, only h->type set): its payload is never read, nor a buffer made for
// it. TimedOut at the deadline; Corruption or NotSupported for bytes that are not a
// message; another error if the connection was closed or recv failed.
Status ReadHandshakeMessage(int fd, Deadline deadline, wire::MessageHeader* h, std::string* message,
                            std::string_view* payload) {
  constexpr size_t kMaxBytes = ConnectionListener::kMaxHandshakeMessageBytes;
  message->assign(wire::kHeaderBytes, '\0');
  NOVA_RETURN_NOT_OK(transport::ReadFully(fd, message->data(), message->size(), deadline));
  size_t total = 0;
  NOVA_RETURN_NOT_OK(wire::PeekMessageLength(*message, wire::kMaxEncodablePayload, &total));
  if (total > kMaxBytes) {
    h->type = DecodeFixed16(message->data() + kHeaderTypeOffset);
    return Status::PermissionDenied("handshake message of " + std::to_string(total) +
                                    " bytes exceeds the limit of " + std::to_string(kMaxBytes) +
                                    " bytes before authentication");
  }
  message->resize(total);
  NOVA_RETURN_NOT_OK(transport::ReadFully(fd, message->data() + wire::kHeaderBytes,
                                          total - wire::kHeaderBytes, deadline));
  return wire::DecodeMessage(*message, h, payload, kMaxBytes);
}

}  // namespace

ConnectionListener::ConnectionListener(ConnectionListenerOptions options, RequestHandler handler,
                                       ClientMetrics* metrics)
    : options_(std::move(options)), handler_(std::move(handler)), metrics_(metrics) {}

ConnectionListener::~ConnectionListener() { Shutdown(); }

std::string ConnectionListener::address() const {
  return options_.host + ":" + std::to_string(bound_port_);
}

Status ConnectionListener::Start() {
  auto fd = transport::ListenTcp(options_.host, options_.port, &bound_port_);
  if (!fd.ok()) return fd.status().Prepend("client listener");
  listen_fd_ = fd.value();
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::OK();
}

void ConnectionListener::Shutdown() {
  {
    MutexLock l(&conns_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  stopping_ = true;
  if (acceptor_.joinable()) {
    const char b = 1;
    (void)!::write(wake_pipe_[1], &b, 1);
    acceptor_.join();
  }
  // Shut every connection's socket (its reader wakes up) and join the readers. A reader
  // that finds itself gone from conns_ leaves its thread to us.
  std::vector<std::thread> readers;
  {
    MutexLock l(&conns_mu_);
    for (auto& [id, r] : conns_) {
      r.conn->StopReading();
      if (r.thread.joinable()) readers.push_back(std::move(r.thread));
    }
    conns_.clear();
    for (auto& t : finished_readers_) readers.push_back(std::move(t));
    finished_readers_.clear();
  }
  for (auto& t : readers) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  for (int& p : wake_pipe_) {
    if (p >= 0) ::close(p);
    p = -1;
  }
}

void ConnectionListener::AcceptLoop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "client listener poll: " << strerror(errno);
      return;
    }
    if (fds[1].revents != 0 || stopping_) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer gave up already, or out of fds: try the next one
    transport::TuneSocket(fd, kSocketBufferBytes).IgnoreError();
    Admit(fd);
  }
}

void ConnectionListener::Admit(int fd) {
  std::vector<std::thread> done;
  {
    MutexLock l(&conns_mu_);
    done.swap(finished_readers_);
    if (conns_.size() < static_cast<size_t>(options_.max_connections)) {
      auto conn = std::make_shared<ClientConn>(fd, next_conn_id_++, options_.write_timeout,
                                               metrics_);
      // The gauge counts the connection before its reader can answer anything on it (a
      // client that got an answer sees itself counted). The reader takes conns_mu_ before it
      // leaves, so it finds its entry complete.
      Reader& reader = conns_[conn->id()];
      reader.conn = conn;
      metrics_->connections->Set(static_cast<double>(conns_.size()));
      reader.thread = std::thread([this, conn] { ReadLoop(conn); });
      fd = -1;
    }
  }
  if (fd >= 0) {
    metrics_->connections_refused->Increment();
    const std::string msg = wire::EncodeErrorResponse(
        kConnectionErrorType, 0,
        Status::ResourceExhausted("too many client connections: the limit is " +
                                  std::to_string(options_.max_connections) +
                                  " (--ltc_max_connections)"));
    transport::WriteFully(fd, msg.data(), msg.size(), Deadline::After(options_.write_timeout))
        .IgnoreError();
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
  }
  for (auto& t : done) t.join();
}

bool ConnectionListener::HandleAuth(ClientConn* conn, const wire::MessageHeader& h,
                                    std::string_view payload, std::string* nonce,
                                    bool* authenticated) {
  const bool required = !options_.client_secret.empty();
  if (h.type == static_cast<uint16_t>(ClientMsg::kAuthChallenge)) {
    // A new challenge replaces the previous one: each MAC answers the latest nonce only.
    if (required) *nonce = NewAuthNonce();
    conn->Send(wire::EncodeMessage(h.type, h.request_id,
                                   EncodeAuthChallenge(AuthChallenge{required, *nonce}),
                                   wire::kFlagResponse));
    return true;
  }
  // kAuthenticate. Without a secret there is nothing to check.
  if (required) {
    std::string mac;
    Status s = DecodeAuthenticate(payload, &mac);
    if (s.ok() && nonce->empty()) {
      s = Status::PermissionDenied("Authenticate before AuthChallenge: no nonce to answer");
    }
    if (s.ok() && !ClientAuthMacMatches(options_.client_secret, *nonce, mac)) {
      s = WrongClientSecretError();
    }
    nonce->clear();  // one attempt per challenge
    if (!s.ok()) {
      metrics_->auth_refused->Increment();
      conn->SendError(kConnectionErrorType, 0, s);
      return false;
    }
    *authenticated = true;
  }
  conn->Send(wire::EncodeMessage(h.type, h.request_id, "", wire::kFlagResponse));
  return true;
}

bool ConnectionListener::AwaitAuthentication(ClientConn* conn) {
  // The deadline covers the whole handshake, whatever the peer sends meanwhile (idling,
  // trickling bytes, challenging again): an unauthenticated connection cannot hold its
  // slot longer.
  const Deadline deadline = Deadline::After(options_.auth_timeout);
  auto refuse = [&](const Status& why) {
    metrics_->auth_refused->Increment();
    conn->SendError(kConnectionErrorType, 0, why);
    return false;
  };
  std::string nonce;
  bool authenticated = false;
  int challenges = 0;
  while (!authenticated) {
    wire::MessageHeader h;
    std::string message;
    std::string_view payload;
    Status s = ReadHandshakeMessage(conn->fd(), deadline, &h, &message, &payload);
    if (s.IsTimedOut()) {
      return refuse(Status::PermissionDenied(
          "not authenticated within " + std::to_string(options_.auth_timeout.count()) +
          " ms of connecting: this LTC requires client authentication (AuthChallenge, then "
          "Authenticate; the client's --client_secret_file)"));
    }
    if (s.IsPermissionDenied()) {
      // Too long. A request (an old client's first one) gets the usual refusal: the secret
      // is what the client lacks.
      return refuse(IsHandshakeType(h.type) ? s : ClientSecretRequiredError());
    }
    if (s.IsCorruption() || s.code() == Status::Code::kNotSupported ||
        (s.ok() && h.is_response())) {
      if (s.ok()) s = Status::Corruption("a client sent a response");
      conn->SendError(kConnectionErrorType, 0, s.Prepend("malformed request"));
      return false;
    }
    if (!s.ok()) return false;  // closed by the client, or shut down by us
    // A client without the secret (or one older than the handshake): say which flag is
    // missing and hang up, before anything reaches the handler.
    if (!IsHandshakeType(h.type)) return refuse(ClientSecretRequiredError());
    if (h.type == static_cast<uint16_t>(ClientMsg::kAuthChallenge) &&
        ++challenges > kMaxAuthChallenges) {
      return refuse(
          Status::PermissionDenied("more than " + std::to_string(kMaxAuthChallenges) +
                                   " AuthChallenge on a connection before it is authenticated"));
    }
    if (!HandleAuth(conn, h, payload, &nonce, &authenticated)) return false;
  }
  return true;
}

void ConnectionListener::ServeRequests(const std::shared_ptr<ClientConn>& conn) {
  wire::MessageStream in(conn->fd(), options_.max_request_bytes);
  // Client authentication (client_auth.h): the challenge issued on this connection, and
  // whether the client has answered it (already done, or not required).
  std::string nonce;
  bool authenticated = true;
  AdaptiveSpin spin(options_.reader_spin, &spinning_readers_);
  for (;;) {
    wire::MessageHeader h;
    std::string_view payload;
    Status s = in.Next(&h, &payload);
    if (s.IsNotFound()) {
      if (conn->synchronous() && spin.ShouldSpin()) {
        // The client's next request usually follows its answer closely: catch it without
        // sleeping (a wake-up costs more; common/adaptive_spin.h).
        s = spin.PollWindow(MonoNow() + spin.window(),
                            [&] { return in.Fill(/*dont_wait=*/true); });
        if (s.ok()) continue;
        if (!s.IsUnavailable()) return;  // closed by the client, or shut down by us
      }
      s = in.Fill(/*dont_wait=*/false);
      if (s.ok() || s.IsUnavailable()) continue;
      return;  // closed by the client, or shut down by us
    }
    if (s.IsInvalidArgument()) {
      // Too long: answer the request it would have been, then hang up.
      conn->SendError(h.type, h.request_id,
                      Status::InvalidArgument("request of " + std::to_string(in.refused_bytes()) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(options_.max_request_bytes) +
                                              " bytes (--ltc_max_request_mb)"));
      return;
    }
    if (s.ok() && h.is_response()) s = Status::Corruption("a client sent a response");
    if (!s.ok()) {
      // The stream cannot be trusted past a bad frame: say why and hang up.
      conn->SendError(kConnectionErrorType, 0, s.Prepend("malformed request"));
      return;
    }
    if (IsHandshakeType(h.type)) {
      // Answered here, in order with the requests around it: nothing the client sends
      // after a successful Authenticate can overtake it.
      if (!HandleAuth(conn.get(), h, payload, &nonce, &authenticated)) return;
      continue;
    }
    if (h.type == static_cast<uint16_t>(ClientMsg::kDeclareSynchronous)) {
      if (!payload.empty()) {
        conn->SendError(h.type, h.request_id,
                        Status::Corruption("DeclareSynchronous request has a payload"));
        continue;
      }
      conn->DeclareSynchronous();
      conn->Send(wire::EncodeMessage(h.type, h.request_id, "", wire::kFlagResponse));
      continue;
    }
    metrics_->requests->Increment();
    bool alone = false;
    if (!conn->BeginRequest(options_.max_inflight_per_connection, payload.size(),
                            options_.max_request_bytes, &alone)) {
      return;
    }
    // Only a connection declared synchronous: on a pipelined one the next request may be
    // in the socket already, and a request that waits (a write stall, a recovering range)
    // would hold up the connection's others.
    const bool may_run_inline = conn->synchronous() && alone && in.buffered_bytes() == 0;
    Status taken = handler_(conn, h.type, h.request_id, std::string(payload), may_run_inline);
    if (!taken.ok()) {
      conn->EndRequest(payload.size());
      conn->SendError(h.type, h.request_id, taken);
    }
  }
}

void ConnectionListener::ReadLoop(const std::shared_ptr<ClientConn>& conn) {
  // With a secret nothing but the handshake is read until the client has proven it.
  if (options_.client_secret.empty() || AwaitAuthentication(conn.get())) ServeRequests(conn);
  ::shutdown(conn->fd(), SHUT_RD);
  MutexLock l(&conns_mu_);
  auto it = conns_.find(conn->id());
  if (it != conns_.end()) {
    if (it->second.thread.joinable()) finished_readers_.push_back(std::move(it->second.thread));
    conns_.erase(it);
  }
  metrics_->connections->Set(static_cast<double>(conns_.size()));
}

}  // namespace nova::ltc
