// ConnectionListener: accepts client connections on the LTC's client port and reads their
// requests, one reader thread per connection, handing each request to a RequestHandler.
//
// Connections are bounded by max_connections (one over is told ResourceExhausted on a
// connection-level error message, then closed), so readers are too. A reader stops
// reading while its connection has max_inflight_per_connection requests, or more than
// max_request_bytes of request payloads, in flight (one request is admitted alone whatever
// its size), which bounds memory: a connection holds at most about twice max_request_bytes
// (what is in flight and the request its reader holds). A request too long, or a malformed
// frame, is answered with an error and the connection is closed (the stream cannot be
// trusted past it).
//
// Client authentication (ltc/protocol/client_auth.h). With a client_secret, a connection's
// reader answers the handshake itself and hands no request to the handler before the
// client has proven the secret: any other request first, or a wrong MAC, is answered with
// a connection-level PermissionDenied naming the client's flag, and the connection is
// closed. Until then an unauthenticated peer is given little: its reader reads exactly one
// message at a time, of at most kMaxHandshakeMessageBytes (a longer one is refused from
// its header, its payload never read), answers at most kMaxAuthChallenges AuthChallenges,
// and closes the connection (after a connection-level PermissionDenied) unless it is
// authenticated within auth_timeout of its acceptance; so idle or slow peers cannot hold
// the max_connections slots or a max_request_bytes buffer each. Without a secret, the
// handshake is answered "not required" and nothing else changes (none of these limits).
//
// Lifecycle: constructor cannot fail; Start() listens; Shutdown() stops accepting, shuts
// every connection's socket down and joins the readers (idempotent; the destructor calls
// it). Thread safety: thread-safe. conns_mu_ is held before a connection's locks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/wire/message.h"
#include "ltc/server/client_conn.h"

namespace nova::ltc {

struct ConnectionListenerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  int max_connections = 256;
  int max_inflight_per_connection = 256;
  uint64_t max_request_bytes = 32ull << 20;
  // A client that does not take a response within this long is disconnected.
  std::chrono::milliseconds write_timeout{10000};
  // The secret clients must prove on connect (--ltc_client_secret_file); empty: none.
  std::string client_secret;
  // With a client_secret: a connection not authenticated within this long of its
  // acceptance is refused and closed.
  std::chrono::milliseconds auth_timeout{10000};
  // A synchronous connection's reader polls for the next request this long before it
  // sleeps (common/adaptive_spin.h: only while that pays); zero: it sleeps at once.
  std::chrono::microseconds reader_spin{50};
};

// Takes one request read from `conn` (on its reader thread): runs it, on that thread or by
// handing it to a worker, and calls conn->EndRequest(payload.size()) once it is answered.
// `may_run_inline` is true when nothing else of the connection waits for its reader: its
// client declared it synchronous (ClientMsg::kDeclareSynchronous: one request at a time),
// no other request of it is in flight and no byte of a next one has been received. Then
// running the request on the reader thread costs the connection nothing and saves the
// hand-off (a wake-up of a worker; docs/ltc_server.md "Threads"). A non-OK return means it
// was not taken: the listener ends the request and answers it with that error.
using RequestHandler = std::function<Status(const std::shared_ptr<ClientConn>& conn,
                                            uint16_t type, uint64_t request_id,
                                            std::string payload, bool may_run_inline)>;

class ConnectionListener {
 public:
  // Before its client is authenticated (with a client_secret), a connection's messages
  // are at most this long, header included: the handshake's are under 64 bytes.
  static constexpr size_t kMaxHandshakeMessageBytes = 256;
  // ... and it is answered at most this many AuthChallenges (a client needs one).
  static constexpr int kMaxAuthChallenges = 4;

  // `metrics` must outlive this; `handler` runs on the reader threads until Shutdown().
  ConnectionListener(ConnectionListenerOptions options, RequestHandler handler,
                     ClientMetrics* metrics);
  ~ConnectionListener();  // Shutdown()
  ConnectionListener(const ConnectionListener&) = delete;
  ConnectionListener& operator=(const ConnectionListener&) = delete;

  // Listens on host:port and starts accepting. IOError if the port cannot be bound.
  // REQUIRES: called once.
  Status Start();
  void Shutdown() EXCLUDES(conns_mu_);
  // "host:port" clients connect to. Valid after Start().
  std::string address() const;

 private:
  void AcceptLoop() EXCLUDES(conns_mu_);
  // Takes or refuses one accepted socket.
  void Admit(int fd) EXCLUDES(conns_mu_);
  void ReadLoop(const std::shared_ptr<ClientConn>& conn) EXCLUDES(conns_mu_);
  // With a client_secret, before anything else is read from `conn`: reads and answers the
  // handshake, one whole message at a time and nothing past it (requests the client
  // pipelines behind its Authenticate stay in the socket for ServeRequests). True once the
  // client is authenticated; false once the connection must close (closed by the peer or
  // shut down, or refused: the connection-level error was sent).
  bool AwaitAuthentication(ClientConn* conn);
  // Reads requests (and later handshake messages) and hands them to the handler until the
  // connection ends. REQUIRES: no secret, or AwaitAuthentication(conn) returned true.
  void ServeRequests(const std::shared_ptr<ClientConn>& conn);
  // Answers one handshake message (type kAuthChallenge or kAuthenticate) of `conn`:
  // *nonce is the challenge issued on it (empty before), *authenticated whether it has
  // proven the secret. False once it sent a connection-level error: close the connection.
  bool HandleAuth(ClientConn* conn, const wire::MessageHeader& h, std::string_view payload,
                  std::string* nonce, bool* authenticated);

  // Constant after construction.
  const ConnectionListenerOptions options_;
  const RequestHandler handler_;
  ClientMetrics* const metrics_;  // must outlive this

  // Set by Start(), before the acceptor runs.
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // wakes the acceptor at shutdown
  uint16_t bound_port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> spinning_readers_{0};  // readers polling for a next request (at most 1)

  struct Reader {
    std::shared_ptr<ClientConn> conn;
    std::thread thread;
  };
  Mutex conns_mu_;
  std::map<uint64_t, Reader> conns_ GUARDED_BY(conns_mu_);
  uint64_t next_conn_id_ GUARDED_BY(conns_mu_) = 1;
  // Threads of readers that ended by themselves, joined by the acceptor or Shutdown().
  std::vector<std::thread> finished_readers_ GUARDED_BY(conns_mu_);
  bool shut_down_ GUARDED_BY(conns_mu_) = false;
};

}  // namespace nova::ltc
