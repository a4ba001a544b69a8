#include "ltc/protocol/client_protocol.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace nova::ltc {
namespace {

// A count read from the input only bounds a loop that also stops at the end of the input;
// reserve no more than this many elements up front so a hostile count cannot allocate.
constexpr size_t kMaxReserve = 1024;

// Snapshot/keys-only flag bits of a Scan request. DO NOT CHANGE: on the wire.
constexpr uint8_t kScanKeysOnly = 1;
constexpr uint8_t kScanKnownFlags = kScanKeysOnly;
// The trailing direction byte of a reverse Scan request (absent: forward). DO NOT CHANGE:
// on the wire.
constexpr uint8_t kScanReverse = 1;

// RangeStats flag bits. DO NOT CHANGE: on the wire.
constexpr uint8_t kStatsWithTables = 1;
constexpr uint8_t kRangeKnownFlags = 1;  // RangeFigures: bit 0 open

// A span or range bound on the wire: bytes start, bytes end (empty: unbounded).
void PutSpan(wire::PayloadWriter* w, const KeyRange& k) {
  w->PutBytes(k.start);
  w->PutBytes(k.end.value_or(""));
}
void GetSpan(wire::PayloadReader* rd, KeyRange* k) {
  std::string end;
  rd->GetString("start", &k->start);
  rd->GetString("end", &end);
  k->end.reset();
  if (!end.empty()) k->end = std::move(end);
}

Status Finish(const wire::PayloadReader& r, const char* what) {
  Status s = r.Finish();
  if (!s.ok()) return s.Prepend(what);
  return s;
}

}  // namespace

const char* ClientMsgName(uint16_t type) {
  switch (static_cast<ClientMsg>(type)) {
    case ClientMsg::kDescribe: return "Describe";
    case ClientMsg::kGet: return "Get";
    case ClientMsg::kPut: return "Put";
    case ClientMsg::kDelete: return "Delete";
    case ClientMsg::kWrite: return "Write";
    case ClientMsg::kScan: return "Scan";
    case ClientMsg::kGetSnapshot: return "GetSnapshot";
    case ClientMsg::kReleaseSnapshot: return "ReleaseSnapshot";
    case ClientMsg::kStats: return "Stats";
    case ClientMsg::kApproximateSizes: return "ApproximateSizes";
    case ClientMsg::kCompactRange: return "CompactRange";
    case ClientMsg::kRangeStats: return "RangeStats";
    case ClientMsg::kDeclareSynchronous: return "DeclareSynchronous";
    case ClientMsg::kAuthChallenge: return "AuthChallenge";
    case ClientMsg::kAuthenticate: return "Authenticate";
  }
  return "unknown";
}

// Describe: u64 epoch, u32 ltc_id, varint32 n, n x (u32 id, bytes start, bytes end; an
// empty end is unbounded),
// u32 max_key, u32 max_value, u32 max_batch_ops, u64 max_request, u32 max_scan_count.
std::string EncodeDescribeResponse(const DescribeResponse& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutU32(r.ltc_id);
  w.PutVarint32(static_cast<uint32_t>(r.ranges.size()));
  for (const RangeInfo& ri : r.ranges) {
    w.PutU32(ri.id);
    w.PutBytes(ri.keys.start);
    w.PutBytes(ri.keys.end.value_or(""));  // the wire spells the unbounded end ""
  }
  w.PutU32(r.limits.max_key_bytes);
  w.PutU32(r.limits.max_value_bytes);
  w.PutU32(r.limits.max_batch_ops);
  w.PutU64(r.limits.max_request_bytes);
  w.PutU32(r.limits.max_scan_count);
  return w.Finish();
}

Status DecodeDescribeResponse(std::string_view in, DescribeResponse* r) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetU64("epoch", &r->epoch);
  rd.GetU32("ltc_id", &r->ltc_id);
  rd.GetVarint32("ranges", &n);
  r->ranges.clear();
  r->ranges.reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    RangeInfo ri;
    rd.GetU32("range_id", &ri.id);
    std::string end;
    rd.GetString("range_start", &ri.keys.start);
    rd.GetString("range_end", &end);
    if (!end.empty()) ri.keys.end = std::move(end);
    r->ranges.push_back(std::move(ri));
  }
  rd.GetU32("max_key_bytes", &r->limits.max_key_bytes);
  rd.GetU32("max_value_bytes", &r->limits.max_value_bytes);
  rd.GetU32("max_batch_ops", &r->limits.max_batch_ops);
  rd.GetU64("max_request_bytes", &r->limits.max_request_bytes);
  rd.GetU32("max_scan_count", &r->limits.max_scan_count);
  return Finish(rd, "Describe response");
}

// Get: u64 epoch, bytes key, u64 snapshot. Put: u64 epoch, bytes key, bytes value.
// Delete, GetSnapshot: u64 epoch, bytes key.
std::string EncodeKeyRequest(ClientMsg type, const KeyRequest& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutBytes(r.key);
  if (type == ClientMsg::kPut) w.PutBytes(r.value);
  if (type == ClientMsg::kGet) w.PutU64(r.snapshot);
  return w.Finish();
}

Status DecodeKeyRequest(ClientMsg type, std::string_view in, KeyRequest* r) {
  wire::PayloadReader rd(in);
  rd.GetU64("epoch", &r->epoch);
  rd.GetString("key", &r->key);
  r->value.clear();
  r->snapshot = 0;
  if (type == ClientMsg::kPut) rd.GetString("value", &r->value);
  if (type == ClientMsg::kGet) rd.GetU64("snapshot", &r->snapshot);
  return Finish(rd, ClientMsgName(static_cast<uint16_t>(type)));
}

// Write: u64 epoch, varint32 n, n x (u8 op, bytes key [, bytes value if op is put]).
std::string EncodeWriteRequest(const WriteRequest& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutVarint32(static_cast<uint32_t>(r.entries.size()));
  for (const BatchEntry& e : r.entries) {
    w.PutU8(static_cast<uint8_t>(e.op));
    w.PutBytes(e.key);
    if (e.op == BatchOp::kPut) w.PutBytes(e.value);
  }
  return w.Finish();
}

Status DecodeWriteRequest(std::string_view in, WriteRequest* r) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetU64("epoch", &r->epoch);
  rd.GetVarint32("entries", &n);
  r->entries.clear();
  r->entries.reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    BatchEntry e;
    uint8_t op = 0;
    if (!rd.GetU8("op", &op)) break;
    if (op != static_cast<uint8_t>(BatchOp::kPut) && op != static_cast<uint8_t>(BatchOp::kDelete)) {
      return Status::Corruption("Write request: entry " + std::to_string(i) +
                                " has unknown op " + std::to_string(op));
    }
    e.op = static_cast<BatchOp>(op);
    rd.GetString("key", &e.key);
    if (e.op == BatchOp::kPut) rd.GetString("value", &e.value);
    r->entries.push_back(std::move(e));
  }
  return Finish(rd, "Write request");
}

// Scan: u64 epoch, bytes start, u32 count, u64 snapshot, u8 flags [, u8 direction]. The
// direction byte is trailing (written only for a reverse scan, read only when bytes remain)
// and must then be kScanReverse.
std::string EncodeScanRequest(const ScanRequest& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutBytes(r.start);
  w.PutU32(r.count);
  w.PutU64(r.snapshot);
  w.PutU8(r.keys_only ? kScanKeysOnly : 0);
  if (r.reverse) w.PutU8(kScanReverse);
  return w.Finish();
}

Status DecodeScanRequest(std::string_view in, ScanRequest* r) {
  wire::PayloadReader rd(in);
  uint8_t flags = 0;
  uint8_t direction = 0;
  rd.GetU64("epoch", &r->epoch);
  rd.GetString("start", &r->start);
  rd.GetU32("count", &r->count);
  rd.GetU64("snapshot", &r->snapshot);
  rd.GetU8("flags", &flags);
  const bool has_direction = rd.status().ok() && rd.remaining() > 0;
  if (has_direction) rd.GetU8("direction", &direction);
  NOVA_RETURN_NOT_OK(Finish(rd, "Scan request"));
  if ((flags & ~kScanKnownFlags) != 0) {
    return Status::Corruption("Scan request: unknown flags " + std::to_string(flags));
  }
  if (has_direction && direction != kScanReverse) {
    return Status::Corruption("Scan request: unknown direction " + std::to_string(direction));
  }
  r->keys_only = (flags & kScanKeysOnly) != 0;
  r->reverse = has_direction;
  return Status::OK();
}

// Scan response: varint32 n, n x (bytes key, bytes value), u8 end_of_keys, bytes next_start.
std::string EncodeScanResponse(const ScanResponse& r) {
  wire::PayloadWriter w;
  w.PutVarint32(static_cast<uint32_t>(r.pairs.size()));
  for (const auto& [k, v] : r.pairs) {
    w.PutBytes(k);
    w.PutBytes(v);
  }
  w.PutU8(r.end_of_keys ? 1 : 0);
  w.PutBytes(r.next_start);
  return w.Finish();
}

Status DecodeScanResponse(std::string_view in, ScanResponse* r) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetVarint32("pairs", &n);
  r->pairs.clear();
  r->pairs.reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    std::string k, v;
    rd.GetString("key", &k);
    rd.GetString("value", &v);
    r->pairs.emplace_back(std::move(k), std::move(v));
  }
  uint8_t eok = 0;
  rd.GetU8("end_of_keys", &eok);
  rd.GetString("next_start", &r->next_start);
  NOVA_RETURN_NOT_OK(Finish(rd, "Scan response"));
  if (eok > 1) return Status::Corruption("Scan response: end_of_keys is not 0 or 1");
  r->end_of_keys = eok == 1;
  return Status::OK();
}

std::string EncodeU64(uint64_t v) {
  wire::PayloadWriter w;
  w.PutU64(v);
  return w.Finish();
}

Status DecodeU64(std::string_view in, uint64_t* v) {
  wire::PayloadReader rd(in);
  rd.GetU64("value", v);
  return rd.Finish();
}

std::string EncodeBytes(std::string_view v) {
  wire::PayloadWriter w;
  w.PutBytes(v);
  return w.Finish();
}

Status DecodeBytes(std::string_view in, std::string* v) {
  wire::PayloadReader rd(in);
  rd.GetString("bytes", v);
  return rd.Finish();
}

// ApproximateSizes: u64 epoch, vN spans x (bytes start, bytes end).
std::string EncodeApproximateSizesRequest(const ApproximateSizesRequest& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutVarint32(static_cast<uint32_t>(r.spans.size()));
  for (const KeyRange& k : r.spans) PutSpan(&w, k);
  return w.Finish();
}

Status DecodeApproximateSizesRequest(std::string_view in, ApproximateSizesRequest* r) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetU64("epoch", &r->epoch);
  rd.GetVarint32("spans", &n);
  r->spans.clear();
  r->spans.reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    KeyRange k;
    GetSpan(&rd, &k);
    r->spans.push_back(std::move(k));
  }
  return Finish(rd, "ApproximateSizes request");
}

std::string EncodeU64List(const std::vector<uint64_t>& v) {
  wire::PayloadWriter w;
  w.PutVarint32(static_cast<uint32_t>(v.size()));
  for (uint64_t x : v) w.PutU64(x);
  return w.Finish();
}

Status DecodeU64List(std::string_view in, std::vector<uint64_t>* v) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetVarint32("count", &n);
  v->clear();
  v->reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    uint64_t x = 0;
    if (rd.GetU64("value", &x)) v->push_back(x);
  }
  return Finish(rd, "u64 list");
}

// CompactRange: u64 epoch, bytes start, bytes end.
std::string EncodeCompactRangeRequest(const CompactRangeRequest& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  PutSpan(&w, r.span);
  return w.Finish();
}

Status DecodeCompactRangeRequest(std::string_view in, CompactRangeRequest* r) {
  wire::PayloadReader rd(in);
  rd.GetU64("epoch", &r->epoch);
  GetSpan(&rd, &r->span);
  return Finish(rd, "CompactRange request");
}

// RangeStats request: u8 flags (bit 0: with tables).
std::string EncodeRangeStatsRequest(const RangeStatsRequest& r) {
  wire::PayloadWriter w;
  w.PutU8(r.with_tables ? kStatsWithTables : 0);
  return w.Finish();
}

Status DecodeRangeStatsRequest(std::string_view in, RangeStatsRequest* r) {
  wire::PayloadReader rd(in);
  uint8_t flags = 0;
  rd.GetU8("flags", &flags);
  NOVA_RETURN_NOT_OK(Finish(rd, "RangeStats request"));
  if ((flags & ~kStatsWithTables) != 0) {
    return Status::Corruption("RangeStats request: unknown flags " + std::to_string(flags));
  }
  r->with_tables = (flags & kStatsWithTables) != 0;
  return Status::OK();
}

// RangeStats response: u64 epoch, u32 ltc_id, vN ranges x (u32 id, bytes start, bytes end,
// u8 flags (bit 0 open), u64 memtable_bytes, u32 memtables, u64 block_cache_bytes,
// vN levels x (u64 files, u64 bytes, u64 compaction_micros, u64 read_bytes, u64 write_bytes),
// vN tables x (u32 level, u64 number, u64 bytes, bytes smallest, bytes largest)).
std::string EncodeRangeStatsResponse(const RangeStatsResponse& r) {
  wire::PayloadWriter w;
  w.PutU64(r.epoch);
  w.PutU32(r.ltc_id);
  w.PutVarint32(static_cast<uint32_t>(r.ranges.size()));
  for (const RangeFigures& f : r.ranges) {
    w.PutU32(f.range.id);
    PutSpan(&w, f.range.keys);
    w.PutU8(f.open ? 1 : 0);
    w.PutU64(f.memtable_bytes);
    w.PutU32(f.memtables);
    w.PutU64(f.block_cache_bytes);
    w.PutVarint32(static_cast<uint32_t>(f.levels.size()));
    for (const LevelFigures& l : f.levels) {
      w.PutU64(l.files);
      w.PutU64(l.bytes);
      w.PutU64(l.compaction_micros);
      w.PutU64(l.read_bytes);
      w.PutU64(l.write_bytes);
    }
    w.PutVarint32(static_cast<uint32_t>(f.tables.size()));
    for (const TableFigures& t : f.tables) {
      w.PutU32(t.level);
      w.PutU64(t.number);
      w.PutU64(t.bytes);
      w.PutBytes(t.smallest);
      w.PutBytes(t.largest);
    }
  }
  return w.Finish();
}

Status DecodeRangeStatsResponse(std::string_view in, RangeStatsResponse* r) {
  wire::PayloadReader rd(in);
  uint32_t n = 0;
  rd.GetU64("epoch", &r->epoch);
  rd.GetU32("ltc_id", &r->ltc_id);
  rd.GetVarint32("ranges", &n);
  r->ranges.clear();
  r->ranges.reserve(std::min<size_t>(n, kMaxReserve));
  for (uint32_t i = 0; i < n && rd.status().ok(); ++i) {
    RangeFigures f;
    uint8_t flags = 0;
    uint32_t levels = 0, tables = 0;
    rd.GetU32("range_id", &f.range.id);
    GetSpan(&rd, &f.range.keys);
    rd.GetU8("flags", &flags);
    if (rd.status().ok() && (flags & ~kRangeKnownFlags) != 0) {
      return Status::Corruption("RangeStats response: unknown range flags " +
                                std::to_string(flags));
    }
    f.open = (flags & 1) != 0;
    rd.GetU64("memtable_bytes", &f.memtable_bytes);
    rd.GetU32("memtables", &f.memtables);
    rd.GetU64("block_cache_bytes", &f.block_cache_bytes);
    rd.GetVarint32("levels", &levels);
    for (uint32_t l = 0; l < levels && rd.status().ok(); ++l) {
      LevelFigures lf;
      rd.GetU64("files", &lf.files);
      rd.GetU64("bytes", &lf.bytes);
      rd.GetU64("compaction_micros", &lf.compaction_micros);
      rd.GetU64("read_bytes", &lf.read_bytes);
      rd.GetU64("write_bytes", &lf.write_bytes);
      f.levels.push_back(lf);
    }
    rd.GetVarint32("tables", &tables);
    for (uint32_t t = 0; t < tables && rd.status().ok(); ++t) {
      TableFigures tf;
      rd.GetU32("level", &tf.level);
      rd.GetU64("number", &tf.number);
      rd.GetU64("bytes", &tf.bytes);
      rd.GetString("smallest", &tf.smallest);
      rd.GetString("largest", &tf.largest);
      f.tables.push_back(std::move(tf));
    }
    r->ranges.push_back(std::move(f));
  }
  return Finish(rd, "RangeStats response");
}

Status FormatWrongRange(uint64_t epoch, std::string_view why) {
  return Status::WrongRange("epoch=" + std::to_string(epoch) + ": " + std::string(why));
}

uint64_t ParseWrongRangeEpoch(const Status& s) {
  if (!s.IsWrongRange()) return 0;
  std::string_view m = s.message();
  constexpr std::string_view kPrefix = "epoch=";
  if (m.substr(0, kPrefix.size()) != kPrefix) return 0;
  m.remove_prefix(kPrefix.size());
  uint64_t epoch = 0;
  auto [ptr, ec] = std::from_chars(m.data(), m.data() + m.size(), epoch);
  (void)ptr;
  return ec == std::errc() ? epoch : 0;
}

std::string LevelStatsTable(const std::vector<LevelFigures>& levels) {
  constexpr double kMiB = 1048576.0;
  // Each value right-aligned under its column's header.
  std::string out =
      "                               Compactions\n"
      "Level  Files Size(MB) Time(sec) Read(MB) Write(MB)\n"
      "--------------------------------------------------\n";
  for (size_t l = 0; l < levels.size(); ++l) {
    const LevelFigures& f = levels[l];
    if (f.files == 0 && f.compaction_micros == 0) continue;
    char row[128];
    std::snprintf(row, sizeof(row), "%5zu%7llu%9.0f%10.0f%9.0f%10.0f\n", l,
                  static_cast<unsigned long long>(f.files), f.bytes / kMiB,
                  f.compaction_micros / 1e6, f.read_bytes / kMiB, f.write_bytes / kMiB);
    out += row;
  }
  return out;
}

}  // namespace nova::ltc
