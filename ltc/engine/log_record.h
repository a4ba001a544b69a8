// Log records: what the LTC appends to a memtable's log file at the LogCs, and what recovery
// replays (DESIGN.md section 4, docs/durability.md).
//
//   record := masked crc32c u32 | body length u32 | body
//             (the CRC covers the length's 4 bytes and the body)
//   body   := format u8 (= 1) | entry count varint32 | entry...
//   entry  := memtable id varint64 | sequence varint64 | type u8 (0 deletion, 1 value)
//             | key (varint32 length, bytes) | value (varint32 length, bytes; empty for a
//             deletion)
//
// One record holds one write: a Put or Delete is one entry, a WriteBatch all of its entries,
// each naming the memtable it went to. A batch whose keys went to several memtables is
// appended whole to each of their logs, so recovery finds every entry of an acknowledged
// batch even if one log's tail was torn (it applies entries by their memtable id and drops
// duplicates by sequence number): batches stay atomic across a crash.
//
// Log files start zero-filled and are appended to contiguously, so a parse ends cleanly at
// the first zero header (the unused tail) or stops at a record that is cut short or fails
// its CRC (a write torn by a crash, never acknowledged). Nothing after such a record is
// used; ParseLogRecords reports how many bytes it ignored.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nova::ltc {

constexpr size_t kLogRecordHeaderBytes = 8;  // DO NOT CHANGE: persisted
constexpr uint8_t kLogRecordFormat = 1;      // DO NOT CHANGE: persisted

// One entry of a record. key and value point into the caller's bytes.
struct LogEntry {
  uint64_t memtable = 0;
  uint64_t sequence = 0;
  uint8_t type = 1;  // the internal key's value type: 0 deletion, 1 value
  std::string_view key;
  std::string_view value;
};

// Appends one record holding `entries` to *dst.
void AppendLogRecord(std::string* dst, const std::vector<LogEntry>& entries);

struct LogParseResult {
  uint64_t records = 0;
  uint64_t valid_bytes = 0;    // bytes of complete, valid records from the start
  uint64_t ignored_bytes = 0;  // non-zero bytes after them (a torn or damaged tail)
  std::string stop_reason;     // why parsing stopped early ("" at a clean end)
};

// Parses the records at the front of `data` into *entries (appended; pointing into `data`)
// until the clean end or the first bad record. Never fails, never reads past `data`.
LogParseResult ParseLogRecords(std::string_view data, std::vector<LogEntry>* entries);

}  // namespace nova::ltc
