#include "common/lsm/user_iterator.h"

#include "common/lsm/leveldb_glue.h"

#include <memory>
#include <string>

namespace nova::lsm {
namespace {

// Position invariants between calls, while valid_:
//   1. Forward: internal_ is at the entry yielded: the newest version of key() with
//      sequence <= snapshot_, and it is a value. key()/value() read it in place.
//   2. Reverse: internal_ is before every entry of key() (at the last entry of the previous
//      user key, or not Valid() if there is none); key() and value() are copies held in
//      saved_key_ and saved_value_.
// When !valid_ after an error, status_ or internal_->status() says why.
class UserIterator final : public leveldb::Iterator {
 public:
  UserIterator(const InternalKeyComparator* icmp, leveldb::Iterator* internal,
               SequenceNumber snapshot)
      : ucmp_(icmp->user_comparator()), internal_(internal), snapshot_(snapshot) {}

  bool Valid() const override { return valid_; }

  leveldb::Slice key() const override {
    if (direction_ == Direction::kForward) return ExtractUserKey(internal_->key());
    return saved_key_;
  }

  leveldb::Slice value() const override {
    if (direction_ == Direction::kForward) return internal_->value();
    return saved_value_;
  }

  leveldb::Status status() const override {
    if (!status_.ok()) return status_;
    return internal_->status();
  }

  void SeekToFirst() override {
    if (Failed()) return;
    direction_ = Direction::kForward;
    internal_->SeekToFirst();
    FindNextUserEntry(/*skipping=*/false);
  }

  void SeekToLast() override {
    if (Failed()) return;
    direction_ = Direction::kReverse;
    internal_->SeekToLast();
    FindPrevUserEntry();
  }

  void Seek(const leveldb::Slice& target) override {
    if (Failed()) return;
    direction_ = Direction::kForward;
    // Versions newer than the snapshot sort before this target and are never met.
    saved_key_.clear();
    AppendInternalKey(&saved_key_, target, snapshot_, kTypeForSeek);
    internal_->Seek(saved_key_);
    FindNextUserEntry(/*skipping=*/false);
  }

  void Next() override {
    if (Failed()) return;
    if (direction_ == Direction::kReverse) {
      // internal_ is before the entries of saved_key_ (invariant 2): step onto them, then
      // skip them like any other current key.
      direction_ = Direction::kForward;
      if (internal_->Valid()) {
        internal_->Next();
      } else if (internal_->status().ok()) {
        internal_->SeekToFirst();
      } else {
        valid_ = false;
        return;
      }
    } else {
      const leveldb::Slice current = ExtractUserKey(internal_->key());
      saved_key_.assign(current.data(), current.size());
      internal_->Next();
    }
    FindNextUserEntry(/*skipping=*/true);
  }

  void Prev() override {
    if (Failed()) return;
    if (direction_ == Direction::kForward) {
      // Step off the current entry. The entries of its key before it are newer than the
      // snapshot (it is the newest visible one), so FindPrevUserEntry reads them as a
      // group without a visible value and moves on to the previous key.
      direction_ = Direction::kReverse;
      internal_->Prev();
    }
    FindPrevUserEntry();
  }

 private:
  enum class Direction { kForward, kReverse };

  // A sticky corruption makes every positioning call a no-op that leaves !Valid().
  bool Failed() {
    if (status_.ok()) return false;
    valid_ = false;
    return true;
  }

  // Parses internal_'s current key. On failure records a Corruption and returns false.
  bool ParseCurrent(ParsedInternalKey* p) {
    const leveldb::Slice k = internal_->key();
    if (ParseInternalKey(k, p)) return true;
    status_ = leveldb::Status::Corruption("malformed internal key",
                                          std::to_string(k.size()) + " bytes: " + EscapeKeyForMessage(k));
    valid_ = false;
    return false;
  }

  // Forward scan from internal_'s position to the next yielded entry (invariant 1). With
  // `skipping`, entries of user keys <= saved_key_ are passed over.
  void FindNextUserEntry(bool skipping) {
    for (; internal_->Valid(); internal_->Next()) {
      ParsedInternalKey p;
      if (!ParseCurrent(&p)) return;
      if (p.sequence > snapshot_) continue;
      if (skipping && ucmp_->Compare(p.user_key, saved_key_) <= 0) continue;
      // The newest visible version of a new user key.
      if (p.type == kTypeValue) {
        valid_ = true;
        return;
      }
      saved_key_.assign(p.user_key.data(), p.user_key.size());  // deleted: skip the rest
      skipping = true;
    }
    valid_ = false;
  }

  // Backward scan from internal_'s position (the last entry of some user key, or not
  // Valid()) to the previous yielded key (invariant 2). Each user key's versions are read
  // oldest first; the last visible one seen decides.
  void FindPrevUserEntry() {
    while (internal_->Valid()) {
      ParsedInternalKey p;
      if (!ParseCurrent(&p)) return;
      saved_key_.assign(p.user_key.data(), p.user_key.size());
      bool visible_value = false;
      while (true) {
        if (p.sequence <= snapshot_) {
          visible_value = (p.type == kTypeValue);
          if (visible_value) {
            const leveldb::Slice v = internal_->value();
            saved_value_.assign(v.data(), v.size());
          }
        }
        internal_->Prev();
        if (!internal_->Valid()) break;
        if (!ParseCurrent(&p)) return;
        if (ucmp_->Compare(p.user_key, saved_key_) != 0) break;
      }
      if (!internal_->Valid() && !internal_->status().ok()) break;  // group only partly read
      if (visible_value) {
        valid_ = true;
        return;
      }
    }
    valid_ = false;
  }

  const leveldb::Comparator* const ucmp_;  // must outlive this
  const std::unique_ptr<leveldb::Iterator> internal_;
  const SequenceNumber snapshot_;
  Direction direction_ = Direction::kForward;
  bool valid_ = false;
  leveldb::Status status_;   // sticky Corruption of a malformed internal key
  std::string saved_key_;    // reverse: key(); forward: the user key being skipped
  std::string saved_value_;  // reverse: value()
};

}  // namespace

leveldb::Iterator* NewUserIterator(const InternalKeyComparator* icmp, leveldb::Iterator* internal,
                                   SequenceNumber snapshot) {
  return new UserIterator(icmp, internal, snapshot);
}

}  // namespace nova::lsm
