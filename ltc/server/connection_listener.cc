#include "ltc/server/connection_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "common/clock.h"
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

void ConnectionListener::ReadLoop(const std::shared_ptr<ClientConn>& conn) {
  wire::MessageStream in(conn->fd(), options_.max_request_bytes);
  // Client authentication (client_auth.h): the challenge issued on this connection, and
  // whether the client has answered it (always, when no secret is required).
  std::string nonce;
  bool authenticated = options_.client_secret.empty();
  for (;;) {
    wire::MessageHeader h;
    std::string_view payload;
    Status s = in.Next(&h, &payload);
    if (s.IsNotFound()) {
      s = in.Fill(/*dont_wait=*/false);
      if (s.ok() || s.IsUnavailable()) continue;
      break;  // closed by the client, or shut down by us
    }
    if (s.IsInvalidArgument()) {
      // Too long: answer the request it would have been, then hang up.
      conn->SendError(h.type, h.request_id,
                      Status::InvalidArgument("request of " + std::to_string(in.refused_bytes()) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(options_.max_request_bytes) +
                                              " bytes (--ltc_max_request_mb)"));
      break;
    }
    if (s.ok() && h.is_response()) s = Status::Corruption("a client sent a response");
    if (!s.ok()) {
      // The stream cannot be trusted past a bad frame: say why and hang up.
      conn->SendError(kConnectionErrorType, 0, s.Prepend("malformed request"));
      break;
    }
    if (h.type == static_cast<uint16_t>(ClientMsg::kAuthChallenge) ||
        h.type == static_cast<uint16_t>(ClientMsg::kAuthenticate)) {
      // Answered here, in order with the requests around it: nothing the client sends
      // after a successful Authenticate can overtake it.
      if (!HandleAuth(conn.get(), h, payload, &nonce, &authenticated)) break;
      continue;
    }
    if (!authenticated) {
      // A client without the secret (or one older than the handshake): say which flag is
      // missing and hang up, before anything reaches the handler.
      metrics_->auth_refused->Increment();
      conn->SendError(kConnectionErrorType, 0, ClientSecretRequiredError());
      break;
    }
    metrics_->requests->Increment();
    if (!conn->BeginRequest(options_.max_inflight_per_connection, payload.size(),
                            options_.max_request_bytes)) {
      break;
    }
    Status taken = handler_(conn, h.type, h.request_id, std::string(payload));
    if (!taken.ok()) {
      conn->EndRequest(payload.size());
      conn->SendError(h.type, h.request_id, taken);
    }
  }
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
