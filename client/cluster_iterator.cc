#include "client/cluster_iterator.h"

#include <algorithm>

namespace nova::client {

leveldb::Status ToLevelDbStatus(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk:
      return leveldb::Status::OK();
    case Status::Code::kNotFound:
      return leveldb::Status::NotFound(s.message());
    case Status::Code::kCorruption:
      return leveldb::Status::Corruption(s.message());
    case Status::Code::kNotSupported:
      return leveldb::Status::NotSupported(s.message());
    case Status::Code::kInvalidArgument:
      return leveldb::Status::InvalidArgument(s.message());
    default:
      return leveldb::Status::IOError(s.ToString());
  }
}

namespace {

// Thread safety: none (leveldb::Iterator's contract: one thread at a time).
class ClusterIterator final : public leveldb::Iterator {
 public:
  ClusterIterator(std::unique_ptr<PageSource> source, size_t page)
      : source_(std::move(source)), page_size_(std::max<size_t>(1, page)) {}

  bool Valid() const override { return pos_ < page_.size(); }

  void SeekToFirst() override { LoadForward(std::string()); }

  void SeekToLast() override { LoadBackward(std::string()); }

  void Seek(const leveldb::Slice& target) override { LoadForward(target.ToString()); }

  void Next() override {
    if (!Valid()) return;  // leveldb REQUIRES Valid(); be lenient rather than crash
    if (++pos_ < page_.size()) return;
    if (!more_after_) return Clear();
    // The smallest key after the last one seen.
    LoadForward(page_.back().first + '\0');
  }

  void Prev() override {
    if (!Valid()) return;
    if (pos_ > 0) {
      --pos_;
      return;
    }
    if (!more_before_) return Clear();
    LoadBackward(page_.front().first);
  }

  leveldb::Slice key() const override { return page_[pos_].first; }
  leveldb::Slice value() const override { return page_[pos_].second; }
  leveldb::Status status() const override { return status_; }

 private:
  // Off either end, as leveldb's Next from the last key or Prev from the first.
  void Clear() {
    page_.clear();
    pos_ = 0;
  }

  void Invalidate(const Status& s) {
    Clear();
    status_ = ToLevelDbStatus(s);
  }

  // Loads the pairs with key >= start and points at the first.
  void LoadForward(const std::string& start) {
    std::vector<KeyValue> page;
    bool exhausted = false;
    Status s = source_->Forward(start, page_size_, &page, &exhausted);
    if (!s.ok()) return Invalidate(s.Prepend("iterator: forward page"));
    status_ = leveldb::Status::OK();
    page_ = std::move(page);
    pos_ = 0;
    more_after_ = !exhausted;
    more_before_ = !start.empty();  // nothing is below the empty key
  }

  // Loads the largest keys < before (all keys when empty) and points at the last of them.
  void LoadBackward(const std::string& before) {
    std::vector<KeyValue> page;
    bool exhausted = false;
    Status s = source_->Backward(before, page_size_, &page, &exhausted);
    if (!s.ok()) return Invalidate(s.Prepend("iterator: backward page"));
    status_ = leveldb::Status::OK();
    page_.assign(std::make_move_iterator(page.rbegin()), std::make_move_iterator(page.rend()));
    pos_ = page_.empty() ? 0 : page_.size() - 1;
    more_before_ = !exhausted;
    more_after_ = !before.empty();  // from the end: nothing follows the last key
  }

  const std::unique_ptr<PageSource> source_;
  const size_t page_size_;
  std::vector<KeyValue> page_;  // ascending; the current pair is page_[pos_]
  size_t pos_ = 0;              // Valid() iff pos_ < page_.size()
  // Whether keys may lie after page_.back() / before page_.front() (false: the page
  // reached that end of the key space, and stepping off it needs no request).
  bool more_after_ = true;
  bool more_before_ = true;
  leveldb::Status status_;
};

}  // namespace

leveldb::Iterator* NewClusterIterator(std::unique_ptr<PageSource> source, size_t page) {
  return new ClusterIterator(std::move(source), page);
}

}  // namespace nova::client
