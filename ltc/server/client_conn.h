// ClientConn: the LTC server's state of one client connection: its socket, the requests
// it has in flight (bounded: its reader waits for room), and the snapshots the client
// holds on it. ClientMetrics: the server's ltc_client_* counters.
//
// A ClientConn is shared by its reader thread (ConnectionListener) and the workers serving
// its requests; the last owner closes the socket and releases the snapshots the client
// still held.
//
// Thread safety: thread-safe. mu_ and write_mu_ are leaves (never held together).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "ltc/protocol/client_protocol.h"
#include "ltc/server/range_backend.h"

namespace nova::ltc {

// The server's client-facing metrics (ltc_client_* on /metrics). Registered once; the
// pointers are owned by the registry.
struct ClientMetrics {
  // `registry` must outlive this.
  explicit ClientMetrics(MetricsRegistry* registry);
  Counter* const requests;
  Counter* const request_errors;
  Counter* const wrong_range;
  Counter* const connections_refused;
  Counter* const auth_refused;  // connections refused client authentication
  Counter* const served_inline;  // requests served on their connection's reader thread
  Gauge* const connections;
};

class ClientConn {
 public:
  // A snapshot the client took on this connection.
  struct Snap {
    uint32_t range_id = 0;
    RangeInfo info;
    // Weak: a snapshot must not keep a range open after it has left the assignment.
    std::weak_ptr<RangeBackend> backend;
    RangeBackend::Snapshot handle = nullptr;
  };

  // Takes `fd` (closed by the destructor). `metrics` must outlive this.
  ClientConn(int fd, uint64_t id, std::chrono::milliseconds write_timeout,
             ClientMetrics* metrics);
  ~ClientConn();  // releases the snapshots still held, closes the socket
  ClientConn(const ClientConn&) = delete;
  ClientConn& operator=(const ClientConn&) = delete;

  int fd() const { return fd_; }
  uint64_t id() const { return id_; }

  // Writes one message (serialized with other writers) within the write timeout. A failed
  // write shuts the socket down (its reader ends) and every later message is dropped.
  void Send(const std::string& message) EXCLUDES(write_mu_);
  // Sends the error response to request (type, request_id) and counts it.
  void SendError(uint16_t type, uint64_t request_id, const Status& error) EXCLUDES(write_mu_);

  // Waits until fewer than `max_inflight` requests are in flight and, unless none is, their
  // payloads and this one's `bytes` add up to at most `max_inflight_bytes` (or this one fits
  // the budget and those in flight hold at most a 16th of it: small requests that take long,
  // like CompactRange, never hold a big one back); then counts this one and sets *alone to
  // whether no other request of this connection is in flight. False (and nothing counted)
  // once StopReading() was called.
  bool BeginRequest(int max_inflight, uint64_t bytes, uint64_t max_inflight_bytes, bool* alone)
      EXCLUDES(mu_);
  // A request counted by BeginRequest with these `bytes` is answered.
  void EndRequest(uint64_t bytes) EXCLUDES(mu_);
  // Shuts the socket down and wakes a reader waiting in BeginRequest (shutdown).
  void StopReading() EXCLUDES(mu_);

  // The client declared that it sends one request at a time here and waits for each
  // (ClientMsg::kDeclareSynchronous): requests may be served on the reader thread.
  void DeclareSynchronous() { synchronous_.store(true, std::memory_order_relaxed); }
  bool synchronous() const { return synchronous_.load(std::memory_order_relaxed); }

  void AddSnapshot(uint64_t snapshot_id, Snap snap) EXCLUDES(mu_);
  // Copies snapshot `snapshot_id` to *out; NotFound ("no snapshot N on this connection")
  // if the client holds no such snapshot here.
  Status FindSnapshot(uint64_t snapshot_id, Snap* out) const EXCLUDES(mu_);
  // As FindSnapshot, and forgets it (the caller releases it).
  Status TakeSnapshot(uint64_t snapshot_id, Snap* out) EXCLUDES(mu_);

 private:
  // Constant after construction.
  const int fd_;
  const uint64_t id_;
  const std::chrono::milliseconds write_timeout_;
  ClientMetrics* const metrics_;  // must outlive this
  std::atomic<bool> synchronous_{false};

  Mutex write_mu_;  // serializes responses
  bool broken_ GUARDED_BY(write_mu_) = false;  // a write failed, the socket is shut down

  mutable Mutex mu_;
  CondVar room_cv_;  // signalled when a request ends, and by StopReading
  int inflight_ GUARDED_BY(mu_) = 0;
  uint64_t inflight_bytes_ GUARDED_BY(mu_) = 0;  // payload bytes of the requests in flight
  bool stop_reading_ GUARDED_BY(mu_) = false;
  std::map<uint64_t, Snap> snapshots_ GUARDED_BY(mu_);
};

}  // namespace nova::ltc
