#include "ltc/lookup_index.h"

#include <functional>
#include <string_view>

namespace nova::ltc {

LookupIndex::Stripe& LookupIndex::StripeOf(const leveldb::Slice& key) const {
  const size_t h = std::hash<std::string_view>()(std::string_view(key.data(), key.size()));
  return stripes_[h % kStripes];
}

void LookupIndex::Update(const leveldb::Slice& key, uint64_t memtable_id,
                         lsm::SequenceNumber sequence) {
  Stripe& s = StripeOf(key);
  std::lock_guard lock(s.mu);
  auto [it, inserted] = s.entries.try_emplace(key.ToString(), Entry{memtable_id, sequence});
  if (!inserted && it->second.sequence < sequence) it->second = Entry{memtable_id, sequence};
}

std::optional<LookupIndex::Entry> LookupIndex::Lookup(const leveldb::Slice& key) const {
  Stripe& s = StripeOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key.ToString());
  if (it == s.entries.end()) return std::nullopt;
  return it->second;
}

void LookupIndex::EraseIf(const leveldb::Slice& key, uint64_t memtable_id) {
  Stripe& s = StripeOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(key.ToString());
  if (it != s.entries.end() && it->second.memtable_id == memtable_id) s.entries.erase(it);
}

size_t LookupIndex::size() const {
  size_t n = 0;
  for (const Stripe& s : stripes_) {
    std::lock_guard lock(s.mu);
    n += s.entries.size();
  }
  return n;
}

}  // namespace nova::ltc
