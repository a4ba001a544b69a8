#include "ltc/engine/log_record.h"

#include <algorithm>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::ltc {

namespace {

// Bounds a damaged record cannot make us exceed.
constexpr uint32_t kMaxBodyBytes = 1u << 30;

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

bool ParseBody(std::string_view body, std::vector<LogEntry>* out) {
  if (body.empty() || static_cast<uint8_t>(body[0]) != kLogRecordFormat) return false;
  body.remove_prefix(1);
  uint32_t count;
  if (!GetVarint32(&body, &count) || count == 0 || count > body.size()) return false;
  std::vector<LogEntry> entries(count);
  for (LogEntry& e : entries) {
    if (!GetVarint64(&body, &e.memtable) || !GetVarint64(&body, &e.sequence) || body.empty()) {
      return false;
    }
    e.type = static_cast<uint8_t>(body[0]);
    body.remove_prefix(1);
    if (e.type > 1 || !GetLengthPrefixed(&body, &e.key) || !GetLengthPrefixed(&body, &e.value)) {
      return false;
    }
  }
  if (!body.empty()) return false;
  out->insert(out->end(), entries.begin(), entries.end());
  return true;
}

}  // namespace

void AppendLogRecord(std::string* dst, const std::vector<LogEntry>& entries) {
  const size_t start = dst->size();
  dst->append(kLogRecordHeaderBytes, '\0');
  dst->push_back(static_cast<char>(kLogRecordFormat));
  PutVarint32(dst, static_cast<uint32_t>(entries.size()));
  for (const LogEntry& e : entries) {
    PutVarint64(dst, e.memtable);
    PutVarint64(dst, e.sequence);
    dst->push_back(static_cast<char>(e.type));
    PutLengthPrefixed(dst, e.key);
    PutLengthPrefixed(dst, e.value);
  }
  const uint32_t body = static_cast<uint32_t>(dst->size() - start - kLogRecordHeaderBytes);
  char* header = dst->data() + start;
  EncodeFixed32(header + 4, body);
  EncodeFixed32(header, crc32c::Mask(crc32c::Value(header + 4, 4 + body)));
}

LogParseResult ParseLogRecords(std::string_view data, std::vector<LogEntry>* entries) {
  LogParseResult r;
  std::string_view in = data;
  auto stop = [&](const char* why) {
    r.stop_reason = why;
    r.ignored_bytes = AllZero(in) ? 0 : in.size();
    if (r.ignored_bytes == 0) r.stop_reason.clear();  // only zeros follow: a clean end
    return r;
  };
  while (!in.empty()) {
    if (in.size() < kLogRecordHeaderBytes) return stop("a record header cut short");
    const uint32_t masked = DecodeFixed32(in.data());
    const uint32_t length = DecodeFixed32(in.data() + 4);
    if (masked == 0 && length == 0) return stop("a zero header");
    if (length > kMaxBodyBytes || length > in.size() - kLogRecordHeaderBytes) {
      return stop("a record cut short");
    }
    if (crc32c::Unmask(masked) != crc32c::Value(in.data() + 4, 4 + length)) {
      return stop("a record failing its CRC");
    }
    if (!ParseBody(in.substr(kLogRecordHeaderBytes, length), entries)) {
      return stop("a malformed record body");
    }
    in.remove_prefix(kLogRecordHeaderBytes + length);
    ++r.records;
    r.valid_bytes = data.size() - in.size();
  }
  return r;
}

}  // namespace nova::ltc
