#include "ltc/engine/range_index_iterator.h"

#include <utility>
#include <vector>

#include "common/lsm/merging_iterator.h"
#include "ltc/engine/concatenating_iterator.h"

namespace nova::ltc {

namespace {

// Positions `it` at the first entry at or after bound `b` (internal keys of user keys).
void SeekToBound(const KeyBound& b, const leveldb::Comparator* ucmp, leveldb::Iterator* it) {
  if (b.min) return it->SeekToFirst();
  if (!b.after) {
    // The first internal key of b.key: its highest sequence.
    return it->Seek(lsm::MakeInternalKey(b.key, lsm::kMaxSequenceNumber, lsm::kTypeForSeek));
  }
  // The last possible internal key of b.key (sequence 0, lowest type), then past any entry
  // that is exactly it.
  it->Seek(lsm::MakeInternalKey(b.key, 0, lsm::kTypeDeletion));
  while (it->Valid() && it->key().size() >= lsm::kInternalKeyTrailerBytes &&
         ucmp->Compare(lsm::ExtractUserKey(it->key()), b.key) == 0) {
    it->Next();
  }
}

class PartitionPieces : public ConcatenatingIterator::Pieces {
 public:
  PartitionPieces(const lsm::InternalKeyComparator* icmp, std::shared_ptr<const RangeIndex> index)
      : icmp_(icmp), index_(std::move(index)) {}

  size_t size() const override { return static_cast<size_t>(index_->size()); }

  size_t Find(const leveldb::Slice& target) const override {
    if (target.size() < lsm::kInternalKeyTrailerBytes) return 0;  // malformed: sorts first
    return static_cast<size_t>(index_->Find(lsm::ExtractUserKey(target)));
  }

  leveldb::Iterator* Open(size_t i) override {
    const RangeIndex::Partition& p = index_->partition(static_cast<int>(i));
    std::vector<leveldb::Iterator*> children;
    for (uint32_t m : p.memtables) children.push_back(index_->memtables()[m]->NewIterator());
    for (uint32_t t : p.tables) {
      auto it = index_->tables()[t]->NewIterator();
      children.push_back(it.ok() ? it.value()
                                 : leveldb::NewErrorIterator(
                                       leveldb::Status::IOError(it.status().ToString())));
    }
    return lsm::NewMergingIterator(icmp_, std::move(children));
  }

  void SeekToFirstIn(size_t i, leveldb::Iterator* it) const override {
    SeekToBound(index_->partition(static_cast<int>(i)).lower, icmp_->user_comparator(), it);
  }

  void SeekToLastIn(size_t i, leveldb::Iterator* it) const override {
    const KeyBound* upper = index_->UpperBound(static_cast<int>(i));
    if (upper == nullptr) return it->SeekToLast();
    // The entry before the first one at or after the upper bound.
    SeekToBound(*upper, icmp_->user_comparator(), it);
    if (it->Valid()) {
      it->Prev();
    } else if (it->status().ok()) {
      it->SeekToLast();
    }
  }

  bool Contains(size_t i, const leveldb::Slice& key) const override {
    // A malformed key is left to the user iterator, which reports it as corruption.
    if (key.size() < lsm::kInternalKeyTrailerBytes) return true;
    return index_->Contains(static_cast<int>(i), lsm::ExtractUserKey(key));
  }

 private:
  const lsm::InternalKeyComparator* const icmp_;  // must outlive this
  const std::shared_ptr<const RangeIndex> index_;
};

}  // namespace

leveldb::Iterator* NewRangeIndexIterator(const lsm::InternalKeyComparator* icmp,
                                         std::shared_ptr<const RangeIndex> index) {
  return new ConcatenatingIterator(std::make_unique<PartitionPieces>(icmp, std::move(index)));
}

}  // namespace nova::ltc
