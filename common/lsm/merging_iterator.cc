#include "common/lsm/merging_iterator.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

namespace nova::lsm {
namespace {

// Children are ordered by (key, child index): ascending going forward, descending going
// backward. Invariants between calls, while the iterator is Valid():
//   1. heap_ holds the indices of the Valid() children, and heap_[0] is the current one.
//   2. Forward: every other child is at its first entry after (key(), current index);
//      Reverse: every other child is at its last entry before (key(), current index).
//   3. No child has failed: once one is seen to, heap_ is emptied (header, "Errors").
class MergingIterator final : public leveldb::Iterator {
 public:
  MergingIterator(const leveldb::Comparator* cmp, std::vector<leveldb::Iterator*> children,
                  ThreadPool* seek_pool)
      : cmp_(cmp), seek_pool_(seek_pool) {
    children_.reserve(children.size());
    for (leveldb::Iterator* c : children) children_.emplace_back(c);
    heap_.reserve(children_.size());
  }

  bool Valid() const override { return !heap_.empty(); }

  void SeekToFirst() override {
    PositionEach([](leveldb::Iterator* c) { c->SeekToFirst(); });
    direction_ = Direction::kForward;
    RebuildHeap();
  }

  void SeekToLast() override {
    PositionEach([](leveldb::Iterator* c) { c->SeekToLast(); });
    direction_ = Direction::kReverse;
    RebuildHeap();
  }

  void Seek(const leveldb::Slice& target) override {
    PositionEach([&target](leveldb::Iterator* c) { c->Seek(target); });
    direction_ = Direction::kForward;
    RebuildHeap();
  }

  void Next() override {
    if (direction_ == Direction::kReverse) {
      SwitchDirection(Direction::kForward);
      return;
    }
    children_[heap_[0]]->Next();
    FixTop();
  }

  void Prev() override {
    if (direction_ == Direction::kForward) {
      SwitchDirection(Direction::kReverse);
      return;
    }
    children_[heap_[0]]->Prev();
    FixTop();
  }

  leveldb::Slice key() const override { return children_[heap_[0]]->key(); }
  leveldb::Slice value() const override { return children_[heap_[0]]->value(); }

  leveldb::Status status() const override {
    for (const auto& c : children_) {
      leveldb::Status s = c->status();
      if (!s.ok()) return s;
    }
    return leveldb::Status::OK();
  }

 private:
  enum class Direction { kForward, kReverse };

  // Applies `position` to every child: one after another, or concurrently through
  // seek_pool_ (each child on one thread at a time, so no child is shared).
  template <typename F>
  void PositionEach(const F& position) {
    if (seek_pool_ == nullptr) {
      for (auto& c : children_) position(c.get());
      return;
    }
    std::vector<std::function<void()>> jobs;
    jobs.reserve(children_.size());
    for (auto& c : children_) jobs.push_back([&position, it = c.get()] { position(it); });
    RunAll(seek_pool_, jobs);
  }

  // True if child `a` is yielded before child `b` in the current direction.
  // REQUIRES: both are Valid().
  bool Before(size_t a, size_t b) const {
    const int r = cmp_->Compare(children_[a]->key(), children_[b]->key());
    if (direction_ == Direction::kForward) return r < 0 || (r == 0 && a < b);
    return r > 0 || (r == 0 && a > b);
  }

  void SiftDown(size_t pos) {
    const size_t n = heap_.size();
    const size_t moving = heap_[pos];
    while (true) {
      size_t best = 2 * pos + 1;
      if (best >= n) break;
      if (best + 1 < n && Before(heap_[best + 1], heap_[best])) ++best;
      if (!Before(heap_[best], moving)) break;
      heap_[pos] = heap_[best];
      pos = best;
    }
    heap_[pos] = moving;
  }

  // The current child has moved one step: restore invariant 1.
  void FixTop() {
    leveldb::Iterator* top = children_[heap_[0]].get();
    if (top->Valid()) {
      SiftDown(0);
    } else if (!top->status().ok()) {
      heap_.clear();  // a failed child ends the merged stream (header, "Errors")
    } else {
      heap_[0] = heap_.back();
      heap_.pop_back();
      if (!heap_.empty()) SiftDown(0);
    }
  }

  // Every child has been repositioned: rebuild heap_ from scratch (bottom-up, O(n)).
  void RebuildHeap() {
    heap_.clear();
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i]->Valid()) {
        heap_.push_back(i);
      } else if (!children_[i]->status().ok()) {
        heap_.clear();
        return;
      }
    }
    for (size_t i = heap_.size() / 2; i-- > 0;) SiftDown(i);
  }

  // Re-establishes invariant 2 for the new direction around the current entry (key k from
  // child c), then steps child c past k in the new direction.
  void SwitchDirection(Direction to) {
    const size_t c = heap_[0];
    leveldb::Iterator* cur = children_[c].get();
    const leveldb::Slice k = cur->key();  // stays valid: `cur` is not moved until the end
    for (size_t i = 0; i < children_.size(); ++i) {
      if (i == c) continue;
      leveldb::Iterator* it = children_[i].get();
      it->Seek(k);
      // Entries equal to k in a lower-indexed child come before the current one.
      if (i < c) {
        while (it->Valid() && cmp_->Compare(it->key(), k) == 0) it->Next();
      }
      if (to == Direction::kReverse) {
        // Step back onto the last entry before (k, c).
        if (it->Valid()) {
          it->Prev();
        } else if (it->status().ok()) {
          it->SeekToLast();
        }
      }
    }
    if (to == Direction::kForward) {
      cur->Next();
    } else {
      cur->Prev();
    }
    direction_ = to;
    RebuildHeap();
  }

  const leveldb::Comparator* const cmp_;  // must outlive this
  ThreadPool* const seek_pool_;            // null: children are positioned one by one
  std::vector<std::unique_ptr<leveldb::Iterator>> children_;
  std::vector<size_t> heap_;  // see invariant 1
  Direction direction_ = Direction::kForward;
};

}  // namespace

leveldb::Iterator* NewMergingIterator(const leveldb::Comparator* cmp,
                                      std::vector<leveldb::Iterator*> children,
                                      ThreadPool* seek_pool) {
  if (children.empty()) return leveldb::NewEmptyIterator();
  if (children.size() == 1) return children[0];
  return new MergingIterator(cmp, std::move(children), seek_pool);
}

}  // namespace nova::lsm
