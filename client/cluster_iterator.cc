#include "client/cluster_iterator.h"

#include <algorithm>
#include <deque>

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

class ClusterIterator final : public leveldb::Iterator {
 public:
  ClusterIterator(std::unique_ptr<PageSource> source, size_t page)
      : source_(std::move(source)), page_size_(std::max<size_t>(1, page)) {}

  bool Valid() const override { return pos_ < page_.size(); }

  void SeekToFirst() override { Seek(leveldb::Slice()); }

  void SeekToLast() override { LoadBackward(nullptr); }

  void Seek(const leveldb::Slice& target) override { LoadForward(target.ToString()); }

  void Next() override {
    if (!Valid()) return;  // leveldb REQUIRES Valid(); be lenient rather than crash
    if (++pos_ < page_.size()) return;
    // The smallest key after the last one seen.
    LoadForward(page_.back().first + '\0');
  }

  void Prev() override {
    if (!Valid()) return;
    if (pos_ > 0) {
      --pos_;
      return;
    }
    const std::string before = page_.front().first;
    LoadBackward(&before);
  }

  leveldb::Slice key() const override { return page_[pos_].first; }
  leveldb::Slice value() const override { return page_[pos_].second; }
  leveldb::Status status() const override { return status_; }

 private:
  void Invalidate(const Status& s) {
    page_.clear();
    pos_ = 0;
    status_ = ToLevelDbStatus(s);
  }

  void LoadForward(const std::string& start) {
    std::vector<KeyValue> page;
    bool exhausted = false;
    Status s = source_->Forward(start, page_size_, &page, &exhausted);
    if (!s.ok()) return Invalidate(s.Prepend("iterator: forward page"));
    status_ = leveldb::Status::OK();
    page_ = std::move(page);
    pos_ = 0;
  }

  // Loads up to page_size_ of the largest keys < *before (all keys when null) and points
  // at the last of them.
  void LoadBackward(const std::string* before) {
    const std::vector<std::string> starts = source_->RangeStarts();
    // The range holding `before` (or the last range): the nearest keys below it are there
    // or in earlier ranges.
    size_t i = starts.size();
    if (before != nullptr) {
      i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), *before) -
                              starts.begin());
    }
    for (; i > 0; --i) {
      std::deque<KeyValue> tail;  // the last page_size_ keys below `before` seen so far
      std::string pos = starts[i - 1];
      for (bool done = false; !done;) {
        std::vector<KeyValue> page;
        bool exhausted = false;
        Status s = source_->Forward(pos, page_size_, &page, &exhausted);
        if (!s.ok()) return Invalidate(s.Prepend("iterator: backward page"));
        for (KeyValue& kv : page) {
          if (before != nullptr && kv.first >= *before) {
            done = true;
            break;
          }
          tail.push_back(std::move(kv));
          if (tail.size() > page_size_) tail.pop_front();
        }
        if (exhausted || page.empty()) done = true;
        if (!done) pos = tail.back().first + '\0';
      }
      if (!tail.empty()) {
        status_ = leveldb::Status::OK();
        page_.assign(std::make_move_iterator(tail.begin()), std::make_move_iterator(tail.end()));
        pos_ = page_.size() - 1;
        return;
      }
    }
    // Nothing below `before`: off the front, as leveldb's Prev from the first key.
    status_ = leveldb::Status::OK();
    page_.clear();
    pos_ = 0;
  }

  const std::unique_ptr<PageSource> source_;
  const size_t page_size_;
  std::vector<KeyValue> page_;  // ascending; the current pair is page_[pos_]
  size_t pos_ = 0;              // Valid() iff pos_ < page_.size()
  leveldb::Status status_;
};

}  // namespace

leveldb::Iterator* NewClusterIterator(std::unique_ptr<PageSource> source, size_t page) {
  return new ClusterIterator(std::move(source), page);
}

}  // namespace nova::client
