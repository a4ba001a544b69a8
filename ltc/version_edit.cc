#include "ltc/version_edit.h"

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

// Bounds on counts read from disk, so a damaged record cannot make us allocate much.
constexpr uint32_t kMaxReplicas = 64;
// Set in a replica count when the replicas' locations carry chunk_bytes and chunk_stride.
// Only then: a table without chunked fragments encodes as before this field existed, and an
// older reader rejects (count > kMaxReplicas) rather than misreads one with them.
constexpr uint32_t kChunkedFlag = 1u << 7;
constexpr uint32_t kMaxDranges = 1 << 16;
constexpr uint32_t kMaxTranges = 1 << 16;

void PutLocation(std::string* dst, const FragmentLocation& l, bool chunked) {
  PutVarint32(dst, l.stoc_id);
  PutVarint64(dst, l.file_id);
  PutVarint64(dst, l.offset);
  PutVarint64(dst, l.size);
  if (chunked) {
    PutVarint64(dst, l.chunk_bytes);
    PutVarint64(dst, l.chunk_stride);
  }
}

bool GetLocation(std::string_view* in, FragmentLocation* l, bool chunked) {
  if (!GetVarint32(in, &l->stoc_id) || !GetVarint64(in, &l->file_id) ||
      !GetVarint64(in, &l->offset) || !GetVarint64(in, &l->size)) {
    return false;
  }
  if (!chunked) return true;
  if (!GetVarint64(in, &l->chunk_bytes) || !GetVarint64(in, &l->chunk_stride)) return false;
  // A chunked location has chunks at least as far apart as they are long.
  return l->chunk_bytes == 0 ? l->chunk_stride == 0 : l->chunk_stride >= l->chunk_bytes;
}

void PutReplicas(std::string* dst, const std::vector<FragmentLocation>& r) {
  const bool chunked = std::any_of(r.begin(), r.end(),
                                   [](const FragmentLocation& l) { return l.chunk_bytes != 0; });
  PutVarint32(dst, static_cast<uint32_t>(r.size()) | (chunked ? kChunkedFlag : 0));
  for (const auto& l : r) PutLocation(dst, l, chunked);
}

bool GetReplicas(std::string_view* in, std::vector<FragmentLocation>* r) {
  uint32_t n;
  if (!GetVarint32(in, &n)) return false;
  const bool chunked = (n & kChunkedFlag) != 0;
  n &= ~kChunkedFlag;
  if (n > kMaxReplicas) return false;
  r->resize(n);
  for (auto& l : *r) {
    if (!GetLocation(in, &l, chunked)) return false;
  }
  return true;
}

}  // namespace

void EncodeTableMeta(std::string* dst, const TableMeta& t) {
  PutVarint64(dst, t.number);
  PutLengthPrefixed(dst, t.smallest);
  PutLengthPrefixed(dst, t.largest);
  PutVarint64(dst, t.num_entries);
  PutVarint64(dst, t.smallest_sequence);
  PutVarint64(dst, t.largest_sequence);
  PutVarint32(dst, t.drange);
  t.layout.EncodeTo(dst);
  for (const auto& replicas : t.fragments) PutReplicas(dst, replicas);
  PutReplicas(dst, t.filter);
}

bool DecodeTableMeta(std::string_view* in, TableMeta* t) {
  std::string_view smallest, largest;
  if (!GetVarint64(in, &t->number) || !GetLengthPrefixed(in, &smallest) ||
      !GetLengthPrefixed(in, &largest) || !GetVarint64(in, &t->num_entries) ||
      !GetVarint64(in, &t->smallest_sequence) || !GetVarint64(in, &t->largest_sequence) ||
      !GetVarint32(in, &t->drange) || !lsm::TableLayout::DecodeFrom(in, &t->layout).ok()) {
    return false;
  }
  t->smallest = smallest;
  t->largest = largest;
  t->fragments.resize(t->layout.num_fragments());
  for (auto& replicas : t->fragments) {
    if (!GetReplicas(in, &replicas)) return false;
  }
  return GetReplicas(in, &t->filter);
}

namespace {

void PutTable(std::string* dst, int level, const TableMeta& t) {
  PutVarint32(dst, static_cast<uint32_t>(level));
  EncodeTableMeta(dst, t);
}

bool GetTable(std::string_view* in, int* level, TableMeta* t) {
  uint32_t lvl;
  if (!GetVarint32(in, &lvl) || lvl >= static_cast<uint32_t>(kNumLevels) ||
      !DecodeTableMeta(in, t)) {
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
        if (!GetVarint32(&in, &level) || level >= static_cast<uint32_t>(kNumLevels) ||
            !GetVarint64(&in, &number)) {
          field = "deleted table";
        } else {
          e.deleted_tables.emplace_back(static_cast<int>(level), number);
        }
        break;
      }
      case kNewTable: {
        int level;
        TableMeta t;
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
