// LtcServer: the client-facing side of nova_ltc (docs/ltc_server.md, docs/protocol.md).
//
// Hosts the ranges its AssignmentSource gives it, one RangeBackend (engine) per range, and
// serves clients over TCP: framed, pipelined requests (client_protocol.h), answered in any
// order by `client_threads` workers. A request for a key this LTC does not own, or routed
// with an older epoch, is answered WrongRange("epoch=<N>: ...").
//
// Parts with one job each, held together here:
//   - ConnectionListener (connection_listener.h): accepts connections and runs one reader
//     thread per connection (ClientConn, client_conn.h), bounded in connections and in
//     requests in flight per connection; it hands each request to Dispatch, which serves
//     it on the reader thread when the connection has nothing else in flight (a
//     synchronous client: no hand-off, one wake-up fewer per request) and otherwise queues
//     it on the worker pool. Responses are written under the connection's write lock.
//   - RangeTable (range_table.h): the hosted ranges at the current assignment and their
//     backends (RangeSlot, range_slot.h); opens and closes ranges on assignment changes.
//   - RequestMetrics (request_metrics.h): where each request's time goes (waiting for a
//     worker, in the engine, writing the response), ltc_request_* on /metrics and the end of
//     the kStats text.
//   - This class: the request handlers (routing by key and epoch, ltc_server_handlers.cc),
//     and the applier thread, which applies new assignments from the source (not on the
//     source's thread: opening ranges takes a while) and retries them with backoff if a
//     range fails to open (e.g. a StoC is unreachable), until they apply or a newer one
//     arrives.
//
// New assignments: ranges added are opened before the new table is published, so requests
// never see a half-open range; ranges removed leave the table at once and their backends
// close when the last request using them finishes. A range kept (same id) keeps its
// backend, with the new bounds.
//
// Lifecycle: constructor cannot fail; Init() publishes the initial ranges and opens them
// in the background; Start() listens; Shutdown() stops everything and closes the ranges
// (idempotent).
// Thread safety: thread-safe. Lock order: a source's listener lock, then pending_mu_; the
// parts' locks are their own (none is held while calling into another part).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "ltc/protocol/client_request.h"
#include "ltc/server/client_conn.h"
#include "ltc/server/connection_listener.h"
#include "ltc/server/ltc_assignment.h"
#include "ltc/server/range_backend.h"
#include "ltc/server/range_table.h"
#include "ltc/server/request_metrics.h"

namespace nova::ltc {

struct LtcServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  int client_threads = 4;        // --ltc_client_threads
  // Serve a request on its connection's reader thread when nothing else of the connection
  // waits for it (ConnectionListener's may_run_inline); false: always hand it to a worker.
  bool serve_inline = true;      // --ltc_serve_inline
  // A synchronous connection's reader polls for the next request this long before it
  // sleeps (ConnectionListenerOptions::reader_spin).
  std::chrono::microseconds reader_spin{50};  // --ltc_reader_spin_us
  size_t max_queue = 4096;       // requests waiting for a worker, all connections
  int max_connections = 256;     // --ltc_max_connections
  int max_inflight_per_connection = 256;
  // The defaults are nova_ltc's (docs/ltc_server.md "Limits").
  ClientLimits limits{/*max_key_bytes=*/64 << 10, /*max_value_bytes=*/64 << 20,
                      /*max_batch_ops=*/1 << 20, /*max_request_bytes=*/256ull << 20,
                      /*max_scan_count=*/100000};
  // A scan reply stops growing past this many key and value bytes (the client continues).
  uint64_t max_scan_reply_bytes = 4ull << 20;
  // Threads running CompactRange requests (long: a flush and compactions of a whole key
  // span), apart from the client_threads workers so they never hold up reads and writes;
  // further CompactRange requests wait for one, up to max_compact_queue of them.
  int compact_threads = 1;
  size_t max_compact_queue = 64;
  // A client that does not take a response within this long is disconnected.
  std::chrono::milliseconds write_timeout{10000};
  // The secret clients must prove on connect (--ltc_client_secret_file,
  // ltc/protocol/client_auth.h); empty: clients are not authenticated.
  std::string client_secret;
  // A request for a range still being opened (recovering from its MANIFEST and logs) waits
  // up to this long for it, then gets Unavailable (clients retry until their deadline).
  // At most half the worker threads wait at once, so other ranges are always served.
  std::chrono::milliseconds recovery_wait{100};
  // Called by the applier with every assignment newer than the one in force, before it is
  // applied (e.g. NovaBackends::ApplyStocs: the cluster's StoCs changed). Must not block
  // for long. Null: nothing.
  std::function<void(const LtcAssignment&)> on_assignment;
};

class LtcServer {
 public:
  // `source` and `metrics` must outlive the server; `factory` opens ranges.
  LtcServer(LtcServerOptions options, AssignmentSource* source, BackendFactory factory,
            MetricsRegistry* metrics);
  ~LtcServer();  // Shutdown()
  LtcServer(const LtcServer&) = delete;
  LtcServer& operator=(const LtcServer&) = delete;

  // Publishes the ranges of source->Current() and opens them in the background (requests
  // for a range wait for it, others are served meanwhile). The source's error, or
  // InvalidArgument for an invalid assignment.
  Status Init();
  // Listens and starts watching the source. IOError if the port cannot be bound.
  Status Start();
  void Shutdown() EXCLUDES(pending_mu_);

  // Installs a new assignment (the applier calls this). InvalidArgument if it is invalid
  // or not newer than the current one; the error of a range that fails to open (the old
  // assignment stays in force then).
  Status ApplyAssignment(const LtcAssignment& a) { return ranges_.Apply(a); }

  // "host:port" clients connect to. Valid after Start().
  std::string address() const { return listener_.address(); }
  uint64_t epoch() const { return ranges_.epoch(); }
  // The hosted ranges (the live migration's source side finds their backends there).
  RangeTable* range_table() { return &ranges_; }

 private:
  // The RequestHandler: serves one request read by the listener on the reader thread when
  // it may (`may_run_inline`, and it is not a CompactRange), else queues it on a pool.
  Status Dispatch(const std::shared_ptr<ClientConn>& conn, uint16_t type, uint64_t request_id,
                  std::string payload, bool may_run_inline);
  // Runs one request (on a worker or the reader), writes its response, ends the request and
  // records its times; `queued_at`: when it was handed to a worker (none: served inline).
  void Serve(const std::shared_ptr<ClientConn>& conn, uint16_t type, uint64_t request_id,
             std::string payload, std::optional<MonoTime> queued_at);
  // Serve's decoding and handling: the response payload, or the error to send.
  Result<std::string> Respond(ClientConn* conn, uint16_t type, const std::string& payload);
  // Returns the response payload or the error to send.
  Result<std::string> Handle(ClientConn* conn, const ClientRequest& r);
  Result<std::string> HandleWrite(const HostedRanges& t, const ClientRequest& r);
  Result<std::string> HandleScan(ClientConn* conn, const HostedRanges& t,
                                 const ClientRequest& r);
  Result<std::string> HandleSnapshotOp(ClientConn* conn, const HostedRanges& t,
                                       const ClientRequest& r);
  // Administration (ltc_server_admin.cc; the leveldb::DB adapter's GetApproximateSizes,
  // CompactRange and properties).
  Result<std::string> HandleApproximateSizes(const HostedRanges& t, const ClientRequest& r);
  Result<std::string> HandleCompactRange(const HostedRanges& t, const ClientRequest& r);
  Result<std::string> HandleRangeStats(const HostedRanges& t, const ClientRequest& r);
  // The hosted range holding all of `span` at `epoch`: Route's errors for its start,
  // WrongRange if it goes past that range's end, InvalidArgument if it holds no key.
  Result<const HostedRange*> RouteSpan(const HostedRanges& t, uint64_t epoch,
                                       const KeyRange& span) const;
  // The hosted range owning `key` at the request's epoch, or WrongRange / Unavailable.
  Result<const HostedRange*> Route(const HostedRanges& t, uint64_t epoch,
                                   std::string_view key) const;
  // Applies the newest pending assignment until we stop (the applier thread).
  void ApplyLoop() EXCLUDES(pending_mu_);

  // Constant after construction.
  const LtcServerOptions options_;
  AssignmentSource* const source_;  // must outlive this
  ClientMetrics metrics_;
  RequestMetrics request_metrics_;

  RangeTable ranges_;
  ConnectionListener listener_;
  std::unique_ptr<ThreadPool> pool_;  // set by Start(), before the listener runs
  std::unique_ptr<ThreadPool> compact_pool_;  // CompactRange requests; as pool_
  std::atomic<uint64_t> next_snapshot_id_{1};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> shut_down_{false};

  std::thread applier_;
  Mutex pending_mu_;
  CondVar pending_cv_;  // a newer assignment arrived, or we stop
  std::optional<LtcAssignment> pending_ GUARDED_BY(pending_mu_);  // newest not yet applied
  // Ranges fenced by a newer owner (RangeTableOptions::on_fenced), for the applier to drop.
  std::vector<std::pair<uint32_t, uint64_t>> fenced_ GUARDED_BY(pending_mu_);
};

}  // namespace nova::ltc
