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
// Thread safety: thread-safe. Callbacks run on the reader thread (or on the caller's thread
// when the request cannot be sent) and must not block for long or call Close().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/status.h"

namespace nova::client {

// Completes one call: OK and the response payload, or the error.
using CallCallback = std::function<void(const Status& status, std::string payload)>;

class LtcConnection {
 public:
  // Connects to "host:port" before `deadline`. NetworkError/TimedOut naming the address.
  static Result<std::shared_ptr<LtcConnection>> Connect(const std::string& address,
                                                        Deadline deadline,
                                                        uint64_t max_response_bytes);
  ~LtcConnection();  // Close()
  LtcConnection(const LtcConnection&) = delete;
  LtcConnection& operator=(const LtcConnection&) = delete;

  // Sends a request of `type`; `done` runs exactly once: with the response, the LTC's
  // error, the connection's failure, or TimedOut at `deadline`.
  void Call(uint16_t type, std::string_view payload, Deadline deadline, CallCallback done);
  // False once the connection has failed or was closed.
  bool healthy() const;
  // Fails outstanding calls with Aborted and joins the reader. Idempotent.
  void Close();
  const std::string& address() const { return address_; }

 private:
  struct Pending {
    CallCallback done;
    MonoTime deadline;
  };
  LtcConnection(std::string address, int fd, uint64_t max_response_bytes);
  void ReadLoop();
  // Marks the connection failed and fails every outstanding call with `why`.
  void Fail(const Status& why);
  // Fails calls past their deadline; returns the nearest remaining deadline.
  MonoTime ExpireOverdue();

  const std::string address_;
  const int fd_;
  const uint64_t max_response_bytes_;
  int wake_pipe_[2] = {-1, -1};  // wakes the reader for a nearer deadline or Close()
  std::thread reader_;

  std::mutex write_mu_;  // a leaf: serializes sends (never held with mu_)

  mutable std::mutex mu_;
  // Protected by mu_:
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;
  Status failed_;  // non-OK once the connection is unusable
  bool closing_ = false;
};

}  // namespace nova::client
