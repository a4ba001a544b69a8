// The client <-> LTC protocol (docs/protocol.md): message types, request and response
// payloads, and their codecs.
//
// Framing is common/wire/message.h over a plain TCP byte stream (no exchange transport: a
// client needs no cluster secret). Each message is one wire message (24-byte header with
// type, request id and crc, then the payload). Requests are pipelined: a client may send
// many before reading, and the LTC answers each one, in any order, echoing its request id.
// A failed request is answered with the wire codec's error response (one encoded Status).
//
// Every request that touches data carries the configuration epoch the client routed it
// with; 0 means "do not check the epoch" (tools that only describe). An LTC answers a
// request whose key it does not own, or whose epoch is older than its own, with
// WrongRange; the message starts with "epoch=<N>" (the LTC's epoch, see
// FormatWrongRange / ParseWrongRangeEpoch) so the client knows how far behind it is.
//
// Field order below is the schema (DO NOT CHANGE: on the wire). Decoders never trust a
// length from the input: malformed payloads yield Corruption, never a crash.
//
// Thread safety: the functions are pure; the structs are plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/key_range.h"
#include "common/status.h"
#include "common/wire/message.h"

namespace nova::ltc {

// Client message types: the first 0x40 types of the LTC range (wire::kLtcTypes); the rest
// of the range is left for LTC <-> LTC messages (migration). DO NOT CHANGE: on the wire.
enum class ClientMsg : uint16_t {
  kDescribe = 0x0301,         // -> epoch, ltc id, owned ranges, limits
  kGet = 0x0302,              // key [, snapshot] -> value
  kPut = 0x0303,              // key, value
  kDelete = 0x0304,           // key
  kWrite = 0x0305,            // batch of puts/deletes within one range, atomic
  kScan = 0x0306,             // start, count -> pairs, where to continue
  kGetSnapshot = 0x0307,      // key (names the range) -> snapshot id
  kReleaseSnapshot = 0x0308,  // snapshot id
  kStats = 0x0309,            // -> human-readable text per range
  kApproximateSizes = 0x030A,  // spans within owned ranges -> approximate bytes of each
  kCompactRange = 0x030B,      // span within one owned range: flush, compact; when done
  kRangeStats = 0x030C,        // -> per owned range: levels, memtables [, tables]
  // A connection's own settings, answered by the connection listener itself, never by a
  // request handler: the client sends one request at a time on this connection and waits
  // for its answer (a direct connection), so the LTC may serve each on the connection's
  // reader thread. (empty) -> (empty). An older LTC answers with an error, harmlessly.
  kDeclareSynchronous = 0x033D,
  // The client authentication handshake (client_auth.h), answered by the connection
  // listener itself, never by a request handler. Taken from the top of the client types,
  // so that data requests keep growing from the bottom.
  kAuthChallenge = 0x033E,  // -> whether the LTC requires a client secret, its nonce
  kAuthenticate = 0x033F,   // HMAC of the nonce -> OK, or a connection-level error
};
// The data requests (DecodeClientRequest): the handshake's types are not among them.
constexpr wire::TypeRange kClientTypes{0x0301, 0x030C};
const char* ClientMsgName(uint16_t type);

// One owned range: its id and its keys.
struct RangeInfo {
  uint32_t id = 0;
  KeyRange keys;
  bool Contains(std::string_view key) const { return keys.Contains(key); }
  // True if the keys just below `key` are this range's: start < key <= end; for the empty
  // key (a reverse scan "from the end"), if the range has no end. The range a reverse Scan
  // from `key` reads first (see ScanRequest).
  bool HoldsKeysBelow(std::string_view key) const {
    if (key.empty()) return keys.unbounded();
    return std::string_view(keys.start) < key &&
           (keys.unbounded() || key <= std::string_view(*keys.end));
  }
  bool operator==(const RangeInfo&) const = default;
};

// What an LTC enforces (its --ltc_max_* flags), reported by Describe so clients can check
// before sending.
struct ClientLimits {
  uint32_t max_key_bytes = 0;
  uint32_t max_value_bytes = 0;
  uint32_t max_batch_ops = 0;
  uint64_t max_request_bytes = 0;
  uint32_t max_scan_count = 0;
};

struct DescribeResponse {
  uint64_t epoch = 0;
  uint32_t ltc_id = 0;
  std::vector<RangeInfo> ranges;  // ascending by start
  ClientLimits limits;
};

// Get/Put/Delete. `snapshot` (Get only) is 0 for the latest data.
struct KeyRequest {
  uint64_t epoch = 0;
  std::string key;
  std::string value;      // Put only
  uint64_t snapshot = 0;  // Get only
};

enum class BatchOp : uint8_t { kPut = 1, kDelete = 2 };  // DO NOT CHANGE: on the wire
struct BatchEntry {
  BatchOp op = BatchOp::kPut;
  std::string key;
  std::string value;  // kPut only
};
struct WriteRequest {
  uint64_t epoch = 0;
  std::vector<BatchEntry> entries;
};

// Forward (the default): up to `count` pairs with key >= start, ascending, from the range
// holding `start`. Reverse: up to `count` pairs with key < start (strictly below; an empty
// start means from the end of the key space, or of the snapshot's range), descending, from
// the range holding the keys just below `start` (the range r with r.start < start <= r.end;
// the range ending at `start`, not the one beginning there). docs/protocol.md "Scan".
struct ScanRequest {
  uint64_t epoch = 0;
  std::string start;
  uint32_t count = 0;
  uint64_t snapshot = 0;   // 0: latest; else the scan stays within the snapshot's range
  bool keys_only = false;  // values are returned empty (counting)
  // A trailing field (added after the first version): encoded only when true, so a forward
  // scan's bytes are the old encoding, and an old LTC refuses a reverse scan (Corruption:
  // trailing bytes) instead of answering it forward.
  bool reverse = false;
};
struct ScanResponse {
  std::vector<std::pair<std::string, std::string>> pairs;
  // Where the scan should go on, as the next request's `start` (same direction): empty with
  // `end_of_keys` when the key space is exhausted in the scan's direction. Forward: the end
  // of the last range scanned (which another LTC may own), or just past the last key when
  // the reply filled up. Reverse: the start of the last range scanned (the keys below it
  // are in the previous range), or the last (smallest) key when the reply filled up.
  std::string next_start;
  bool end_of_keys = false;
};

struct ReleaseSnapshotRequest {
  uint64_t snapshot = 0;
};

// ApproximateSizes: each span [start, end) (no end: to the end of the key space) must lie
// within one range this LTC owns (the client splits a user range by the routing table and
// sums the parts). The response has one figure per span, in order: the bytes of the tables
// holding its keys (a table the span only partly covers counts by the offset of the span's
// bounds in its index) plus those of its memtables' entries in the span.
struct ApproximateSizesRequest {
  uint64_t epoch = 0;
  std::vector<KeyRange> spans;
};

// CompactRange: `span` must lie within one range this LTC owns. The range's memtables are
// flushed, then every table holding keys of the span is compacted down, level after level,
// until the span's data lies in one level (the deepest that held any of it, at least
// Level 1); answered when done (an empty response).
struct CompactRangeRequest {
  uint64_t epoch = 0;
  KeyRange span;
};

// RangeStats: figures of every range the LTC hosts (LevelDB's properties, aggregated by
// the client). Per level: tables and their bytes, and what flushes (into Level 0) and
// compactions (into the level) cost since the range opened: time, bytes read and written.
struct RangeStatsRequest {
  bool with_tables = false;  // also list every table (leveldb.sstables)
};
struct LevelFigures {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t compaction_micros = 0;
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  bool operator==(const LevelFigures&) const = default;
};
struct TableFigures {
  uint32_t level = 0;
  uint64_t number = 0;  // unique within its range only
  uint64_t bytes = 0;
  std::string smallest;  // internal keys (user key, then the 8-byte sequence and type tag)
  std::string largest;
  bool operator==(const TableFigures&) const = default;
};
struct RangeFigures {
  RangeInfo range;
  bool open = false;  // false: still being opened (recovering); the figures are all zero
  uint64_t memtable_bytes = 0;     // memory held by its memtables, active and immutable
  uint32_t memtables = 0;
  uint64_t block_cache_bytes = 0;  // held by its block cache
  std::vector<LevelFigures> levels;  // Level 0 first
  std::vector<TableFigures> tables;  // with_tables only: by level, then as the level orders
  bool operator==(const RangeFigures&) const = default;
};
// LevelDB's "leveldb.stats" table of `levels` (Level 0 first): a title, the column header
// (Level Files Size(MB) Time(sec) Read(MB) Write(MB)), a rule, then a row per level that
// holds tables or was written; the others are left out, as LevelDB does. The adapter's
// leveldb.stats prints it over a cluster's sums, `nova_cli stats` for each Nova range.
std::string LevelStatsTable(const std::vector<LevelFigures>& levels);

struct RangeStatsResponse {
  uint64_t epoch = 0;
  uint32_t ltc_id = 0;
  std::vector<RangeFigures> ranges;  // ascending by start
};

// Codecs. Encode* return the payload; Decode* return Corruption for malformed input.
std::string EncodeDescribeResponse(const DescribeResponse& r);
Status DecodeDescribeResponse(std::string_view in, DescribeResponse* r);
// kGet, kPut, kDelete, kGetSnapshot: `type` says which fields are present.
std::string EncodeKeyRequest(ClientMsg type, const KeyRequest& r);
Status DecodeKeyRequest(ClientMsg type, std::string_view in, KeyRequest* r);
std::string EncodeWriteRequest(const WriteRequest& r);
Status DecodeWriteRequest(std::string_view in, WriteRequest* r);
std::string EncodeScanRequest(const ScanRequest& r);
Status DecodeScanRequest(std::string_view in, ScanRequest* r);
std::string EncodeScanResponse(const ScanResponse& r);
Status DecodeScanResponse(std::string_view in, ScanResponse* r);
// kGetSnapshot's response and kReleaseSnapshot's request: one u64.
std::string EncodeU64(uint64_t v);
Status DecodeU64(std::string_view in, uint64_t* v);
// kGet's response and kStats's response: one length-prefixed byte string.
std::string EncodeBytes(std::string_view v);
Status DecodeBytes(std::string_view in, std::string* v);

std::string EncodeApproximateSizesRequest(const ApproximateSizesRequest& r);
Status DecodeApproximateSizesRequest(std::string_view in, ApproximateSizesRequest* r);
// kApproximateSizes's response: vN sizes x u64.
std::string EncodeU64List(const std::vector<uint64_t>& v);
Status DecodeU64List(std::string_view in, std::vector<uint64_t>* v);
std::string EncodeCompactRangeRequest(const CompactRangeRequest& r);
Status DecodeCompactRangeRequest(std::string_view in, CompactRangeRequest* r);
std::string EncodeRangeStatsRequest(const RangeStatsRequest& r);
Status DecodeRangeStatsRequest(std::string_view in, RangeStatsRequest* r);
std::string EncodeRangeStatsResponse(const RangeStatsResponse& r);
Status DecodeRangeStatsResponse(std::string_view in, RangeStatsResponse* r);

// WrongRange carrying the LTC's epoch: "epoch=<N>: <why>".
Status FormatWrongRange(uint64_t epoch, std::string_view why);
// The epoch of a WrongRange built by FormatWrongRange; 0 if absent or not WrongRange.
uint64_t ParseWrongRangeEpoch(const Status& s);

}  // namespace nova::ltc
