#include "client/nova_db.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "client/cluster_iterator.h"
#include "client/cluster_uri.h"
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

// A snapshot of the cluster: one LTC snapshot per range (see nova_db.h for what that
// guarantees). Immutable after GetSnapshot returns it, so readers need no lock.
class NovaSnapshot final : public leveldb::Snapshot {
 public:
  struct Part {
    ltc::RangeInfo range;
    NovaClient::Snapshot snap;
  };
  std::vector<Part> parts;  // ascending by range start, disjoint
  Status status;            // not OK: the snapshot could not be taken; reads fail with it

  // The part whose range holds `key`, or null (no view of that range).
  const Part* Find(std::string_view key) const {
    auto it =
        std::upper_bound(parts.begin(), parts.end(), key,
                         [](std::string_view k, const Part& p) { return k < p.range.keys.start; });
    if (it == parts.begin()) return nullptr;
    --it;
    return it->range.Contains(key) ? &*it : nullptr;
  }
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

// Latest data: the client's cross-range Scan.
class LatestSource final : public PageSource {
 public:
  explicit LatestSource(NovaClient* client) : client_(client) {}

  Status Forward(const std::string& start, size_t count, std::vector<KeyValue>* out,
                 bool* exhausted) override {
    const size_t before = out->size();
    NOVA_RETURN_NOT_OK(client_->Scan(start, count, out));
    // Scan stops short of `count` only at the end of the key space.
    *exhausted = out->size() - before < count;
    return Status::OK();
  }

  std::vector<std::string> RangeStarts() override {
    std::vector<std::string> starts{""};
    for (const auto& r : client_->routing().routes) {
      if (!r.range.keys.start.empty()) starts.push_back(r.range.keys.start);
    }
    return starts;
  }

 private:
  NovaClient* const client_;  // must outlive this source (the DB owns it)
};

// A snapshot: each range read at its own LTC snapshot, range after range.
class SnapshotSource final : public PageSource {
 public:
  SnapshotSource(NovaClient* client, const NovaSnapshot& snap)
      : client_(client), parts_(snap.parts), status_(snap.status) {}

  Status Forward(const std::string& start, size_t count, std::vector<KeyValue>* out,
                 bool* exhausted) override {
    NOVA_RETURN_NOT_OK(status_.Prepend("read at a snapshot that could not be taken"));
    *exhausted = false;
    std::string pos = start;
    size_t added = 0;
    while (added < count) {
      const NovaSnapshot::Part* part = Find(pos);
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

  std::vector<std::string> RangeStarts() override {
    std::vector<std::string> starts{""};
    for (const auto& p : parts_) {
      if (!p.range.keys.start.empty()) starts.push_back(p.range.keys.start);
    }
    return starts;
  }

 private:
  const NovaSnapshot::Part* Find(std::string_view key) const {
    for (const auto& p : parts_) {
      if (p.range.Contains(key)) return &p;
    }
    return nullptr;
  }

  NovaClient* const client_;  // must outlive this source (the DB owns it)
  // Copies: the iterator keeps working until the snapshot is released, and fails (never
  // reads the latest data) after.
  const std::vector<NovaSnapshot::Part> parts_;
  const Status status_;
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
    std::unique_ptr<PageSource> source;
    if (options.snapshot == nullptr) {
      source = std::make_unique<LatestSource>(client_);
    } else {
      source = std::make_unique<SnapshotSource>(
          client_, *static_cast<const NovaSnapshot*>(options.snapshot));
    }
    return NewClusterIterator(std::move(source), page_);
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
    if (p == "nova.stats" || p == "leveldb.stats") {
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
    return false;
  }

  void GetApproximateSizes(const leveldb::Range*, int n, uint64_t* sizes) override {
    std::fill(sizes, sizes + std::max(n, 0), 0);
  }

  void CompactRange(const leveldb::Slice*, const leveldb::Slice*) override {}

 private:
  // Takes one snapshot per routed range into *snap (releasing any it held). Aborted when
  // the routing changed meanwhile (worth another try); Unavailable when some keys have no
  // route (an LTC unreachable when the routing was read); else the first failure.
  Status Take(NovaSnapshot* snap) {
    ReleaseParts(snap);
    const RoutingTable t = client_->routing();
    NOVA_RETURN_NOT_OK(CheckCoversAllKeys(t));
    for (const auto& route : t.routes) {
      Result<NovaClient::Snapshot> s = client_->GetSnapshot(route.range.keys.start);
      if (!s.ok()) {
        return s.status().Prepend("GetSnapshot of range " + std::to_string(route.range.id));
      }
      snap->parts.push_back({route.range, s.value()});
    }
    // The LTCs granted each snapshot at t.epoch (they refuse older epochs), so its range is
    // the route's, unless the client refreshed to a newer table while we were going.
    if (client_->routing().epoch != t.epoch) {
      return Status::Aborted("the routing changed while taking the snapshot");
    }
    return Status::OK();
  }

  void ReleaseParts(NovaSnapshot* snap) {
    // Best effort: an LTC that cannot be reached has lost the snapshot with its connection.
    for (const auto& p : snap->parts) (void)client_->ReleaseSnapshot(p.snap);
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
