// NovaClient: the C++ client library of a Nova-LSM cluster (DESIGN.md section 9,
// docs/protocol.md).
//
// Routing. The client keeps a RoutingTable (epoch; ranges [start, end) -> LTC address)
// from a RoutingSource. StaticRoutingSource asks every LTC of a fixed address list
// (--ltc) to Describe itself; the ZooKeeper config watcher (coordinator/) will implement
// RoutingSource too, or push tables with SetRouting(). Each request goes to the LTC owning
// its key, carrying the table's epoch.
//
// Retries. A call that fails with WrongRange (the configuration moved on), NetworkError /
// Unavailable (an LTC died or is not ready) or TimedOut-on-connect refreshes the routing
// table and is retried with exponential backoff (initial_backoff doubling up to
// max_backoff) until its deadline (options.timeout from the call); then it fails with the
// last error, prefixed with the operation. Other errors (NotFound, InvalidArgument for a
// limit, Corruption) are returned at once. Puts and deletes are idempotent, so a retry
// after a lost response is safe.
//
// Limits. Every new connection first asks its LTC to Describe itself and keeps the
// ClientLimits it reports (--ltc_max_key_bytes, --ltc_max_value_bytes, --ltc_max_batch_ops,
// --ltc_max_request_mb), so a key, value, batch part or request over them is refused before
// it is sent: InvalidArgument naming the flag, at once, with no round trip (the LTC checks
// again; the client never assumes numbers of its own).
//
// Pipelining. Each LTC gets connections_per_ltc connections used round-robin; calls are
// sent without waiting for earlier ones. Blocking calls use direct connections instead
// (ClientOptions::direct_calls): a calling thread has one to itself while it waits. The *Async methods return at once and complete
// through a callback (on a connection's reader thread or the retry thread, or on the
// calling thread itself when the call fails before anything is sent, e.g. a key over the
// LTC's limit: keep it short, and take no lock the caller may hold) or a std::future.
//
// Write(batch) is split by range; each range's part is applied atomically (all or
// nothing). Before any part is sent, every part is routed, its LTC connected and every
// part checked against its LTC's limits: a batch refused there applies nothing. After
// that, parts in different ranges are independent: a Write that fails later (an LTC dies
// or does not answer in time) may have applied some ranges' parts. Scan and ScanReverse
// continue from range to range and LTC to LTC; they are read-committed across ranges (each
// LTC reply is consistent within the ranges it covered).
//
// Thread safety: thread-safe. Lifecycle: constructor cannot fail; Init() fetches the
// routing; the destructor fails outstanding calls with Aborted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/key_range.h"
#include "common/status.h"
#include "ltc/protocol/client_protocol.h"

namespace nova::client {

class LtcConnection;  // client/ltc_connection.h

// Which LTC serves which range, at which configuration epoch.
struct RoutingTable {
  uint64_t epoch = 0;
  struct Route {
    ltc::RangeInfo range;
    std::string ltc_address;
  };
  std::vector<Route> routes;  // ascending by range start, disjoint
  // The route holding `key`, or null.
  const Route* Find(std::string_view key) const;
  // The route holding the keys just below `key` (ltc::RangeInfo::HoldsKeysBelow: the one
  // ending at or after `key` and starting before it; the last range for ""), or null.
  const Route* FindBelow(std::string_view key) const;
};

// Where routing comes from. Fetch() may block (network).
class RoutingSource {
 public:
  virtual ~RoutingSource() = default;
  // The current table; an error only if nothing at all can be learnt.
  virtual Result<RoutingTable> Fetch() = 0;
};

// ClientOptions::zk_open_timeout's default: a reachable ZooKeeper gives a session in
// milliseconds; an application should learn within 2 s that it named an unreachable one.
inline constexpr std::chrono::milliseconds kDefaultZkOpenTimeout{2000};

struct ClientOptions {
  // Static mode: LTC addresses ("host:port"); each is asked to Describe its ranges.
  std::vector<std::string> ltcs;
  // Alternatively a routing source (e.g. the ZooKeeper watcher); overrides `ltcs`.
  // Must outlive the client.
  RoutingSource* routing_source = nullptr;
  int connections_per_ltc = 2;
  // The blocking calls (Get, Put, Delete, a Write of one range, Scan) go over direct
  // connections, one per calling thread at a time, whose answer the caller reads itself
  // (LtcConnection::ConnectDirect: one wake-up fewer per call); false: over the pipelined
  // connections above, as the *Async calls always do.
  bool direct_calls = true;
  // At most this many direct connections to one LTC (the LTC's --ltc_max_connections
  // counts them): further blocking calls use the pipelined connections.
  int max_direct_per_ltc = 64;
  // A blocking call on a direct connection polls for its answer this long before sleeping
  // (common/adaptive_spin.h: only while that pays); zero: it sleeps at once.
  std::chrono::microseconds spin{50};
  // Deadline of each operation, retries included.
  std::chrono::milliseconds timeout{10000};
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds initial_backoff{5};
  std::chrono::milliseconds max_backoff{500};
  // Largest response accepted: a bound, never preallocated. At least the LTCs' largest
  // value plus key plus framing (a Get of a 64 MiB value), and a 4 MiB Scan page.
  uint64_t max_response_bytes = 256ull << 20;
  // Deadline of CompactRange, retries included. LevelDB's CompactRange has none; this one
  // only bounds an LTC that stops answering (a dead one fails the call at once, which is
  // then retried at the range's next owner). Each LTC compacts one request at a time (its
  // --ltc_compact_threads), at roughly a StoC's write bandwidth: a large key span on a
  // busy LTC can take minutes, hence an hour.
  std::chrono::milliseconds compact_range_timeout{std::chrono::hours(1)};
  // ZooKeeper mode only (ConnectToCluster and OpenDB, cluster_uri.h; NovaClient itself does
  // not use it): how long to wait for a ZooKeeper session before failing as "cannot reach
  // ZooKeeper". Once a session exists ZooKeeper is reachable, and its answer on whether the
  // cluster exists is waited for up to `timeout`.
  std::chrono::milliseconds zk_open_timeout = kDefaultZkOpenTimeout;
  // The client secret proven to every LTC on connect (their --ltc_client_secret_file;
  // ltc/protocol/client_auth.h); tools read it from --client_secret_file. Empty: none, for
  // LTCs that do not require one (one that does refuses with PermissionDenied naming the
  // flag, which is not retried). A secret given to an LTC that requires none is harmless.
  std::string client_secret;
  // ZooKeeper mode only (ConnectToCluster, as zk_open_timeout): the digest credential
  // "user:password" of the cluster's ZooKeeper nodes (--zk_auth_file). A client only reads
  // them, which needs none (docs/security.md); empty: none.
  std::string zk_auth;
};

class NovaClient {
 public:
  explicit NovaClient(ClientOptions options);
  ~NovaClient();
  NovaClient(const NovaClient&) = delete;
  NovaClient& operator=(const NovaClient&) = delete;

  // Fetches the routing table. InvalidArgument without LTCs or a source; the source's
  // error (e.g. NetworkError when no LTC answers).
  Status Init();
  // Replaces the routing table if `t` is newer (a config watcher calls this).
  void SetRouting(RoutingTable t);
  RoutingTable routing() const;

  // Blocking calls. Get: the value, NotFound, or the error. A key or value over its LTC's
  // limits is InvalidArgument naming the flag, before anything is sent.
  Result<std::string> Get(const std::string& key);
  Status Put(const std::string& key, const std::string& value);
  Status Delete(const std::string& key);
  // Applies `batch`, in order within each range. Returns OK when every range's part was
  // applied. InvalidArgument naming the flag when a part is over its LTC's limits
  // (operations, a key, a value, the request size): then nothing was applied. Otherwise the
  // last error at the deadline; the message says whether some parts may have been applied
  // (only once a part was sent: the LTC died or timed out after receiving it).
  Status Write(const std::vector<ltc::BatchEntry>& batch);
  // The limits of the LTC serving `key`'s range, as it reported them (connecting and
  // asking it if no connection to it exists yet); the routed call's errors otherwise.
  Result<ltc::ClientLimits> LimitsFor(const std::string& key);
  // Up to `limit` pairs with key >= start, in key order, across ranges and LTCs.
  Status Scan(const std::string& start, size_t limit,
              std::vector<std::pair<std::string, std::string>>* out);
  // Up to `limit` pairs with key < before (strictly; empty `before`: from the last key), in
  // descending key order, across ranges and LTCs: one reverse Scan request per page, routed
  // to the range holding the keys just below the position (RoutingTable::FindBelow).
  // Appends to *out; errors as Scan.
  Status ScanReverse(const std::string& before, size_t limit,
                     std::vector<std::pair<std::string, std::string>>* out);
  // Live keys k with start <= k < end (end empty: no bound).
  Result<uint64_t> Count(const std::string& start, const std::string& end);
  // Every LTC's Stats text, each under a "== <address> ==" line.
  Result<std::string> Stats();

  // Pipelined calls: return at once; `done` runs exactly once.
  void GetAsync(const std::string& key, std::function<void(Result<std::string>)> done);
  void PutAsync(const std::string& key, const std::string& value,
                std::function<void(Status)> done);
  void DeleteAsync(const std::string& key, std::function<void(Status)> done);
  std::future<Result<std::string>> GetFuture(const std::string& key);
  std::future<Status> PutFuture(const std::string& key, const std::string& value);

  // Snapshots are per range (the one holding `key`) and per connection on the LTC.
  // A snapshot id is valid with GetAt until ReleaseSnapshot. Not retried across failures:
  // an LTC that restarts forgets its snapshots (NotFound).
  struct Snapshot {
    uint64_t id = 0;  // the LTC's id: unique on its connection only (ids restart with the LTC)
    std::string ltc_address;
    // The connection holding it: reads and the release go over exactly this one, and fail
    // once it is closed (never over a newer connection, where the same id may name another
    // client's snapshot after the LTC restarted).
    std::shared_ptr<LtcConnection> connection;
  };
  Result<Snapshot> GetSnapshot(const std::string& key);
  // GetSnapshot for each key, the calls sent at once (pipelined on the LTCs' connections,
  // so the whole costs about one round trip, not one per key) under one deadline. Element i
  // is key i's snapshot or its error, as GetSnapshot's; the caller releases those taken.
  std::vector<Result<Snapshot>> GetSnapshots(const std::vector<std::string>& keys);
  Result<std::string> GetAt(const Snapshot& snap, const std::string& key);
  // One Scan page at `snap`, within the snapshot's range only: up to `count` pairs with
  // key >= start (start must lie in that range, else InvalidArgument); out->next_start is
  // the range's end when the range is exhausted (out->end_of_keys if it has no end).
  Status ScanAt(const Snapshot& snap, const std::string& start, uint32_t count,
                ltc::ScanResponse* out);
  // One reverse Scan page at `snap`, within the snapshot's range only: up to `count` pairs
  // with key < before, descending (empty `before`: from the range's end; else the keys just
  // below `before` must be in the range, ltc::RangeInfo::HoldsKeysBelow, else
  // InvalidArgument). out->next_start is the range's start when the range is exhausted,
  // the smallest key returned when the page is full; out->end_of_keys when nothing is below.
  Status ScanReverseAt(const Snapshot& snap, const std::string& before, uint32_t count,
                       ltc::ScanResponse* out);
  // Blocking; the LTC's answer, or the connection's error (the snapshot is gone with it).
  Status ReleaseSnapshot(const Snapshot& snap);
  // Sends the release and returns at once, without waiting for the answer (for
  // destructors): a release that cannot be sent is moot, its connection and the snapshot
  // with it are gone.
  void ReleaseSnapshotAsync(const Snapshot& snap);

  // Administration (nova_client_admin.cc; the leveldb::DB adapter's GetApproximateSizes,
  // CompactRange and properties). A span holds the keys start <= k < end (no end: to the
  // end of the key space); one that holds no key counts 0 / does nothing.
  //
  // Approximately the bytes each span's keys take in tables and memtables, in the order of
  // `spans`: each span is split by the routing table, the parts are asked of their ranges'
  // LTCs (one request per LTC, all in parallel) and summed. Retried as other calls (parts
  // whose LTC failed are split again by the refreshed routing) until options.timeout.
  Result<std::vector<uint64_t>> ApproximateSizes(const std::vector<KeyRange>& spans);
  // Compacts the keys of `span` in every range holding some: their LTCs flush the range's
  // memtables, then compact its tables holding the span down until they lie in one level
  // (docs/protocol.md, CompactRange). All ranges in parallel (each LTC compacts one at a
  // time); returns when every one is done. Retried until options.compact_range_timeout
  // (compacting again is harmless).
  Status CompactRange(const KeyRange& span);
  // The figures of every routed range (LevelDB's properties, summed by the caller), each
  // from the LTC the routing table names for it, ascending by range start. A range whose
  // LTC did not answer is missing and its error is in `errors`; an error only when no LTC
  // answered. One attempt per LTC, each bounded by options.timeout.
  struct ClusterFigures {
    uint64_t epoch = 0;  // of the routing table used
    std::vector<ltc::RangeFigures> ranges;
    std::vector<Status> errors;
  };
  Result<ClusterFigures> RangeStats(bool with_tables);

 private:
  // For the administration calls (nova_client_admin.cc): one request to the LTC at
  // `address` on a pooled connection, without retries; `done` runs once.
  void CallLtc(const std::string& address, ltc::ClientMsg type, std::string payload,
               Deadline deadline, std::function<void(Status, std::string)> done);
  // Fetches the routing table again (after a failure), at most once per initial_backoff.
  void RefreshRouting();
  const ClientOptions& options() const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// StaticRoutingSource: Describe on every address; ranges claimed by several LTCs go to the
// one with the highest epoch. LTCs that do not answer are skipped (their ranges stay
// unrouted until they answer); the last error (e.g. NetworkError, or PermissionDenied from
// an LTC that refused the client secret) if none answers. `client_secret` as
// ClientOptions::client_secret.
class StaticRoutingSource final : public RoutingSource {
 public:
  StaticRoutingSource(std::vector<std::string> ltcs, std::chrono::milliseconds timeout,
                      std::string client_secret = "");
  Result<RoutingTable> Fetch() override;

 private:
  const std::vector<std::string> ltcs_;
  const std::chrono::milliseconds timeout_;
  const std::string client_secret_;
};

}  // namespace nova::client
