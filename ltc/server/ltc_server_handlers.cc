// LtcServer's request handlers: routing by key and epoch, and each request type.
#include <algorithm>
#include <memory>
#include <sstream>

#include "ltc/server/ltc_server.h"

#include "common/hex.h"

namespace nova::ltc {
namespace {

// Where a Scan reads: one range's backend, its bounds, and the snapshot (null: latest).
struct ScanCursor {
  std::shared_ptr<RangeBackend> backend;
  RangeInfo info;
  RangeBackend::Snapshot snap = nullptr;
};

struct ScanLimits {
  uint32_t count = 0;      // pairs
  uint64_t max_bytes = 0;  // keys + values (the reply stops at the first pair reaching it)
  bool keys_only = false;
};

Status IteratorStatus(const leveldb::Iterator& it) {
  return it.status().ok() ? Status::OK() : Status::IOError(it.status().ToString());
}

// Appends the pair at `it` to *resp; true when the reply is full.
bool AddPair(const leveldb::Iterator& it, const ScanLimits& limits, uint64_t* bytes,
             ScanResponse* resp) {
  const leveldb::Slice k = it.key();
  const leveldb::Slice v = limits.keys_only ? leveldb::Slice() : it.value();
  resp->pairs.emplace_back(k.ToString(), v.ToString());
  *bytes += k.size() + v.size();
  return resp->pairs.size() >= limits.count || *bytes >= limits.max_bytes;
}

// The hosted range holding the keys just below `key` (RangeInfo::HoldsKeysBelow), or null.
const HostedRange* FindBelow(const HostedRanges& t, std::string_view key) {
  // The last range starting before `key` is the only candidate (the last range, for "").
  auto it = key.empty() ? t.ranges.end()
                        : std::lower_bound(t.ranges.begin(), t.ranges.end(), key,
                                           [](const HostedRange& h, std::string_view k) {
                                             return h.info.keys.start < k;
                                           });
  if (it == t.ranges.begin()) return nullptr;
  --it;
  return it->info.HoldsKeysBelow(key) ? &*it : nullptr;
}

// Forward: pairs with key >= start from c's range on, ascending; when `t` is set (not a
// snapshot) the scan continues into the next range while this LTC owns it and it is open.
Status ScanForward(const HostedRanges* t, std::string start, const ScanLimits& limits,
                   ScanCursor c, ScanResponse* resp) {
  uint64_t bytes = 0;
  for (;;) {
    std::unique_ptr<leveldb::Iterator> it(c.backend->NewIterator(c.snap));
    bool full = false;
    for (it->Seek(start); it->Valid(); it->Next()) {
      if (!c.info.keys.unbounded() && it->key().compare(*c.info.keys.end) >= 0) break;
      full = AddPair(*it, limits, &bytes, resp);
      if (full) break;
    }
    NOVA_RETURN_NOT_OK(IteratorStatus(*it));
    if (full) {
      // Continue just past the last key: the smallest key greater than it.
      resp->next_start = resp->pairs.back().first + '\0';
      return Status::OK();
    }
    if (c.info.keys.unbounded()) {
      resp->end_of_keys = true;
      return Status::OK();
    }
    resp->next_start = *c.info.keys.end;
    if (t == nullptr) return Status::OK();
    const HostedRange* next = t->Find(*c.info.keys.end);
    if (next == nullptr || next->info.keys.start != *c.info.keys.end) return Status::OK();
    auto b = next->slot->TryGet();
    if (b == nullptr) return Status::OK();  // still recovering: the client continues there later
    c.backend = std::move(b);
    c.info = next->info;
    start = c.info.keys.start;
  }
}

// Reverse: pairs with key < before (empty: to the end of c's range) from c's range back,
// descending; when `t` is set the scan continues into the previous range while this LTC
// owns it and it is open.
//   1. next_start is the start of the last range scanned when that range is exhausted (the
//      keys below it are the previous range's), or the last (smallest) key returned when
//      the reply is full: the next request asks for the keys strictly below it.
//   2. The empty key is the smallest: a reply ending at it, or a range starting at "" that
//      is exhausted, ends the key space (end_of_keys).
Status ScanBackward(const HostedRanges* t, std::string before, const ScanLimits& limits,
                    ScanCursor c, ScanResponse* resp) {
  uint64_t bytes = 0;
  for (;;) {
    if (before.empty() && !c.info.keys.unbounded()) before = *c.info.keys.end;
    std::unique_ptr<leveldb::Iterator> it(c.backend->NewIterator(c.snap));
    // The last key < before: one step back from the first key >= before.
    if (before.empty()) {
      it->SeekToLast();
    } else {
      it->Seek(before);
      if (it->Valid()) {
        it->Prev();
      } else if (it->status().ok()) {
        it->SeekToLast();
      }
    }
    bool full = false;
    for (; it->Valid(); it->Prev()) {
      if (it->key().compare(c.info.keys.start) < 0) break;
      full = AddPair(*it, limits, &bytes, resp);
      if (full) break;
    }
    NOVA_RETURN_NOT_OK(IteratorStatus(*it));
    if (full) {
      resp->next_start = resp->pairs.back().first;
      resp->end_of_keys = resp->next_start.empty();
      return Status::OK();
    }
    if (c.info.keys.start.empty()) {
      resp->end_of_keys = true;
      return Status::OK();
    }
    resp->next_start = c.info.keys.start;
    if (t == nullptr) return Status::OK();
    const HostedRange* prev = FindBelow(*t, c.info.keys.start);
    if (prev == nullptr || prev->info.keys.unbounded() ||
        *prev->info.keys.end != c.info.keys.start) {
      return Status::OK();
    }
    auto b = prev->slot->TryGet();
    if (b == nullptr) return Status::OK();  // still recovering: the client continues there later
    c.backend = std::move(b);
    c.info = prev->info;
    before = *c.info.keys.end;
  }
}

}  // namespace

Result<const HostedRange*> LtcServer::Route(const HostedRanges& t, uint64_t epoch,
                                            std::string_view key) const {
  if (epoch != 0 && epoch < t.epoch) {
    return FormatWrongRange(t.epoch, "request routed with epoch " + std::to_string(epoch) +
                                         ", the LTC is at epoch " + std::to_string(t.epoch));
  }
  if (epoch > t.epoch) {
    // The client saw a configuration this LTC has not received yet: retry shortly.
    return Status::Unavailable("LTC " + std::to_string(t.ltc_id) + " is at epoch " +
                               std::to_string(t.epoch) + ", request routed with epoch " +
                               std::to_string(epoch));
  }
  const HostedRange* h = t.Find(key);
  if (h == nullptr) {
    return FormatWrongRange(t.epoch, "LTC " + std::to_string(t.ltc_id) +
                                         " does not own the range holding the key");
  }
  return h;
}

Result<std::string> LtcServer::Handle(ClientConn* conn, const ClientRequest& r) {
  std::shared_ptr<const HostedRanges> t = ranges_.Current();
  switch (r.type) {
    case ClientMsg::kDescribe: {
      DescribeResponse d;
      d.epoch = t->epoch;
      d.ltc_id = t->ltc_id;
      for (const HostedRange& h : t->ranges) d.ranges.push_back(h.info);
      d.limits = options_.limits;
      return EncodeDescribeResponse(d);
    }
    case ClientMsg::kStats: {
      std::ostringstream out;
      out << "ltc " << t->ltc_id << " epoch " << t->epoch << " ranges " << t->ranges.size()
          << "\n";
      for (const HostedRange& h : t->ranges) {
        out << "range " << h.info.id << " " << h.info.keys.ToString() << ": "
            << h.slot->StateText();
        if (out.str().back() != '\n') out << "\n";
      }
      // Then where a request's time goes (nova_cli stats prints it under the ranges).
      out << request_metrics_.BreakdownText(t->ltc_id, metrics_.served_inline->value());
      return EncodeBytes(out.str());
    }
    case ClientMsg::kPut:
    case ClientMsg::kDelete: {
      auto h = Route(*t, r.key.epoch, r.key.key);
      if (!h.ok()) return h.status();
      auto b = ranges_.BackendOf(*h.value());
      if (!b.ok()) return b.status();
      Status s = r.type == ClientMsg::kPut ? b.value()->Put(r.key.key, r.key.value)
                                           : b.value()->Delete(r.key.key);
      if (!s.ok()) return s;
      return std::string();
    }
    case ClientMsg::kGet: {
      if (r.key.snapshot != 0) return HandleSnapshotOp(conn, *t, r);
      auto h = Route(*t, r.key.epoch, r.key.key);
      if (!h.ok()) return h.status();
      auto b = ranges_.BackendOf(*h.value());
      if (!b.ok()) return b.status();
      std::string value;
      Status s = b.value()->Get(r.key.key, &value, nullptr);
      if (!s.ok()) return s;
      return EncodeBytes(value);
    }
    case ClientMsg::kWrite:
      return HandleWrite(*t, r);
    case ClientMsg::kScan:
      return HandleScan(conn, *t, r);
    case ClientMsg::kGetSnapshot:
    case ClientMsg::kReleaseSnapshot:
      return HandleSnapshotOp(conn, *t, r);
    case ClientMsg::kApproximateSizes:
      return HandleApproximateSizes(*t, r);
    case ClientMsg::kCompactRange:
      return HandleCompactRange(*t, r);
    case ClientMsg::kRangeStats:
      return HandleRangeStats(*t, r);
    case ClientMsg::kDeclareSynchronous:
    case ClientMsg::kAuthChallenge:
    case ClientMsg::kAuthenticate:
      break;  // answered by the connection listener; DecodeClientRequest refuses them
  }
  return Status::NotSupported("unknown request type");
}

Result<std::string> LtcServer::HandleWrite(const HostedRanges& t, const ClientRequest& r) {
  // A batch is atomic only within one range: every key must be in the same owned range.
  // A batch spanning ranges comes from a client with an old configuration, so WrongRange.
  auto first = Route(t, r.write.epoch, r.write.entries.front().key);
  if (!first.ok()) return first.status();
  const HostedRange* h = first.value();
  for (const BatchEntry& e : r.write.entries) {
    if (!h->info.Contains(e.key)) {
      return FormatWrongRange(t.epoch, "a batch must stay within one range; range " +
                                           std::to_string(h->info.id) +
                                           " does not hold all of its keys");
    }
  }
  auto b = ranges_.BackendOf(*h);
  if (!b.ok()) return b.status();
  NOVA_RETURN_NOT_OK(b.value()->Write(r.write.entries));
  return std::string();
}

Result<std::string> LtcServer::HandleScan(ClientConn* conn, const HostedRanges& t,
                                          const ClientRequest& r) {
  const ScanRequest& q = r.scan;
  // The first range to scan: the snapshot's range (the scan stays in it), or the owned
  // range holding `start` (forward) or the keys just below it (reverse).
  ScanCursor c;
  if (q.snapshot != 0) {
    ClientConn::Snap s;
    NOVA_RETURN_NOT_OK(conn->FindSnapshot(q.snapshot, &s));
    c.backend = s.backend.lock();
    c.info = std::move(s.info);
    c.snap = s.handle;
    if (c.backend == nullptr) {
      return FormatWrongRange(t.epoch, "the snapshot's range has left this LTC");
    }
    if (!q.reverse && !c.info.Contains(q.start)) {
      return Status::InvalidArgument("scan start is outside the snapshot's range");
    }
    if (q.reverse && !q.start.empty() && !c.info.HoldsKeysBelow(q.start)) {
      return Status::InvalidArgument(
          "reverse scan start is outside the snapshot's range (the keys just below it are "
          "not in range " + std::to_string(c.info.id) + ")");
    }
  } else {
    const HostedRange* below = q.reverse ? FindBelow(t, q.start) : nullptr;
    // Route checks the epoch; a reverse scan is routed by its first range's start, which
    // that range holds.
    auto h = Route(t, q.epoch, below != nullptr ? std::string_view(below->info.keys.start)
                                                : std::string_view(q.start));
    if (!h.ok()) return h.status();
    if (q.reverse && below == nullptr) {
      return FormatWrongRange(t.epoch, "LTC " + std::to_string(t.ltc_id) +
                                           " does not own the range holding the keys below "
                                           "the scan's start");
    }
    auto b = ranges_.BackendOf(*h.value());
    if (!b.ok()) return b.status();
    c.backend = b.value();
    c.info = h.value()->info;
  }
  ScanResponse resp;
  const ScanLimits limits{q.count, options_.max_scan_reply_bytes, q.keys_only};
  const HostedRanges* more = q.snapshot != 0 ? nullptr : &t;
  NOVA_RETURN_NOT_OK(q.reverse ? ScanBackward(more, q.start, limits, c, &resp)
                               : ScanForward(more, q.start, limits, c, &resp));
  return EncodeScanResponse(resp);
}

Result<std::string> LtcServer::HandleSnapshotOp(ClientConn* conn, const HostedRanges& t,
                                                const ClientRequest& r) {
  if (r.type == ClientMsg::kReleaseSnapshot) {
    ClientConn::Snap snap;
    NOVA_RETURN_NOT_OK(conn->TakeSnapshot(r.snapshot, &snap));
    if (auto b = snap.backend.lock()) b->ReleaseSnapshot(snap.handle);
    return std::string();
  }
  if (r.type == ClientMsg::kGetSnapshot) {
    auto h = Route(t, r.key.epoch, r.key.key);
    if (!h.ok()) return h.status();
    auto b = ranges_.BackendOf(*h.value());
    if (!b.ok()) return b.status();
    ClientConn::Snap snap{h.value()->info.id, h.value()->info, b.value(),
                          b.value()->GetSnapshot()};
    const uint64_t id = next_snapshot_id_++;
    conn->AddSnapshot(id, std::move(snap));
    return EncodeU64(id);
  }
  // A Get at a snapshot: the key must lie in the snapshot's range.
  ClientConn::Snap snap;
  NOVA_RETURN_NOT_OK(conn->FindSnapshot(r.key.snapshot, &snap));
  if (!snap.info.Contains(r.key.key)) {
    return Status::InvalidArgument("key is outside the snapshot's range " +
                                   std::to_string(snap.range_id));
  }
  std::shared_ptr<RangeBackend> backend = snap.backend.lock();
  const RangeBackend::Snapshot handle = snap.handle;
  if (backend == nullptr)
    return FormatWrongRange(t.epoch, "the snapshot's range has left this LTC");
  std::string value;
  NOVA_RETURN_NOT_OK(backend->Get(r.key.key, &value, handle));
  return EncodeBytes(value);
}

}  // namespace nova::ltc
