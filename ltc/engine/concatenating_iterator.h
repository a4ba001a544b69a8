// Concatenating iterators: one sorted stream read from an ordered list of disjoint pieces,
// opening only the piece it is in (LevelDB's two-level iterator over a level's files).
//
//  - NewLevelIterator: the tables of one sorted level (Levels 1..6: non-overlapping, in key
//    order). A table is opened when the iterator reaches it, not when the iterator is made,
//    so a short scan of a large level reads one or two tables.
//  - ConcatenatingIterator with a Pieces implementation: anything cut into key intervals
//    whose piece iterators may hold keys outside their interval (the range index's
//    partitions, range_index_iterator.h): entries outside the current piece's interval are
//    skipped, so each entry is yielded once, by the piece whose interval holds it.
//
// All of these iterate internal keys (common/lsm/internal_key.h) and support the whole
// leveldb::Iterator contract (Seek, SeekToFirst, SeekToLast, Next, Prev, mixed freely).
// Errors: a piece that cannot be opened or fails while read stops the iteration (Valid()
// false) and its status is returned by status(); nothing after it is yielded.
//
// Thread safety: as leveldb::Iterator (one thread at a time).
#pragma once

#include <cstddef>
#include <memory>

#include <leveldb/iterator.h>

#include "common/lsm/internal_key.h"
#include "ltc/engine/version.h"

namespace nova::ltc {

class ConcatenatingIterator : public leveldb::Iterator {
 public:
  // The pieces, in key order; intervals disjoint.
  class Pieces {
   public:
    virtual ~Pieces() = default;
    virtual size_t size() const = 0;
    // The first piece that may hold an entry >= `target` (an internal key); size() if none.
    virtual size_t Find(const leveldb::Slice& target) const = 0;
    // A new iterator over piece i (the caller deletes it); never null (an error iterator if
    // the piece cannot be opened).
    virtual leveldb::Iterator* Open(size_t i) = 0;
    // Positions `it` (piece i's) at its first entry inside piece i's interval, or at an entry
    // past the interval, or invalid.
    virtual void SeekToFirstIn(size_t i, leveldb::Iterator* it) const = 0;
    // Positions `it` at its last entry inside piece i's interval, or at an entry before the
    // interval, or invalid.
    virtual void SeekToLastIn(size_t i, leveldb::Iterator* it) const = 0;
    // True if internal key `key` lies in piece i's interval.
    virtual bool Contains(size_t i, const leveldb::Slice& key) const = 0;
  };

  explicit ConcatenatingIterator(std::unique_ptr<Pieces> pieces);
  ~ConcatenatingIterator() override;

  bool Valid() const override;
  void SeekToFirst() override;
  void SeekToLast() override;
  void Seek(const leveldb::Slice& target) override;
  void Next() override;
  void Prev() override;
  leveldb::Slice key() const override { return it_->key(); }
  leveldb::Slice value() const override { return it_->value(); }
  leveldb::Status status() const override;

 private:
  // Makes piece i current (opening it unless it already is); i == size(): none.
  void SetPiece(size_t i);
  // After a forward move: on to the next pieces until positioned inside one (or the end).
  void SkipForward();
  // After a backward move: back to the previous pieces likewise.
  void SkipBackward();
  // The current piece's iterator stopped with an error: keep it (status() reports it).
  bool Failed() const { return it_ != nullptr && !it_->Valid() && !it_->status().ok(); }

  std::unique_ptr<Pieces> pieces_;
  size_t piece_ = 0;
  std::unique_ptr<leveldb::Iterator> it_;  // piece_'s iterator, or null
  leveldb::Status status_;                 // an error of a piece no longer current
};

// An iterator over the tables of `level` of `version` (REQUIRES: level >= 1, whose tables
// are sorted and non-overlapping). `icmp` must outlive it; it holds `version`.
leveldb::Iterator* NewLevelIterator(const lsm::InternalKeyComparator* icmp,
                                    std::shared_ptr<const Version> version, int level);

}  // namespace nova::ltc
