// LtcConnection: one pipelined TCP connection from a client to an LTC (docs/protocol.md).
//
// Call() sends a request at once (many may be outstanding) and completes it when the
// response with its request id arrives, in whatever order the LTC answers. A reader thread
// per connection reads responses and also enforces deadlines (it wakes for the nearest),
// so a call completes even if the LTC stops answering (paused, partitioned). When the
// connection fails (the LTC died, closed it, or sent garbage), every outstanding call fails
// with NetworkError naming the LTC, or with the connection-level error the LTC sent first
// (e.g. ResourceExhausted: too many connections); later calls fail at once.
//
// Authentication. Given a client secret, Connect runs the handshake of
// ltc/protocol/client_auth.h before returning: the connection is returned only once an LTC
// that requires the secret has accepted it (or the LTC requires none). Without a secret it
// sends nothing more than before; an LTC that requires one then refuses the first call
// with a connection-level PermissionDenied naming --client_secret_file.
//
// Direct connections (ConnectDirect) have no reader thread: the caller of Call sends its
// request and reads the response itself, so a synchronous request costs one wake-up here
// instead of two (the reader's, then the caller's). They carry one call at a time, and
// say so to the LTC (ClientMsg::kDeclareSynchronous), which then serves each request on
// the connection's reader instead of handing it to a worker: one wake-up fewer there too.
// A call that times out fails the connection (its late response must not be taken for
// the next call's).
//
// Thread safety: thread-safe; a direct connection takes one call at a time (its user holds
// it exclusively, e.g. checked out of a pool). Callbacks run on the reader thread (on the
// caller's thread for a direct connection, or when the request cannot be sent), never under
// a lock, and must not block for long or call Close(). write_mu_ and mu_ are leaves (never
// held together).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/adaptive_spin.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/wire/message_stream.h"

namespace nova::client {

// Completes one call: OK and the response payload, or the error.
using CallCallback = std::function<void(const Status& status, std::string payload)>;

class LtcConnection {
 public:
  // Connects to "host:port" before `deadline` and, with a non-empty `client_secret`,
  // authenticates (see above). NetworkError/TimedOut naming the address; PermissionDenied
  // (the LTC's words, naming the flag) when the LTC refuses the secret; the LTC's error if
  // it answers the handshake with one.
  static Result<std::shared_ptr<LtcConnection>> Connect(const std::string& address,
                                                        Deadline deadline,
                                                        uint64_t max_response_bytes,
                                                        const std::string& client_secret = "");
  // As Connect, a direct connection (see above). Its caller polls for each answer for up
  // to `spin` before sleeping (common/adaptive_spin.h; zero: never).
  // `spinners` (null: no limit) counts the callers polling at once, of all the direct
  // connections sharing it (at most one polls); it must outlive the connection.
  static Result<std::shared_ptr<LtcConnection>> ConnectDirect(
      const std::string& address, Deadline deadline, uint64_t max_response_bytes,
      const std::string& client_secret, std::chrono::microseconds spin = {},
      std::atomic<int>* spinners = nullptr);
  ~LtcConnection();  // Close()
  LtcConnection(const LtcConnection&) = delete;
  LtcConnection& operator=(const LtcConnection&) = delete;

  // Sends a request of `type`; `done` runs exactly once: with the response, the LTC's
  // error, the connection's failure, or TimedOut at `deadline`. On a direct connection it
  // runs on the calling thread before Call returns, unless a concurrent Close() fails the
  // call (then on the closing thread). REQUIRES (direct): no other call in progress.
  void Call(uint16_t type, std::string_view payload, Deadline deadline, CallCallback done)
      EXCLUDES(mu_, write_mu_);
  // False once the connection has failed or was closed.
  bool healthy() const EXCLUDES(mu_);
  // Fails outstanding calls with Aborted and joins the reader. Idempotent.
  void Close() EXCLUDES(mu_);
  const std::string& address() const { return address_; }

 private:
  struct Pending {
    CallCallback done;
    MonoTime deadline;
  };
  // Shared by Connect and ConnectDirect.
  static Result<std::shared_ptr<LtcConnection>> Open(const std::string& address,
                                                     Deadline deadline,
                                                     uint64_t max_response_bytes,
                                                     const std::string& client_secret,
                                                     bool direct, std::chrono::microseconds spin,
                                                     std::atomic<int>* spinners);
  LtcConnection(std::string address, int fd, uint64_t max_response_bytes, bool direct,
                std::chrono::microseconds spin, std::atomic<int>* spinners);
  // The handshake of ltc/protocol/client_auth.h; OK once authenticated or not required.
  Status Authenticate(const std::string& client_secret, Deadline deadline)
      EXCLUDES(mu_, write_mu_);
  void ReadLoop() EXCLUDES(mu_);
  // Completes the calls whose responses `in` holds. False once the connection failed
  // (a bad response, or the LTC's connection-level error).
  bool DeliverResponses(wire::MessageStream* in) EXCLUDES(mu_);
  // Direct connections: reads on the calling thread until call `id` is completed, failing
  // the connection at `deadline` or on a read error.
  void AwaitDirect(uint64_t id, Deadline deadline) EXCLUDES(mu_);
  // The connection's failure for a read error of its stream (MessageStream::Fill).
  Status LostError(const Status& read_error) const;
  // Marks the connection failed and fails every outstanding call with `why`.
  void Fail(const Status& why) EXCLUDES(mu_);
  // Fails calls past their deadline; returns the nearest remaining deadline.
  MonoTime ExpireOverdue() EXCLUDES(mu_);

  // Constant after construction (reader_ and wake_pipe_ are set by Connect, before the
  // connection is shared).
  const std::string address_;
  const int fd_;
  const uint64_t max_response_bytes_;
  const bool direct_;
  int wake_pipe_[2] = {-1, -1};  // wakes the reader for a nearer deadline or Close()
  std::thread reader_;
  // Direct connections: what was received and not yet delivered (the caller's, one at a
  // time; see AwaitDirect).
  std::unique_ptr<wire::MessageStream> direct_in_;
  AdaptiveSpin direct_spin_;  // the caller's, as direct_in_

  Mutex write_mu_;  // serializes sends

  mutable Mutex mu_;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  // When the reader wakes next on its own (for a deadline, or its periodic check): a call
  // with an earlier deadline wakes it, later ones need not (saves a wake-up per call).
  MonoTime reader_wakes_at_ GUARDED_BY(mu_) = MonoTime::min();
  Status failed_ GUARDED_BY(mu_);  // non-OK once the connection is unusable
  bool closing_ GUARDED_BY(mu_) = false;
};

}  // namespace nova::client
