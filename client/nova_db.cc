#include "client/nova_db.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "client/cluster_iterator.h"
#include "client/cluster_uri.h"
#include "client/nova_db_admin.h"
#include "common/hex.h"
#include "common/mutex.h"
#include "leveldb/comparator.h"
#include "leveldb/write_batch.h"

namespace nova::client {
namespace {

// GetSnapshot re-takes the per-range snapshots when the routing changed while it took
// them (a range may have moved or split); after this many tries it gives up and the
// snapshot is unusable (reads at it fail).
constexpr int kSnapshotAttempts = 3;

// The LTC's answer to a Get/Scan at a snapshot id it does not know (released, or lost
// with its connection). Distinguished from a missing key, also NotFound, by its text.
constexpr std::string_view kUnknownSnapshotPrefix = "no snapshot ";

std::string Printable(std::string_view key) { return EscapeBytes(key); }

// One range's part of a cluster snapshot.
struct SnapshotPart {
  ltc::RangeInfo range;
  NovaClient::Snapshot snap;
};

// The part of `parts` (ascending by range start, disjoint) whose range holds `key`, or
// null (no view of that range).
const SnapshotPart* FindPart(const std::vector<SnapshotPart>& parts, std::string_view key) {
  auto it = std::upper_bound(
      parts.begin(), parts.end(), key,
      [](std::string_view k, const SnapshotPart& p) { return k < p.range.keys.start; });
  if (it == parts.begin()) return nullptr;
  --it;
  return it->range.Contains(key) ? &*it : nullptr;
}

// The part whose range holds the keys just below `key` (RangeInfo::HoldsKeysBelow; the
// last range for ""), or null.
const SnapshotPart* FindPartBelow(const std::vector<SnapshotPart>& parts, std::string_view key) {
  auto it = key.empty() ? parts.end()
                        : std::lower_bound(parts.begin(), parts.end(), key,
                                           [](const SnapshotPart& p, std::string_view k) {
                                             return p.range.keys.start < k;
                                           });
  if (it == parts.begin()) return nullptr;
  --it;
  return it->range.HoldsKeysBelow(key) ? &*it : nullptr;
}

// A snapshot of the cluster: one LTC snapshot per range (see nova_db.h for what that
// guarantees). Immutable after GetSnapshot returns it, so readers need no lock.
class NovaSnapshot final : public leveldb::Snapshot {
 public:
  using Part = SnapshotPart;
  std::vector<Part> parts;  // ascending by range start, disjoint
  Status status;            // not OK: the snapshot could not be taken; reads fail with it

  const Part* Find(std::string_view key) const { return FindPart(parts, key); }
};

// Unavailable naming the first keys no route of `t` covers (a snapshot would have no view
// of them); OK when the routes cover the whole key space.
Status CheckCoversAllKeys(const RoutingTable& t) {
  std::string from;  // the first key not covered yet
  for (const auto& route : t.routes) {
    const ltc::RangeInfo& r = route.range;
    if (r.keys.start != from) {
      return Status::Unavailable("no LTC is known to serve keys ['" + Printable(from) + "', '" +
                                 Printable(r.keys.start) + "') (is an LTC down?)");
    }
    if (r.keys.unbounded()) return Status::OK();
    from = *r.keys.end;
  }
  return Status::Unavailable("no LTC is known to serve keys from '" + Printable(from) +
                             "' on (is an LTC down?)");
}

// An LTC's NotFound for an unknown snapshot id becomes an error; a missing key stays
// NotFound.
Status SnapshotReadError(const Status& s) {
  if (s.IsNotFound() && s.message().rfind(kUnknownSnapshotPrefix, 0) == 0) {
    return Status::Aborted(s.message()).Prepend("the snapshot was released or lost");
  }
  return s;
}

// Pages of a cluster snapshot: each range read at its own LTC snapshot, range after range
// (forward) or range before range (backward).
class SnapshotSource final : public PageSource {
 public:
  // Reads at `parts` with `status` (not OK: every read fails with it). When `owned` (an
  // iterator's implicit snapshot), the source releases the parts when destroyed; otherwise
  // they are a copy of a leveldb::Snapshot's, which the application releases (reads fail
  // after that, never reading the latest data). `client` must outlive the source.
  SnapshotSource(NovaClient* client, std::vector<SnapshotPart> parts, Status status, bool owned)
      : client_(client), parts_(std::move(parts)), status_(std::move(status)), owned_(owned) {}

  ~SnapshotSource() override {
    if (!owned_) return;
    // Without waiting: deleting an iterator must not block on an LTC. A release that is
    // lost is moot (its connection is gone, and the snapshot with it).
    for (const SnapshotPart& p : parts_) client_->ReleaseSnapshotAsync(p.snap);
  }

  Status Forward(const std::string& start, size_t count, std::vector<KeyValue>* out,
                 bool* exhausted) override {
    NOVA_RETURN_NOT_OK(status_.Prepend("read at a snapshot that could not be taken"));
    *exhausted = false;
    std::string pos = start;
    size_t added = 0;
    while (added < count) {
      const SnapshotPart* part = FindPart(parts_, pos);
      if (part == nullptr) {
        return Status::Unavailable("the snapshot has no view of the range holding key '" +
                                   Printable(pos) + "' (its LTC was unreachable)");
      }
      ltc::ScanResponse r;
      const uint32_t n = static_cast<uint32_t>(std::min<size_t>(count - added, UINT32_MAX));
      Status s = client_->ScanAt(part->snap, pos, n, &r);
      if (!s.ok()) return SnapshotReadError(s).Prepend("scan at snapshot");
      added += r.pairs.size();
      for (KeyValue& kv : r.pairs) out->push_back(std::move(kv));
      if (r.end_of_keys) {
        *exhausted = true;
        break;
      }
      if (r.next_start <= pos && r.pairs.empty()) {
        return Status::Corruption("scan at snapshot: the LTC did not advance past '" +
                                  Printable(pos) + "'");
      }
      pos = std::move(r.next_start);
    }
    return Status::OK();
  }

  Status Backward(const std::string& before, size_t count, std::vector<KeyValue>* out,
                  bool* exhausted) override {
    NOVA_RETURN_NOT_OK(status_.Prepend("read at a snapshot that could not be taken"));
    *exhausted = false;
    std::string pos = before;  // the keys below it; "" while at the end of the key space
    size_t added = 0;
    while (added < count) {
      const SnapshotPart* part = FindPartBelow(parts_, pos);
      if (part == nullptr) {
        return Status::Unavailable("the snapshot has no view of the range holding the keys "
                                   "below '" + Printable(pos) + "' (its LTC was unreachable)");
      }
      ltc::ScanResponse r;
      const uint32_t n = static_cast<uint32_t>(std::min<size_t>(count - added, UINT32_MAX));
      Status s = client_->ScanReverseAt(part->snap, pos, n, &r);
      if (!s.ok()) return SnapshotReadError(s).Prepend("reverse scan at snapshot");
      added += r.pairs.size();
      for (KeyValue& kv : r.pairs) out->push_back(std::move(kv));
      if (r.end_of_keys) {
        *exhausted = true;
        break;
      }
      // Each reply ends strictly below where it began (at its range's start or its last key).
      if (r.next_start.empty() || (!pos.empty() && r.next_start >= pos)) {
        return Status::Corruption("reverse scan at snapshot: the LTC did not move below '" +
                                  Printable(pos) + "'");
      }
      pos = std::move(r.next_start);
    }
    return Status::OK();
  }

 private:
  NovaClient* const client_;  // must outlive this source (the DB owns it)
  const std::vector<SnapshotPart> parts_;
  const Status status_;
  const bool owned_;
};

class NovaDB final : public leveldb::DB {
 public:
  NovaDB(std::unique_ptr<ClusterConnection> conn, size_t page)
      : conn_(std::move(conn)), client_(conn_->client.get()), page_(page) {}

  ~NovaDB() override {
    // LevelDB requires snapshots to be released first; release leftovers anyway (closing
    // the connections would release them on the LTCs too).
    std::set<NovaSnapshot*> left;
    {
      MutexLock l(&mu_);
      left.swap(snapshots_);
    }
    for (NovaSnapshot* s : left) Release(s);
  }

  leveldb::Status Put(const leveldb::WriteOptions&, const leveldb::Slice& key,
                      const leveldb::Slice& value) override {
    return ToLevelDbStatus(client_->Put(key.ToString(), value.ToString()));
  }

  leveldb::Status Delete(const leveldb::WriteOptions&, const leveldb::Slice& key) override {
    return ToLevelDbStatus(client_->Delete(key.ToString()));
  }

  leveldb::Status Write(const leveldb::WriteOptions&, leveldb::WriteBatch* updates) override {
    if (updates == nullptr) return leveldb::Status::OK();
    struct Collect final : leveldb::WriteBatch::Handler {
      std::vector<ltc::BatchEntry> entries;
      void Put(const leveldb::Slice& k, const leveldb::Slice& v) override {
        entries.push_back({ltc::BatchOp::kPut, k.ToString(), v.ToString()});
      }
      void Delete(const leveldb::Slice& k) override {
        entries.push_back({ltc::BatchOp::kDelete, k.ToString(), ""});
      }
    } collect;
    leveldb::Status s = updates->Iterate(&collect);
    if (!s.ok()) return s;
    return ToLevelDbStatus(client_->Write(collect.entries));
  }

  leveldb::Status Get(const leveldb::ReadOptions& options, const leveldb::Slice& key,
                      std::string* value) override {
    const std::string k = key.ToString();
    if (options.snapshot == nullptr) {
      Result<std::string> r = client_->Get(k);
      if (!r.ok()) return ToLevelDbStatus(r.status());
      *value = std::move(r.value());
      return leveldb::Status::OK();
    }
    const auto* snap = static_cast<const NovaSnapshot*>(options.snapshot);
    if (!snap->status.ok()) {
      return ToLevelDbStatus(Status::Aborted(snap->status.ToString())
                                 .Prepend("read at a snapshot that could not be taken"));
    }
    const NovaSnapshot::Part* part = snap->Find(k);
    if (part == nullptr) {
      return ToLevelDbStatus(
          Status::Unavailable("the snapshot has no view of the range holding key '" + Printable(k) +
                              "' (its LTC was unreachable when the snapshot was taken)"));
    }
    Result<std::string> r = client_->GetAt(part->snap, k);
    if (!r.ok()) return ToLevelDbStatus(SnapshotReadError(r.status()));
    *value = std::move(r.value());
    return leveldb::Status::OK();
  }

  leveldb::Iterator* NewIterator(const leveldb::ReadOptions& options) override {
    if (options.snapshot != nullptr) {
      const auto* snap = static_cast<const NovaSnapshot*>(options.snapshot);
      return NewClusterIterator(
          std::make_unique<SnapshotSource>(client_, snap->parts, snap->status, /*owned=*/false),
          page_);
    }
    // LevelDB's iterator is an implicit snapshot: take one per range (all at once), owned
    // by the iterator. Never fall back to the latest data: without them, an error.
    NovaSnapshot snap;
    Status s = TakeWithRetries(&snap);
    if (!s.ok()) {
      ReleaseParts(&snap);
      return leveldb::NewErrorIterator(
          ToLevelDbStatus(s.Prepend("NewIterator: the ranges' snapshots could not be taken")));
    }
    return NewClusterIterator(
        std::make_unique<SnapshotSource>(client_, std::move(snap.parts), Status::OK(),
                                         /*owned=*/true),
        page_);
  }

  // Never null (LevelDB's contract; a null snapshot would mean "read the latest data"):
  // a snapshot that could not be taken holds no LTC snapshot, only the reason, and every
  // read at it fails with that reason, at once. TakeSnapshot() (nova_db.h) returns it.
  const leveldb::Snapshot* GetSnapshot() override {
    auto* snap = new NovaSnapshot;
    for (int attempt = 1;; ++attempt) {
      snap->status = Take(snap);
      if (snap->status.code() != Status::Code::kAborted || attempt == kSnapshotAttempts) break;
    }
    if (!snap->status.ok()) ReleaseParts(snap);
    MutexLock l(&mu_);
    snapshots_.insert(snap);
    return snap;
  }

  leveldb::Status TakeSnapshot(const leveldb::Snapshot** out) {
    const auto* snap = static_cast<const NovaSnapshot*>(GetSnapshot());
    if (snap->status.ok()) {
      *out = snap;
      return leveldb::Status::OK();
    }
    leveldb::Status s = ToLevelDbStatus(snap->status.Prepend("GetSnapshot"));
    ReleaseSnapshot(snap);
    *out = nullptr;
    return s;
  }

  void ReleaseSnapshot(const leveldb::Snapshot* snapshot) override {
    auto* snap = const_cast<NovaSnapshot*>(static_cast<const NovaSnapshot*>(snapshot));
    {
      MutexLock l(&mu_);
      if (snapshots_.erase(snap) == 0) return;  // not ours, or released twice
    }
    Release(snap);
  }

  bool GetProperty(const leveldb::Slice& property, std::string* value) override {
    const std::string p = property.ToString();
    if (p == "nova.stats") {
      Result<std::string> r = client_->Stats();
      if (!r.ok()) return false;
      *value = std::move(r.value());
      return true;
    }
    if (p == "nova.routing" || p == "nova.num-ranges") {
      const RoutingTable t = client_->routing();
      if (p == "nova.num-ranges") {
        *value = std::to_string(t.routes.size());
        return true;
      }
      *value = "epoch=" + std::to_string(t.epoch) + "\n";
      for (const auto& r : t.routes) {
        *value += "range " + std::to_string(r.range.id) + " ['" + Printable(r.range.keys.start) +
                  "', '" + Printable(r.range.keys.end.value_or("")) + "') -> " + r.ltc_address +
                  "\n";
      }
      return true;
    }
    return GetLevelDbProperty(client_, p, value);
  }

  void GetApproximateSizes(const leveldb::Range* range, int n, uint64_t* sizes) override {
    client::GetApproximateSizes(client_, range, n, sizes);
  }

  void CompactRange(const leveldb::Slice* begin, const leveldb::Slice* end) override {
    client::CompactRange(client_, begin, end);
  }

 private:
  // Takes one snapshot per routed range into *snap (releasing any it held), all requests
  // sent at once (NovaClient::GetSnapshots). Aborted when the routing changed meanwhile
  // (worth another try); Unavailable when some keys have no route (an LTC unreachable when
  // the routing was read); else the failure of the first range that failed.
  Status Take(NovaSnapshot* snap) {
    ReleaseParts(snap);
    const RoutingTable t = client_->routing();
    NOVA_RETURN_NOT_OK(CheckCoversAllKeys(t));
    std::vector<std::string> starts;
    starts.reserve(t.routes.size());
    for (const auto& route : t.routes) starts.push_back(route.range.keys.start);
    std::vector<Result<NovaClient::Snapshot>> taken = client_->GetSnapshots(starts);
    Status first_failure;
    for (size_t i = 0; i < taken.size(); ++i) {
      const ltc::RangeInfo& range = t.routes[i].range;
      if (!taken[i].ok()) {
        if (first_failure.ok()) {
          first_failure =
              taken[i].status().Prepend("GetSnapshot of range " + std::to_string(range.id));
        }
        continue;
      }
      snap->parts.push_back({range, taken[i].value()});  // released by the caller
    }
    NOVA_RETURN_NOT_OK(first_failure);
    // The LTCs granted each snapshot at t.epoch (they refuse older epochs), so its range is
    // the route's, unless the client refreshed to a newer table while we were going.
    if (client_->routing().epoch != t.epoch) {
      return Status::Aborted("the routing changed while taking the snapshot");
    }
    return Status::OK();
  }

  // Take, retried while the routing changes under it (up to kSnapshotAttempts).
  Status TakeWithRetries(NovaSnapshot* snap) {
    for (int attempt = 1;; ++attempt) {
      Status s = Take(snap);
      if (s.code() != Status::Code::kAborted || attempt == kSnapshotAttempts) return s;
    }
  }

  void ReleaseParts(NovaSnapshot* snap) {
    // Best effort, without waiting: an LTC that cannot be reached has lost the snapshot
    // with its connection.
    for (const auto& p : snap->parts) client_->ReleaseSnapshotAsync(p.snap);
    snap->parts.clear();
  }

  void Release(NovaSnapshot* snap) {
    ReleaseParts(snap);
    delete snap;
  }

  // Constant after construction.
  const std::unique_ptr<ClusterConnection> conn_;
  NovaClient* const client_;  // conn_->client
  const size_t page_;

  Mutex mu_;
  std::set<NovaSnapshot*> snapshots_ GUARDED_BY(mu_);  // live snapshots, owned
};

}  // namespace

leveldb::Status TakeSnapshot(leveldb::DB* db, const leveldb::Snapshot** snapshot) {
  return static_cast<NovaDB*>(db)->TakeSnapshot(snapshot);
}

leveldb::Status OpenDB(const leveldb::Options& options, const std::string& uri,
                       leveldb::DB** dbptr) {
  return OpenDB(options, uri, NovaDBOptions(), dbptr);
}

leveldb::Status OpenDB(const leveldb::Options& options, const std::string& uri,
                       const NovaDBOptions& nova_options, leveldb::DB** dbptr) {
  *dbptr = nullptr;
  if (options.comparator != nullptr && options.comparator != leveldb::BytewiseComparator()) {
    return leveldb::Status::InvalidArgument(
        "a Nova-LSM cluster orders keys bytewise: only leveldb::BytewiseComparator() works");
  }
  if (options.error_if_exists) {
    return leveldb::Status::InvalidArgument(uri,
                                            "error_if_exists: a Nova-LSM cluster always exists");
  }
  const size_t page = std::max<size_t>(1, nova_options.iterator_page_pairs);
  if (uri.empty() && nova_options.client.routing_source != nullptr) {
    // The caller owns the routing source; the connection holds only the client.
    auto conn = std::make_unique<ClusterConnection>();
    conn->client = std::make_unique<NovaClient>(nova_options.client);
    Status s = conn->client->Init();
    if (!s.ok()) return ToLevelDbStatus(s.Prepend("connecting through the routing source"));
    *dbptr = new NovaDB(std::move(conn), page);
    return leveldb::Status::OK();
  }
  Result<ClusterLocator> where = ParseClusterUri(uri);
  if (!where.ok()) return ToLevelDbStatus(where.status());
  auto conn = ConnectToCluster(where.value(), nova_options.client);
  if (!conn.ok()) return ToLevelDbStatus(conn.status());
  *dbptr = new NovaDB(std::move(conn.value()), page);
  return leveldb::Status::OK();
}

}  // namespace nova::client
