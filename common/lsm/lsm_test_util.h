// Test helpers for common/lsm: a vector-backed iterator with fault injection, and a
// simple model of versioned data (user key, sequence) -> (type, value) with the reader's
// view at a snapshot. Header-only; used by the *_test.cc files of this folder only.
//
// Thread safety: none of these objects is thread-safe.
#pragma once

#include <leveldb/comparator.h>
#include <leveldb/iterator.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/lsm/internal_key.h"

namespace nova::lsm::test {

using KV = std::pair<std::string, std::string>;

// Iterates `entries` in the order given (expected to be `cmp` order; tests of corrupt input
// may break it, Seek then finds the first entry >= target in vector order). Can be made to
// fail: moving onto entry FailAt(i) leaves it invalid with an IOError, for good.
class VectorIterator : public leveldb::Iterator {
 public:
  // `cmp` must outlive this.
  VectorIterator(const leveldb::Comparator* cmp, std::vector<KV> entries)
      : cmp_(cmp), entries_(std::move(entries)) {}

  // Moving onto entry `index` (by any call) fails.
  void FailAt(size_t index) { fail_at_ = index; }

  bool Valid() const override { return !failed_ && pos_ < entries_.size(); }
  void SeekToFirst() override { Land(0); }
  void SeekToLast() override { Land(entries_.empty() ? kEnd : entries_.size() - 1); }
  void Seek(const leveldb::Slice& target) override {
    size_t i = 0;
    while (i < entries_.size() && cmp_->Compare(entries_[i].first, target) < 0) ++i;
    Land(i);
  }
  void Next() override { Land(pos_ + 1); }
  void Prev() override { Land(pos_ == 0 ? kEnd : pos_ - 1); }
  leveldb::Slice key() const override { return entries_[pos_].first; }
  leveldb::Slice value() const override { return entries_[pos_].second; }
  leveldb::Status status() const override {
    return failed_ ? leveldb::Status::IOError("injected failure") : leveldb::Status::OK();
  }

 private:
  static constexpr size_t kEnd = SIZE_MAX;

  void Land(size_t i) {
    if (failed_) return;
    pos_ = i < entries_.size() ? i : kEnd;
    if (pos_ != kEnd && pos_ == fail_at_) failed_ = true;
  }

  const leveldb::Comparator* const cmp_;
  const std::vector<KV> entries_;
  size_t pos_ = kEnd;
  size_t fail_at_ = kEnd;
  bool failed_ = false;
};

// A random key of up to `max_len` bytes from the first `alphabet` letters of "abcdef...",
// the empty key included: small alphabets make repeated keys likely.
inline std::string RandomKey(std::mt19937_64* rng, int alphabet, int max_len) {
  std::string k(static_cast<size_t>((*rng)() % static_cast<uint64_t>(max_len + 1)), 'a');
  for (char& c : k) c = static_cast<char>('a' + (*rng)() % static_cast<uint64_t>(alphabet));
  return k;
}

// Reads `it` from SeekToFirst() to the end.
inline std::vector<KV> ReadAll(leveldb::Iterator* it) {
  std::vector<KV> out;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  return out;
}

// The model of versioned data under the bytewise comparator.
struct Version {
  ValueType type = kTypeValue;
  std::string value;
};
struct NewestFirst {  // internal key order: user key ascending, sequence descending
  bool operator()(const std::pair<std::string, SequenceNumber>& a,
                  const std::pair<std::string, SequenceNumber>& b) const {
    if (a.first != b.first) return a.first < b.first;
    return a.second > b.second;
  }
};
using VersionModel = std::map<std::pair<std::string, SequenceNumber>, Version, NewestFirst>;

// The model's entries as (internal key, value), in internal key order.
inline std::vector<KV> InternalEntries(const VersionModel& model) {
  std::vector<KV> out;
  for (const auto& [k, v] : model)
    out.emplace_back(MakeInternalKey(k.first, k.second, v.type), v.value);
  return out;
}

// What a reader at `snapshot` sees: for each user key the newest version with
// sequence <= snapshot, if it is a value.
inline std::vector<KV> ModelView(const VersionModel& model, SequenceNumber snapshot) {
  std::vector<KV> out;
  const std::string* decided = nullptr;  // user key whose visible version was found
  for (const auto& [k, v] : model) {
    if (k.second > snapshot) continue;
    if (decided != nullptr && *decided == k.first) continue;
    decided = &k.first;
    if (v.type == kTypeValue) out.emplace_back(k.first, v.value);
  }
  return out;
}

}  // namespace nova::lsm::test
