#include "ltc/engine/lookup_index.h"

#include <functional>
#include <string_view>

namespace nova::ltc {

namespace {
std::string_view View(const leveldb::Slice& s) { return std::string_view(s.data(), s.size()); }
}  // namespace

LookupIndex::Stripe& LookupIndex::StripeOf(const leveldb::Slice& key) const {
  // The top bits: the map itself buckets by the low ones.
  const size_t h = std::hash<std::string_view>()(View(key));
  return stripes_[(h >> (8 * sizeof(size_t) - 6)) % kStripes];
}

void LookupIndex::Update(const leveldb::Slice& key, uint64_t memtable_id,
                         lsm::SequenceNumber sequence) {
  Stripe& s = StripeOf(key);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(View(key));
  if (it == s.entries.end()) {
    s.entries.emplace(key.ToString(), Entry{memtable_id, sequence});
  } else if (it->second.sequence < sequence) {
    it->second = Entry{memtable_id, sequence};
  }
}

void LookupIndex::InsertIfAbsent(const leveldb::Slice& key, uint64_t memtable_id,
                                 lsm::SequenceNumber sequence) {
  Stripe& s = StripeOf(key);
  MutexLock lock(&s.mu);
  if (s.entries.find(View(key)) == s.entries.end()) {
    s.entries.emplace(key.ToString(), Entry{memtable_id, sequence});
  }
}

std::optional<LookupIndex::Entry> LookupIndex::Lookup(const leveldb::Slice& key) const {
  Stripe& s = StripeOf(key);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(View(key));
  if (it == s.entries.end()) return std::nullopt;
  return it->second;
}

void LookupIndex::EraseIf(const leveldb::Slice& key, uint64_t memtable_id) {
  Stripe& s = StripeOf(key);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(View(key));
  if (it != s.entries.end() && it->second.memtable_id == memtable_id) s.entries.erase(it);
}

void LookupIndex::Repoint(const leveldb::Slice& key, uint64_t from, uint64_t to) {
  Stripe& s = StripeOf(key);
  MutexLock lock(&s.mu);
  auto it = s.entries.find(View(key));
  if (it != s.entries.end() && it->second.memtable_id == from) it->second.memtable_id = to;
}

size_t LookupIndex::size() const {
  size_t n = 0;
  for (const Stripe& s : stripes_) {
    MutexLock lock(&s.mu);
    n += s.entries.size();
  }
  return n;
}

}  // namespace nova::ltc
