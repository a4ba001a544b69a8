#include "common/lsm/readahead_source.h"

#include <algorithm>
#include <cstring>

namespace nova::lsm {

ReadaheadSource::ReadaheadSource(std::unique_ptr<FragmentSource> base, TableLayout layout,
                                 size_t window_bytes)
    : base_(std::move(base)),
      layout_(std::move(layout)),
      window_bytes_(window_bytes),
      windows_(layout_.num_fragments()) {}

uint64_t ReadaheadSource::base_reads() const {
  MutexLock lock(&mu_);
  return base_reads_;
}

leveldb::Status ReadaheadSource::ReadFragment(uint32_t fragment, uint64_t offset, size_t n,
                                              char* scratch, leveldb::Slice* result) {
  MutexLock lock(&mu_);
  if (fragment >= windows_.size()) {
    return leveldb::Status::Corruption("read-ahead: the table has no fragment " +
                                       std::to_string(fragment));
  }
  if (n >= window_bytes_) {  // a window would not help: read it directly
    ++base_reads_;
    leveldb::Status s = base_->ReadFragment(fragment, offset, n, scratch, result);
    if (s.ok() && result->data() != scratch && result->size() == n) {
      std::memcpy(scratch, result->data(), n);
      *result = leveldb::Slice(scratch, n);
    }
    return s;
  }
  Window& w = windows_[fragment];
  const bool inside = !w.bytes.empty() && offset >= w.start &&
                      offset + n <= w.start + w.bytes.size();
  if (!inside) {
    const uint64_t fragment_size = layout_.FragmentSize(fragment);
    if (offset + n > fragment_size) {
      return leveldb::Status::Corruption(
          "read-ahead: reading " + std::to_string(n) + " bytes at " + std::to_string(offset) +
          " of fragment " + std::to_string(fragment) + " of " + std::to_string(fragment_size));
    }
    const auto len = static_cast<size_t>(std::min<uint64_t>(window_bytes_, fragment_size - offset));
    w.bytes.resize(len);
    w.start = offset;
    ++base_reads_;
    leveldb::Slice got;
    leveldb::Status s = base_->ReadFragment(fragment, offset, len, w.bytes.data(), &got);
    if (!s.ok() || got.size() != len) {
      w.bytes.clear();
      if (!s.ok()) return s;
      return leveldb::Status::Corruption("read-ahead: fragment " + std::to_string(fragment) +
                                         " at " + std::to_string(offset),
                                         "read " + std::to_string(got.size()) + " bytes of " +
                                             std::to_string(len));
    }
    if (got.data() != w.bytes.data()) std::memcpy(w.bytes.data(), got.data(), len);
  }
  std::memcpy(scratch, w.bytes.data() + (offset - w.start), n);
  *result = leveldb::Slice(scratch, n);
  return leveldb::Status::OK();
}

}  // namespace nova::lsm
