// Internal keys: how the LSM-tree orders versions of a user key (DESIGN.md section 4).
//
//   internal key = user key | 8 bytes little-endian (sequence << 8 | type)
//
// User keys are arbitrary bytes (the empty key included) ordered by a configurable
// leveldb::Comparator (bytewise by default). Internal keys order by user key ascending, then
// sequence descending, then type descending, so the newest version of a key comes first.
// DO NOT CHANGE the encoding or the type values: persisted in SSTables and logs.
//
// Thread safety: pure functions; InternalKeyComparator is immutable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <leveldb/comparator.h>
#include <leveldb/slice.h>

namespace nova::lsm {

using SequenceNumber = uint64_t;
// Sequence numbers use 56 bits (the low byte holds the type).
constexpr SequenceNumber kMaxSequenceNumber = (1ull << 56) - 1;
constexpr size_t kInternalKeyTrailerBytes = 8;

enum ValueType : uint8_t {  // DO NOT CHANGE: persisted
  kTypeDeletion = 0,
  kTypeValue = 1,
};
// Seeking to (key, seq) with this type finds every entry of key with sequence <= seq:
// the highest type sorts first among equal sequences.
constexpr ValueType kTypeForSeek = kTypeValue;

inline uint64_t PackSequenceAndType(SequenceNumber seq, ValueType t) {
  return (seq << 8) | static_cast<uint64_t>(t);
}

struct ParsedInternalKey {
  leveldb::Slice user_key;
  SequenceNumber sequence = 0;
  ValueType type = kTypeValue;
};

void AppendInternalKey(std::string* dst, const leveldb::Slice& user_key, SequenceNumber seq,
                       ValueType type);
std::string MakeInternalKey(const leveldb::Slice& user_key, SequenceNumber seq, ValueType type);
// False (and *out unchanged) if `ikey` is shorter than the trailer or has an unknown type.
bool ParseInternalKey(const leveldb::Slice& ikey, ParsedInternalKey* out);
// REQUIRES: ikey.size() >= kInternalKeyTrailerBytes.
inline leveldb::Slice ExtractUserKey(const leveldb::Slice& ikey) {
  return leveldb::Slice(ikey.data(), ikey.size() - kInternalKeyTrailerBytes);
}

// Orders internal keys (see the file comment). Wraps the user comparator, which must
// outlive it. Malformed keys (shorter than the trailer) order before all others, so a
// corrupt key cannot crash a comparison.
class InternalKeyComparator : public leveldb::Comparator {
 public:
  explicit InternalKeyComparator(const leveldb::Comparator* user) : user_(user) {}
  const char* Name() const override { return "nova.InternalKeyComparator"; }
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override;
  void FindShortestSeparator(std::string* start, const leveldb::Slice& limit) const override;
  void FindShortSuccessor(std::string* key) const override;

  const leveldb::Comparator* user_comparator() const { return user_; }

 private:
  const leveldb::Comparator* const user_;  // must outlive this
};

}  // namespace nova::lsm
