#include "ltc/engine/version_edit.h"

#include <algorithm>

#include "common/coding.h"

namespace nova::ltc {

namespace {

// DO NOT CHANGE: persisted.
enum Tag : uint32_t {
  kSnapshot = 1,
  kNextFileNumber = 2,
  kLastSequence = 3,
  kDeletedTable = 4,
  kNewTable = 5,
  kDranges = 6,
  kNextMemtableId = 7,
  kLogFloor = 8,
  kObsoleteLog = 9,
  kObsoleteLogRange = 10,
};

constexpr uint32_t kMaxDranges = 1 << 16;
constexpr uint32_t kMaxTranges = 1 << 16;

void PutTable(std::string* dst, int level, const lsm::TableMeta& t) {
  PutVarint32(dst, static_cast<uint32_t>(level));
  lsm::EncodeTableMeta(dst, t);
}

bool GetTable(std::string_view* in, int* level, lsm::TableMeta* t) {
  uint32_t lvl;
  if (!GetVarint32(in, &lvl) || lvl >= static_cast<uint32_t>(lsm::kNumLevels) ||
      !lsm::DecodeTableMeta(in, t)) {
    return false;
  }
  *level = static_cast<int>(lvl);
  return true;
}

void PutBound(std::string* dst, const PersistedBound& b) {
  dst->push_back(static_cast<char>((b.after ? 1 : 0) | (b.min ? 2 : 0)));
  PutLengthPrefixed(dst, b.key);
}

bool GetBound(std::string_view* in, PersistedBound* b) {
  std::string_view key;
  if (in->empty()) return false;
  const uint8_t flags = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if (flags > 3 || !GetLengthPrefixed(in, &key)) return false;
  b->after = flags & 1;
  b->min = flags & 2;
  b->key = key;
  return true;
}

void PutDranges(std::string* dst, const PersistedDrangeLayout& l) {
  PutVarint64(dst, l.generation);
  PutVarint32(dst, static_cast<uint32_t>(l.dranges.size()));
  for (const auto& d : l.dranges) {
    dst->push_back(d.point ? 1 : 0);
    PutVarint32(dst, static_cast<uint32_t>(d.tranges.size()));
    for (const auto& b : d.tranges) PutBound(dst, b);
  }
}

bool GetDranges(std::string_view* in, PersistedDrangeLayout* l) {
  uint32_t n;
  if (!GetVarint64(in, &l->generation) || !GetVarint32(in, &n) || n > kMaxDranges) return false;
  l->dranges.resize(n);
  for (auto& d : l->dranges) {
    uint32_t t;
    if (in->empty()) return false;
    const uint8_t point = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    if (point > 1 || !GetVarint32(in, &t) || t == 0 || t > kMaxTranges) return false;
    d.point = point == 1;
    d.tranges.resize(t);
    for (auto& b : d.tranges) {
      if (!GetBound(in, &b)) return false;
    }
  }
  return true;
}

}  // namespace

void VersionEdit::EncodeTo(std::string* dst) const {
  if (snapshot) PutVarint32(dst, kSnapshot);
  if (next_file_number) {
    PutVarint32(dst, kNextFileNumber);
    PutVarint64(dst, *next_file_number);
  }
  if (last_sequence) {
    PutVarint32(dst, kLastSequence);
    PutVarint64(dst, *last_sequence);
  }
  for (const auto& [level, number] : deleted_tables) {
    PutVarint32(dst, kDeletedTable);
    PutVarint32(dst, static_cast<uint32_t>(level));
    PutVarint64(dst, number);
  }
  for (const auto& [level, table] : new_tables) {
    PutVarint32(dst, kNewTable);
    PutTable(dst, level, table);
  }
  if (dranges) {
    PutVarint32(dst, kDranges);
    PutDranges(dst, *dranges);
  }
  if (next_memtable_id) {
    PutVarint32(dst, kNextMemtableId);
    PutVarint64(dst, *next_memtable_id);
  }
  if (log_floor) {
    PutVarint32(dst, kLogFloor);
    PutVarint64(dst, *log_floor);
  }
  for (uint64_t m : obsolete_logs) {
    PutVarint32(dst, kObsoleteLog);
    PutVarint64(dst, m);
  }
  for (const auto& [begin, end] : obsolete_log_ranges) {
    PutVarint32(dst, kObsoleteLogRange);
    PutVarint64(dst, begin);
    PutVarint64(dst, end);
  }
}

Status VersionEdit::DecodeFrom(std::string_view in) {
  VersionEdit e;
  while (!in.empty()) {
    uint32_t tag;
    if (!GetVarint32(&in, &tag)) return Status::Corruption("version edit: bad tag");
    const char* field = nullptr;
    switch (tag) {
      case kSnapshot:
        e.snapshot = true;
        break;
      case kNextFileNumber: {
        uint64_t v;
        if (!GetVarint64(&in, &v)) field = "next file number";
        e.next_file_number = v;
        break;
      }
      case kLastSequence: {
        uint64_t v;
        if (!GetVarint64(&in, &v)) field = "last sequence";
        e.last_sequence = v;
        break;
      }
      case kDeletedTable: {
        uint32_t level;
        uint64_t number;
        if (!GetVarint32(&in, &level) || level >= static_cast<uint32_t>(lsm::kNumLevels) ||
            !GetVarint64(&in, &number)) {
          field = "deleted table";
        } else {
          e.deleted_tables.emplace_back(static_cast<int>(level), number);
        }
        break;
      }
      case kNewTable: {
        int level;
        lsm::TableMeta t;
        if (!GetTable(&in, &level, &t)) {
          field = "new table";
        } else {
          e.new_tables.emplace_back(level, std::move(t));
        }
        break;
      }
      case kDranges: {
        PersistedDrangeLayout l;
        if (!GetDranges(&in, &l)) {
          field = "dranges";
        } else {
          e.dranges = std::move(l);
        }
        break;
      }
      case kNextMemtableId: {
        uint64_t v;
        if (!GetVarint64(&in, &v)) field = "next memtable id";
        e.next_memtable_id = v;
        break;
      }
      case kLogFloor: {
        uint64_t v;
        if (!GetVarint64(&in, &v)) field = "log floor";
        e.log_floor = v;
        break;
      }
      case kObsoleteLog: {
        uint64_t v;
        if (!GetVarint64(&in, &v)) {
          field = "obsolete log";
        } else {
          e.obsolete_logs.push_back(v);
        }
        break;
      }
      case kObsoleteLogRange: {
        uint64_t begin, end;
        if (!GetVarint64(&in, &begin) || !GetVarint64(&in, &end) || end <= begin) {
          field = "obsolete log range";
        } else {
          e.obsolete_log_ranges.emplace_back(begin, end);
        }
        break;
      }
      default:
        return Status::Corruption("version edit: unknown tag " + std::to_string(tag));
    }
    if (field != nullptr) return Status::Corruption(std::string("version edit: bad ") + field);
  }
  *this = std::move(e);
  return Status::OK();
}

}  // namespace nova::ltc
