// Wire encodings of a live migration (range_migration.h).
//
// Meta:   u8 version | u8 complete | varint64 next_memtable_id | varint64 last_sequence |
//         varint32 n, n x varint64 memtable id |
//         varint32 n, n x (varint64 into | varint32 m, m x varint64 absorbed id) |
//         varint32 n, n x varint64 unrecorded obsolete id
// Chunk:  repeated (varint32 length | internal key | varint32 length | value), internal keys
//         strictly ascending (InternalKeyComparator order, as the memtable iterates).
// Both travel between LTCs of one cluster (no persisted copy): the version byte lets a
// mixed-version cluster refuse instead of misreading.
#include "ltc/engine/range_migration.h"

#include <leveldb/iterator.h>

#include <memory>

#include "common/coding.h"

namespace nova::ltc {

namespace {

// DO NOT CHANGE without bumping: read by the other LTC.
constexpr uint8_t kMigratedMetaVersion = 1;

Status Malformed(std::string_view what) {
  return Status::Corruption("malformed migration metadata: " + std::string(what));
}

// Reads a count of items of at least one byte each: never more than the bytes left.
bool GetCount(std::string_view* in, uint32_t* n) { return GetVarint32(in, n) && *n <= in->size(); }

}  // namespace

std::string EncodeMigratedMeta(const MigratedState& state) {
  std::string out;
  out.push_back(static_cast<char>(kMigratedMetaVersion));
  out.push_back(state.complete ? 1 : 0);
  PutVarint64(&out, state.next_memtable_id);
  PutVarint64(&out, state.last_sequence);
  PutVarint32(&out, static_cast<uint32_t>(state.memtables.size()));
  for (const MigratedMemtable& m : state.memtables) PutVarint64(&out, m.mem->id());
  PutVarint32(&out, static_cast<uint32_t>(state.absorbed.size()));
  for (const auto& [into, ids] : state.absorbed) {
    PutVarint64(&out, into);
    PutVarint32(&out, static_cast<uint32_t>(ids.size()));
    for (uint64_t id : ids) PutVarint64(&out, id);
  }
  PutVarint32(&out, static_cast<uint32_t>(state.unrecorded_obsolete.size()));
  for (uint64_t id : state.unrecorded_obsolete) PutVarint64(&out, id);
  return out;
}

Status DecodeMigratedMeta(std::string_view in, MigratedState* state,
                          std::vector<uint64_t>* memtable_ids) {
  *state = MigratedState();
  memtable_ids->clear();
  if (in.size() < 2) return Malformed("too short");
  if (static_cast<uint8_t>(in[0]) != kMigratedMetaVersion) {
    return Status::Corruption("migration metadata of unknown version " +
                              std::to_string(static_cast<uint8_t>(in[0])));
  }
  const uint8_t complete = static_cast<uint8_t>(in[1]);
  if (complete > 1) return Malformed("bad complete flag");
  state->complete = complete == 1;
  in.remove_prefix(2);
  uint32_t n;
  if (!GetVarint64(&in, &state->next_memtable_id) || !GetVarint64(&in, &state->last_sequence)) {
    return Malformed("truncated header");
  }
  if (state->last_sequence > lsm::kMaxSequenceNumber) return Malformed("sequence out of range");
  if (!GetCount(&in, &n)) return Malformed("bad memtable count");
  memtable_ids->resize(n);
  for (uint64_t& id : *memtable_ids) {
    if (!GetVarint64(&in, &id)) return Malformed("truncated memtable ids");
  }
  if (!GetCount(&in, &n)) return Malformed("bad absorbed count");
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t into;
    uint32_t m;
    if (!GetVarint64(&in, &into) || !GetCount(&in, &m)) return Malformed("truncated absorbed");
    std::vector<uint64_t>& ids = state->absorbed[into];
    for (uint32_t j = 0; j < m; ++j) {
      uint64_t id;
      if (!GetVarint64(&in, &id)) return Malformed("truncated absorbed ids");
      ids.push_back(id);
    }
  }
  if (!GetCount(&in, &n)) return Malformed("bad obsolete count");
  state->unrecorded_obsolete.resize(n);
  for (uint64_t& id : state->unrecorded_obsolete) {
    if (!GetVarint64(&in, &id)) return Malformed("truncated obsolete ids");
  }
  if (!in.empty()) return Malformed("trailing bytes");
  return Status::OK();
}

void EncodeMemtableChunk(const MemTable& mem, std::string_view after, size_t max_bytes,
                         std::string* out, std::string* last_key, bool* done) {
  out->clear();
  std::unique_ptr<leveldb::Iterator> it(mem.NewIterator());
  if (after.empty()) {
    it->SeekToFirst();
  } else {
    const leveldb::Slice a(after.data(), after.size());
    it->Seek(a);
    // Seek lands on `after` itself unless it is gone (it cannot be: entries are never
    // removed) or was never there (a caller's key: start at the first entry past it).
    if (it->Valid() && mem.comparator()->Compare(it->key(), a) == 0) it->Next();
  }
  for (; it->Valid(); it->Next()) {
    if (!out->empty() && out->size() >= max_bytes) break;
    const leveldb::Slice k = it->key(), v = it->value();
    PutLengthPrefixed(out, std::string_view(k.data(), k.size()));
    PutLengthPrefixed(out, std::string_view(v.data(), v.size()));
    last_key->assign(k.data(), k.size());
  }
  *done = !it->Valid();
}

Status DecodeMemtableChunk(std::string_view chunk, MemTable* mem, uint64_t* entries) {
  *entries = 0;
  const lsm::InternalKeyComparator* icmp = mem->comparator();
  // Entries must come after everything the memtable holds (chunks in order, each once):
  // MemTable::Add must never see an entry twice.
  std::string last;
  {
    std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
    it->SeekToLast();
    if (it->Valid()) last = it->key().ToString();
  }
  while (!chunk.empty()) {
    std::string_view key, value;
    if (!GetLengthPrefixed(&chunk, &key) || !GetLengthPrefixed(&chunk, &value)) {
      return Status::Corruption("truncated memtable chunk entry");
    }
    const leveldb::Slice k(key.data(), key.size());
    lsm::ParsedInternalKey p;
    if (!lsm::ParseInternalKey(k, &p)) {
      return Status::Corruption("memtable chunk entry with a malformed internal key");
    }
    if (!last.empty() && icmp->Compare(leveldb::Slice(last), k) >= 0) {
      return Status::Corruption("memtable chunk entries out of order (or a chunk applied twice)");
    }
    mem->Add(p.sequence, p.type, p.user_key, leveldb::Slice(value.data(), value.size()));
    last.assign(key.data(), key.size());
    ++*entries;
  }
  return Status::OK();
}

}  // namespace nova::ltc
