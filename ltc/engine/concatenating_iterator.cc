#include "ltc/engine/concatenating_iterator.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace nova::ltc {

ConcatenatingIterator::ConcatenatingIterator(std::unique_ptr<Pieces> pieces)
    : pieces_(std::move(pieces)), piece_(pieces_->size()) {}

ConcatenatingIterator::~ConcatenatingIterator() = default;

bool ConcatenatingIterator::Valid() const { return it_ != nullptr && it_->Valid(); }

leveldb::Status ConcatenatingIterator::status() const {
  if (it_ != nullptr && !it_->status().ok()) return it_->status();
  return status_;
}

void ConcatenatingIterator::SetPiece(size_t i) {
  if (i == piece_ && it_ != nullptr) return;
  if (it_ != nullptr && !it_->status().ok() && status_.ok()) status_ = it_->status();
  it_.reset(i < pieces_->size() ? pieces_->Open(i) : nullptr);
  piece_ = i;
}

void ConcatenatingIterator::SeekToFirst() {
  SetPiece(0);
  if (it_ != nullptr) pieces_->SeekToFirstIn(piece_, it_.get());
  SkipForward();
}

void ConcatenatingIterator::SeekToLast() {
  const size_t n = pieces_->size();
  if (n == 0) return SetPiece(0);
  SetPiece(n - 1);
  pieces_->SeekToLastIn(piece_, it_.get());
  SkipBackward();
}

void ConcatenatingIterator::Seek(const leveldb::Slice& target) {
  SetPiece(pieces_->Find(target));
  if (it_ != nullptr) it_->Seek(target);
  SkipForward();
}

void ConcatenatingIterator::Next() {
  it_->Next();
  SkipForward();
}

void ConcatenatingIterator::Prev() {
  it_->Prev();
  SkipBackward();
}

void ConcatenatingIterator::SkipForward() {
  // Positioned at or after the current piece's lower bound: an entry the piece does not
  // contain is past its upper bound.
  while (it_ != nullptr) {
    if (it_->Valid() ? pieces_->Contains(piece_, it_->key()) : Failed()) return;
    SetPiece(piece_ + 1);
    if (it_ != nullptr) pieces_->SeekToFirstIn(piece_, it_.get());
  }
}

void ConcatenatingIterator::SkipBackward() {
  while (it_ != nullptr) {
    if (it_->Valid() ? pieces_->Contains(piece_, it_->key()) : Failed()) return;
    if (piece_ == 0) return SetPiece(pieces_->size());
    SetPiece(piece_ - 1);
    pieces_->SeekToLastIn(piece_, it_.get());
  }
}

namespace {

class LevelPieces : public ConcatenatingIterator::Pieces {
 public:
  LevelPieces(const lsm::InternalKeyComparator* icmp, std::shared_ptr<const Version> version,
              int level)
      : icmp_(icmp), version_(std::move(version)), tables_(version_->levels[level]) {}

  size_t size() const override { return tables_.size(); }
  size_t Find(const leveldb::Slice& target) const override {
    // The first table whose largest key is >= target.
    auto it = std::lower_bound(tables_.begin(), tables_.end(), target,
                               [this](const TableRef& t, const leveldb::Slice& k) {
                                 return icmp_->Compare(t->meta().largest, k) < 0;
                               });
    return static_cast<size_t>(it - tables_.begin());
  }
  leveldb::Iterator* Open(size_t i) override {
    auto it = tables_[i]->NewIterator();
    if (!it.ok())
      return leveldb::NewErrorIterator(leveldb::Status::IOError(it.status().ToString()));
    return it.value();
  }
  void SeekToFirstIn(size_t, leveldb::Iterator* it) const override { it->SeekToFirst(); }
  void SeekToLastIn(size_t, leveldb::Iterator* it) const override { it->SeekToLast(); }
  bool Contains(size_t, const leveldb::Slice&) const override { return true; }

 private:
  const lsm::InternalKeyComparator* const icmp_;  // must outlive this
  const std::shared_ptr<const Version> version_;  // keeps the tables alive
  const std::vector<TableRef>& tables_;           // version_'s
};

}  // namespace

leveldb::Iterator* NewLevelIterator(const lsm::InternalKeyComparator* icmp,
                                    std::shared_ptr<const Version> version, int level) {
  return new ConcatenatingIterator(std::make_unique<LevelPieces>(icmp, std::move(version), level));
}

}  // namespace nova::ltc
