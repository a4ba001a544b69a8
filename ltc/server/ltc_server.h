// LtcServer: the client-facing side of nova_ltc (docs/ltc_server.md, docs/protocol.md).
//
// Hosts the ranges its AssignmentSource gives it, one RangeBackend (engine) per range, and
// serves clients over TCP: framed, pipelined requests (client_protocol.h), answered in any
// order by `client_threads` workers. A request for a key this LTC does not own, or routed
// with an older epoch, is answered WrongRange("epoch=<N>: ...").
//
// Threads: one acceptor; one reader per connection (connections are bounded by
// max_connections, so readers are too); the worker pool. A reader stops reading while its
// connection has max_inflight_per_connection requests in the pool, which bounds memory.
// Responses are written by the workers under the connection's write lock.
//
// New assignments (AssignmentSource::Watch): ranges added are opened before the new table
// is published, so requests never see a half-open range; ranges removed leave the table at
// once and their backends close when the last request using them finishes. A range kept
// (same id) keeps its backend, with the new bounds.
//
// Lifecycle: constructor cannot fail; Init() opens the initial ranges; Start() listens;
// Shutdown() stops everything and closes the ranges (idempotent).
// Thread safety: thread-safe. Lock order: apply_mu_ before table_mu_; a connection's mu
// before nothing else; write_mu is a leaf.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "common/wire/message.h"
#include "ltc/protocol/client_request.h"
#include "ltc/server/ltc_assignment.h"
#include "ltc/server/range_backend.h"

namespace nova::ltc {

struct LtcServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  int client_threads = 4;        // --ltc_client_threads
  size_t max_queue = 4096;       // requests waiting for a worker, all connections
  int max_connections = 256;     // --ltc_max_connections
  int max_inflight_per_connection = 256;
  ClientLimits limits{/*max_key_bytes=*/16 << 10, /*max_value_bytes=*/4 << 20,
                      /*max_batch_ops=*/10000, /*max_request_bytes=*/32ull << 20,
                      /*max_scan_count=*/100000};
  // A scan reply stops growing past this many key and value bytes (the client continues).
  uint64_t max_scan_reply_bytes = 4ull << 20;
  // A client that does not take a response within this long is disconnected.
  std::chrono::milliseconds write_timeout{10000};
  // A request for a range still being opened (recovering from its MANIFEST and logs) waits
  // up to this long for it, then gets Unavailable (clients retry until their deadline).
  // At most half the worker threads wait at once, so other ranges are always served.
  std::chrono::milliseconds recovery_wait{100};
};

// A hosted range's backend, or the state of its opening: the server publishes a range as
// soon as it is assigned and opens it in the background, so requests for other ranges are
// served meanwhile. Thread-safe.
class RangeSlot {
 public:
  explicit RangeSlot(uint32_t range_id) : range_id_(range_id), since_(MonoNow()) {}
  static std::shared_ptr<RangeSlot> Ready(uint32_t range_id, std::shared_ptr<RangeBackend> b);
  void Set(std::shared_ptr<RangeBackend> backend);
  // The last attempt to open failed (another follows).
  void SetError(const Status& error);
  // The backend, waiting up to `timeout` for it; else Unavailable saying why.
  Result<std::shared_ptr<RangeBackend>> Wait(std::chrono::milliseconds timeout) const;
  // The backend if open, else null.
  std::shared_ptr<RangeBackend> TryGet() const;
  // "recovering for N ms" / "opening failed: ..." (for stats).
  std::string StateText() const;
  // The range left this LTC's assignment: a background open stops trying.
  void Abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_.load(); }

 private:
  const uint32_t range_id_;
  const MonoTime since_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::shared_ptr<RangeBackend> backend_;  // protected by mu_
  Status last_error_;                      // protected by mu_
  std::atomic<bool> abandoned_{false};
};

class LtcServer {
 public:
  // `source` and `metrics` must outlive the server; `factory` opens ranges.
  LtcServer(LtcServerOptions options, AssignmentSource* source, BackendFactory factory,
            MetricsRegistry* metrics);
  ~LtcServer();  // Shutdown()
  LtcServer(const LtcServer&) = delete;
  LtcServer& operator=(const LtcServer&) = delete;

  // Opens the ranges of source->Current(). Returns the first error (a range that fails to
  // open fails Init: an LTC that silently serves fewer ranges would answer WrongRange for
  // keys the configuration says it owns).
  Status Init();
  // Listens and starts watching the source. IOError if the port cannot be bound.
  Status Start();
  void Shutdown();

  // Installs a new assignment (the watcher calls this). InvalidArgument if it is invalid or
  // not newer than the current one; the error of a range that fails to open (the old
  // assignment stays in force then).
  Status ApplyAssignment(const LtcAssignment& a);

  // "host:port" clients connect to. Valid after Start().
  std::string address() const;
  uint64_t epoch() const;

 private:
  struct Conn;
  struct Hosted {
    RangeInfo info;
    std::shared_ptr<RangeSlot> slot;
  };
  struct Table {
    uint64_t epoch = 0;
    uint32_t ltc_id = 0;
    std::vector<Hosted> ranges;  // ascending by start
    // The hosted range holding `key`, or null.
    const Hosted* Find(std::string_view key) const;
  };

  void AcceptLoop();
  void ReadLoop(std::shared_ptr<Conn> conn);
  // Runs one request on a worker and writes its response.
  void Serve(const std::shared_ptr<Conn>& conn, uint16_t type, uint64_t request_id,
             std::string payload);
  // Returns the response payload or the error to send.
  Result<std::string> Handle(Conn* conn, const ClientRequest& r);
  Result<std::string> HandleWrite(const Table& t, const ClientRequest& r);
  Result<std::string> HandleScan(Conn* conn, const Table& t, const ClientRequest& r);
  Result<std::string> HandleSnapshotOp(Conn* conn, const Table& t, const ClientRequest& r);
  // The hosted range owning `key` at the request's epoch, or WrongRange / Unavailable.
  Result<const Hosted*> Route(const Table& t, uint64_t epoch, std::string_view key) const;
  // The range's backend once it is open (see LtcServerOptions::recovery_wait).
  Result<std::shared_ptr<RangeBackend>> BackendOf(const Hosted& h);
  // Opens `r` on its own thread, retrying with backoff until it opens or we stop.
  void OpenInBackground(const RangeInfo& r, const LtcAssignment& a,
                        std::shared_ptr<RangeSlot> slot);
  std::shared_ptr<const Table> CurrentTable() const;
  // Writes one message to the connection (serialized with other writers). A failed write
  // closes the connection.
  void Send(Conn* conn, const std::string& message);
  void SendError(Conn* conn, uint16_t type, uint64_t request_id, const Status& error);

  // Constant after construction.
  const LtcServerOptions options_;
  AssignmentSource* const source_;  // must outlive this
  const BackendFactory factory_;
  MetricsRegistry* const metrics_;  // must outlive this
  Counter* requests_;
  Counter* request_errors_;
  Counter* wrong_range_;
  Counter* connections_refused_;
  Gauge* connections_;

  std::unique_ptr<ThreadPool> pool_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // wakes the acceptor at shutdown
  uint16_t bound_port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_snapshot_id_{1};

  std::mutex apply_mu_;  // serializes ApplyAssignment (opening engines may take a while)
  // New assignments from the source are applied by applier_, not on the source's thread
  // (opening and closing ranges takes a while), and retried with backoff if a range fails
  // to open (e.g. a StoC is unreachable), until they apply or a newer one arrives.
  void ApplyLoop();
  std::thread applier_;
  std::mutex openers_mu_;
  std::vector<std::thread> openers_;  // protected by openers_mu_; joined at Shutdown
  std::atomic<int> waiting_for_recovery_{0};
  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  std::optional<LtcAssignment> pending_;  // newest not yet applied; protected by pending_mu_
  mutable std::mutex table_mu_;
  std::shared_ptr<const Table> table_;  // protected by table_mu_

  std::mutex conns_mu_;
  std::map<uint64_t, std::shared_ptr<Conn>> conns_;  // protected by conns_mu_
  uint64_t next_conn_id_ = 1;                        // protected by conns_mu_
  std::vector<std::thread> finished_readers_;        // protected by conns_mu_; joined later
  bool shut_down_ = false;                           // protected by conns_mu_
};

}  // namespace nova::ltc
