// LtcServer's request handlers: routing by key and epoch, and each request type.
#include <memory>
#include <sstream>

#include "ltc/server/ltc_server.h"

#include "common/hex.h"

namespace nova::ltc {

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
  // The ranges to scan, in order: the snapshot's range only, or the owned ranges from the
  // one holding `start` for as long as they are contiguous.
  std::shared_ptr<RangeBackend> backend;
  RangeInfo info;
  RangeBackend::Snapshot snap = nullptr;
  if (q.snapshot != 0) {
    ClientConn::Snap s;
    NOVA_RETURN_NOT_OK(conn->FindSnapshot(q.snapshot, &s));
    backend = s.backend.lock();
    info = std::move(s.info);
    snap = s.handle;
    if (backend == nullptr) {
      return FormatWrongRange(t.epoch, "the snapshot's range has left this LTC");
    }
    if (!info.Contains(q.start)) {
      return Status::InvalidArgument("scan start is outside the snapshot's range");
    }
  } else {
    auto h = Route(t, q.epoch, q.start);
    if (!h.ok()) return h.status();
    auto b = ranges_.BackendOf(*h.value());
    if (!b.ok()) return b.status();
    backend = b.value();
    info = h.value()->info;
  }
  ScanResponse resp;
  uint64_t bytes = 0;
  std::string start = q.start;
  for (;;) {
    std::unique_ptr<leveldb::Iterator> it(backend->NewIterator(snap));
    bool full = false;
    for (it->Seek(start); it->Valid(); it->Next()) {
      const leveldb::Slice k = it->key();
      if (!info.keys.unbounded() && k.compare(*info.keys.end) >= 0) break;
      const leveldb::Slice v = q.keys_only ? leveldb::Slice() : it->value();
      resp.pairs.emplace_back(k.ToString(), v.ToString());
      bytes += k.size() + v.size();
      if (resp.pairs.size() >= q.count || bytes >= options_.max_scan_reply_bytes) {
        full = true;
        break;
      }
    }
    NOVA_RETURN_NOT_OK(Status(it->status().ok() ? Status::OK()
                                                : Status::IOError(it->status().ToString())));
    if (full) {
      // Continue just past the last key: the smallest key greater than it.
      resp.next_start = resp.pairs.back().first + '\0';
      break;
    }
    if (info.keys.unbounded()) {
      resp.end_of_keys = true;
      break;
    }
    resp.next_start = *info.keys.end;
    if (q.snapshot != 0) break;
    // Go on into the next range if this LTC owns it too.
    const HostedRange* next = t.Find(*info.keys.end);
    if (next == nullptr || next->info.keys.start != *info.keys.end) break;
    auto b = next->slot->TryGet();
    if (b == nullptr) break;  // still recovering: the client continues there later
    backend = b;
    info = next->info;
    start = info.keys.start;
  }
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
