#include "ltc/engine/memtable.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/coding.h"

namespace nova::ltc {

namespace {

// Decodes a varint32 written by EncodeVarint64 into our own arena or lookup buffer. The
// bytes are trusted (we wrote them), so unlike common/coding.h's GetVarint32 this needs no
// bound: it stops at the varint's last byte and never reads past it.
const char* DecodeTrustedVarint32(const char* p, uint32_t* v) {
  constexpr int kPayloadBits = 7;
  constexpr uint32_t kMoreBit = 0x80;
  uint32_t result = 0;
  for (int shift = 0; shift < kMaxVarint32Bytes * kPayloadBits; shift += kPayloadBits) {
    const uint32_t byte = static_cast<uint8_t>(*p++);
    result |= (byte & (kMoreBit - 1)) << shift;
    if ((byte & kMoreBit) == 0) break;
  }
  *v = result;
  return p;
}

// The varint32-length-prefixed slice at p.
leveldb::Slice DecodeLengthPrefixed(const char* p) {
  uint32_t len = 0;
  p = DecodeTrustedVarint32(p, &len);
  return leveldb::Slice(p, len);
}

// The value of the entry whose internal key (inside the entry) is `ikey`: its length
// follows the key, then, unless empty, the address of its bytes in the value arena.
leveldb::Slice EntryValue(const leveldb::Slice& ikey) {
  uint32_t len = 0;
  const char* p = DecodeTrustedVarint32(ikey.data() + ikey.size(), &len);
  if (len == 0) return leveldb::Slice();
  return leveldb::Slice(reinterpret_cast<const char*>(static_cast<uintptr_t>(DecodeFixed64(p))),
                        len);
}

// Encodes the length-prefixed internal key (user_key, seq, type) into *buf: the form of a
// Seek target in the table.
void EncodeLookupKey(const leveldb::Slice& user_key, lsm::SequenceNumber seq, lsm::ValueType type,
                     std::string* buf) {
  buf->clear();
  PutVarint32(buf, static_cast<uint32_t>(user_key.size() + lsm::kInternalKeyTrailerBytes));
  lsm::AppendInternalKey(buf, user_key, seq, type);
}

// Mixes the memtable id into a seed, so each memtable's index has its own (reproducible)
// shape. splitmix64's finalizer.
uint64_t SeedFromId(uint64_t id) {
  uint64_t z = id + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int MemTable::EntryComparator::operator()(const char* a, const char* b) const {
  const leveldb::Slice ka = DecodeLengthPrefixed(a);
  const leveldb::Slice kb = DecodeLengthPrefixed(b);
  if (!bytewise || ka.size() < lsm::kInternalKeyTrailerBytes ||
      kb.size() < lsm::kInternalKeyTrailerBytes) {
    return cmp->Compare(ka, kb);  // (a Seek target may be any bytes)
  }
  // The InternalKeyComparator's order, inlined for the default comparator: the skip list
  // compares on every level of every insert, and two virtual calls per comparison showed up
  // as a fifth of the put path. Entries we wrote always carry the 8-byte trailer.
  const size_t ua = ka.size() - lsm::kInternalKeyTrailerBytes;
  const size_t ub = kb.size() - lsm::kInternalKeyTrailerBytes;
  const int r = std::memcmp(ka.data(), kb.data(), std::min(ua, ub));
  if (r != 0) return r;
  if (ua != ub) return ua < ub ? -1 : 1;
  const uint64_t na = DecodeFixed64(ka.data() + ua);
  const uint64_t nb = DecodeFixed64(kb.data() + ub);
  if (na == nb) return 0;
  return na > nb ? -1 : 1;  // newer first
}

MemTable::MemTable(const lsm::InternalKeyComparator* cmp, uint64_t id)
    : cmp_(cmp),
      id_(id),
      table_(EntryComparator{cmp, cmp->user_comparator() == leveldb::BytewiseComparator()}, &arena_,
             SeedFromId(id)) {}

void MemTable::Add(lsm::SequenceNumber seq, lsm::ValueType type, const leveldb::Slice& user_key,
                   const leveldb::Slice& value) {
  DCHECK_LE(seq, lsm::kMaxSequenceNumber);
  const leveldb::Slice stored_value = type == lsm::kTypeDeletion ? leveldb::Slice() : value;
  const size_t ikey_size = user_key.size() + lsm::kInternalKeyTrailerBytes;
  CHECK_LE(ikey_size, std::numeric_limits<uint32_t>::max()) << "MemTable::Add: key too large";
  CHECK_LE(stored_value.size(), std::numeric_limits<uint32_t>::max())
      << "MemTable::Add: value too large";
  // The value lives in the value arena and the entry holds its address, so the entries
  // (with the index nodes they share allocations with) stay dense and a search touches few
  // cache lines however large the values are.
  const size_t entry_size = VarintLength(ikey_size) + ikey_size +
                            VarintLength(stored_value.size()) +
                            (stored_value.empty() ? 0 : sizeof(uint64_t));

  MutexLock lock(&write_mu_);
  // The arenas are not thread-safe, so even the copies happen under the mutex. The entry
  // goes right after its index node (skiplist.h InsertWithData): searches compare keys in
  // the cache lines they load for the links.
  const char* value_bytes = nullptr;
  if (!stored_value.empty()) {
    char* v = value_arena_.Allocate(stored_value.size());
    std::memcpy(v, stored_value.data(), stored_value.size());
    value_bytes = v;
  }
  const Table::Neighbors around = table_.InsertWithData(entry_size, [&](char* entry) {
    char* p = entry;
    p += EncodeVarint64(p, ikey_size);
    std::memcpy(p, user_key.data(), user_key.size());
    p += user_key.size();
    EncodeFixed64(p, lsm::PackSequenceAndType(seq, type));
    p += lsm::kInternalKeyTrailerBytes;
    p += EncodeVarint64(p, stored_value.size());
    if (value_bytes != nullptr) {
      EncodeFixed64(p, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(value_bytes)));
      p += sizeof(uint64_t);
    }
    DCHECK_EQ(p, entry + entry_size);
    return static_cast<const char*>(entry);
  });

  // All versions of a user key are adjacent in the index, whatever order their sequences
  // arrived in, so the entry brings a new user key iff neither neighbour shares it.
  const leveldb::Comparator* user_cmp = cmp_->user_comparator();
  auto same_user_key = [&](const char* const* neighbour) {
    return neighbour != nullptr &&
           user_cmp->Compare(lsm::ExtractUserKey(DecodeLengthPrefixed(*neighbour)), user_key) == 0;
  };
  if (!same_user_key(around.prev) && !same_user_key(around.next)) {
    num_unique_keys_.fetch_add(1, std::memory_order_relaxed);
  }
  // Release, paired with num_entries(): counted entries are visible to later readers.
  num_entries_.fetch_add(1, std::memory_order_release);
  data_bytes_.fetch_add(user_key.size() + stored_value.size(), std::memory_order_relaxed);
  if (seq < smallest_sequence()) smallest_sequence_.store(seq, std::memory_order_relaxed);
  if (seq > largest_sequence()) largest_sequence_.store(seq, std::memory_order_relaxed);
}

MemTable::GetResult MemTable::Get(const leveldb::Slice& user_key, lsm::SequenceNumber snapshot,
                                  std::string* value) const {
  if (snapshot > lsm::kMaxSequenceNumber) snapshot = lsm::kMaxSequenceNumber;
  // (user_key, snapshot, kTypeForSeek) sorts before every entry of user_key with sequence
  // <= snapshot and after those above it: the first entry at or after it is the answer if
  // it belongs to user_key.
  std::string lookup;
  EncodeLookupKey(user_key, snapshot, lsm::kTypeForSeek, &lookup);
  Table::Iterator it(&table_);
  it.Seek(lookup.data());
  if (!it.Valid()) return GetResult::kNotFound;

  const char* entry = it.key();
  const leveldb::Slice ikey = DecodeLengthPrefixed(entry);
  lsm::ParsedInternalKey parsed;
  if (!lsm::ParseInternalKey(ikey, &parsed)) {
    // Add() writes only well-formed keys: a bad one means memory corruption.
    LOG(DFATAL) << "MemTable " << id_ << ": malformed internal key in the arena";
    return GetResult::kNotFound;
  }
  if (cmp_->user_comparator()->Compare(parsed.user_key, user_key) != 0) {
    return GetResult::kNotFound;
  }
  if (parsed.type == lsm::kTypeDeletion) return GetResult::kDeleted;
  const leveldb::Slice v = EntryValue(ikey);
  value->assign(v.data(), v.size());
  return GetResult::kFound;
}

// Walks the table; holds the memtable so the arena outlives the iterator.
class MemTable::Iter : public leveldb::Iterator {
 public:
  explicit Iter(std::shared_ptr<const MemTable> mem) : mem_(std::move(mem)), it_(&mem_->table_) {}

  bool Valid() const override { return it_.Valid(); }
  void SeekToFirst() override { it_.SeekToFirst(); }
  void SeekToLast() override { it_.SeekToLast(); }
  void Seek(const leveldb::Slice& target) override {
    seek_buf_.clear();
    PutVarint32(&seek_buf_, static_cast<uint32_t>(target.size()));
    seek_buf_.append(target.data(), target.size());
    it_.Seek(seek_buf_.data());
  }
  void Next() override { it_.Next(); }
  void Prev() override { it_.Prev(); }
  leveldb::Slice key() const override { return DecodeLengthPrefixed(it_.key()); }
  leveldb::Slice value() const override {
    return EntryValue(DecodeLengthPrefixed(it_.key()));
  }
  leveldb::Status status() const override { return leveldb::Status::OK(); }

 private:
  const std::shared_ptr<const MemTable> mem_;
  Table::Iterator it_;
  std::string seek_buf_;  // the length-prefixed Seek target
};

leveldb::Iterator* MemTable::NewIterator() const {
  std::shared_ptr<const MemTable> self = weak_from_this().lock();
  CHECK(self != nullptr) << "MemTable::NewIterator: memtable " << id_
                         << " is not owned by a std::shared_ptr";
  return new Iter(std::move(self));
}

}  // namespace nova::ltc
