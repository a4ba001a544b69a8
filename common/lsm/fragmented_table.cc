#include "common/lsm/fragmented_table.h"

#include "common/lsm/leveldb_glue.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::lsm {

namespace {

// Each block in a LevelDB table is followed by a trailer: compression type u8 | masked
// crc32c u32 of the contents and the type byte (LevelDB doc/table_format.md).
// DO NOT CHANGE: LevelDB's persisted format.
constexpr uint64_t kBlockTrailerBytes = 5;


// Chooses where the rho data fragments start among the data blocks' starts (invariants
// 2 and 3 of the header). Each cut goes to the block boundary nearest to an even share
// of the bytes, then is clamped so that this fragment and every later one keep at least
// one block; a single block larger than a share therefore unbalances the cut, it never
// splits.
std::vector<uint64_t> CutDataFragments(const std::vector<uint64_t>& block_starts, uint64_t data_end,
                                       uint32_t rho) {
  const size_t m = block_starts.size();
  std::vector<uint64_t> starts(rho, data_end);
  starts[0] = 0;
  if (m < rho) {
    // One block each for the first m fragments; the rest stay empty at data_end.
    for (size_t i = 0; i < m; ++i) starts[i] = block_starts[i];
    return starts;
  }
  size_t prev = 0;  // index of the block fragment i - 1 starts with
  for (uint32_t i = 1; i < rho; ++i) {
    // 128-bit product: data_end * i cannot overflow.
    const auto target = static_cast<uint64_t>(static_cast<unsigned __int128>(data_end) * i / rho);
    size_t j =
        std::lower_bound(block_starts.begin(), block_starts.end(), target) - block_starts.begin();
    if (j == m || (j > 0 && target - block_starts[j - 1] <= block_starts[j] - target)) --j;
    j = std::clamp(j, prev + 1, m - (rho - i));
    starts[i] = block_starts[j];
    prev = j;
  }
  return starts;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TableLayout

Status TableLayout::Validate() const {
  const size_t rho = fragment_starts.size();
  if (rho == 0 || rho > kMaxDataFragments) {
    return Status::Corruption("table layout: " + std::to_string(rho) +
                              " data fragments, expected 1.." + std::to_string(kMaxDataFragments));
  }
  if (data_end > file_size) {
    return Status::Corruption("table layout: data_end " + std::to_string(data_end) +
                              " past file_size " + std::to_string(file_size));
  }
  if (fragment_starts[0] != 0) return Status::Corruption("table layout: fragment 0 starts past 0");
  for (size_t i = 1; i < rho; ++i) {
    if (fragment_starts[i] < fragment_starts[i - 1]) {
      return Status::Corruption("table layout: fragment " + std::to_string(i) +
                                " starts before fragment " + std::to_string(i - 1));
    }
  }
  if (fragment_starts.back() > data_end) {
    return Status::Corruption("table layout: a data fragment starts past data_end");
  }
  return Status::OK();
}

uint64_t TableLayout::FragmentStart(uint32_t i) const {
  return i < num_data_fragments() ? fragment_starts[i] : data_end;
}

uint64_t TableLayout::FragmentSize(uint32_t i) const {
  const uint32_t rho = num_data_fragments();
  if (i == rho) return file_size - data_end;
  const uint64_t end = i + 1 < rho ? fragment_starts[i + 1] : data_end;
  return end - fragment_starts[i];
}

int TableLayout::FragmentOf(uint64_t offset) const {
  if (offset >= file_size) return -1;
  if (offset >= data_end) return static_cast<int>(meta_fragment());
  // The last fragment starting at or before offset; an empty fragment starts where its
  // successor does, so it is never the last such.
  const auto it = std::upper_bound(fragment_starts.begin(), fragment_starts.end(), offset);
  return static_cast<int>(it - fragment_starts.begin()) - 1;
}

void TableLayout::EncodeTo(std::string* dst) const {
  dst->push_back(static_cast<char>(kTableLayoutVersion));
  PutVarint64(dst, file_size);
  PutVarint64(dst, data_end);
  PutVarint32(dst, num_data_fragments());
  for (size_t i = 1; i < fragment_starts.size(); ++i) {
    PutVarint64(dst, fragment_starts[i] - fragment_starts[i - 1]);
  }
}

Status TableLayout::DecodeFrom(std::string_view* input, TableLayout* out) {
  std::string_view in = *input;
  if (in.empty()) return Status::Corruption("table layout: truncated");
  const auto version = static_cast<uint8_t>(in[0]);
  in.remove_prefix(1);
  if (version != kTableLayoutVersion) {
    return Status::Corruption("table layout: unknown version " + std::to_string(version));
  }
  TableLayout layout;
  uint32_t rho = 0;
  if (!GetVarint64(&in, &layout.file_size) || !GetVarint64(&in, &layout.data_end) ||
      !GetVarint32(&in, &rho)) {
    return Status::Corruption("table layout: truncated");
  }
  if (rho == 0 || rho > kMaxDataFragments) {
    return Status::Corruption("table layout: " + std::to_string(rho) + " data fragments");
  }
  if (in.size() < rho - 1) return Status::Corruption("table layout: truncated");  // >= 1 byte each
  layout.fragment_starts.reserve(rho);
  layout.fragment_starts.push_back(0);
  for (uint32_t i = 1; i < rho; ++i) {
    uint64_t delta = 0;
    if (!GetVarint64(&in, &delta)) return Status::Corruption("table layout: truncated");
    const uint64_t prev = layout.fragment_starts.back();
    if (delta > layout.data_end - prev) {  // prev <= data_end: checked for every delta
      return Status::Corruption("table layout: fragment " + std::to_string(i) +
                                " starts past data_end");
    }
    layout.fragment_starts.push_back(prev + delta);
  }
  NOVA_RETURN_NOT_OK(layout.Validate());
  *out = std::move(layout);
  *input = in;
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// TableBufferFile

leveldb::Status TableBufferFile::Append(const leveldb::Slice& data) {
  if (closed_) return leveldb::Status::IOError("TableBufferFile", "append after Close");
  append_offsets_.push_back(contents_.size());
  contents_.append(data.data(), data.size());
  return leveldb::Status::OK();
}

leveldb::Status TableBufferFile::Close() {
  closed_ = true;
  return leveldb::Status::OK();
}

// ---------------------------------------------------------------------------------------
// FragmentedTableBuilder

Status TableBuildOptions::Validate() const {
  if (block_size == 0) return Status::InvalidArgument("block_size must be positive");
  if (block_restart_interval < 1) {
    return Status::InvalidArgument("block_restart_interval must be at least 1");
  }
  if (compression != leveldb::kNoCompression && compression != leveldb::kSnappyCompression) {
    return Status::InvalidArgument("compression must be none or snappy");
  }
  if (num_data_fragments == 0 || num_data_fragments > kMaxDataFragments) {
    return Status::InvalidArgument("num_data_fragments (rho) must be in 1.." +
                                   std::to_string(kMaxDataFragments));
  }
  return Status::OK();
}

FragmentedTableBuilder::FragmentedTableBuilder(const InternalKeyComparator* icmp,
                                               const TableBuildOptions& options)
    : icmp_(icmp), options_(options), status_(options.Validate()) {
  if (icmp_ == nullptr) status_ = Status::InvalidArgument("no comparator");
  if (!status_.ok()) return;
  leveldb::Options lo;
  lo.comparator = icmp_;
  lo.block_size = options_.block_size;
  lo.block_restart_interval = options_.block_restart_interval;
  lo.compression = options_.compression;
  lo.filter_policy = nullptr;  // unusable through the public API: we build our own filter
  builder_ = std::make_unique<leveldb::TableBuilder>(lo, &file_);
}

FragmentedTableBuilder::~FragmentedTableBuilder() {
  // TableBuilder requires Finish() or Abandon() before destruction.
  if (builder_ != nullptr && !finished_) builder_->Abandon();
}

void FragmentedTableBuilder::Add(const leveldb::Slice& internal_key, const leveldb::Slice& value) {
  if (!status_.ok()) return;
  if (finished_) {
    status_ = Status::IllegalState("FragmentedTableBuilder::Add after Finish");
    return;
  }
  ParsedInternalKey parsed;
  if (!ParseInternalKey(internal_key, &parsed)) {
    status_ =
        Status::InvalidArgument("malformed internal key at entry " + std::to_string(num_entries_));
    return;
  }
  // LevelDB checks the order only with assert(); an unordered table would be silently
  // unreadable, so check here (one comparison per entry).
  if (num_entries_ > 0 && icmp_->Compare(internal_key, last_key_) <= 0) {
    status_ = Status::InvalidArgument("internal key out of order at entry " +
                                      std::to_string(num_entries_));
    return;
  }
  builder_->Add(internal_key, value);
  if (num_entries_ == 0) smallest_.assign(internal_key.data(), internal_key.size());
  last_key_.assign(internal_key.data(), internal_key.size());
  ++num_entries_;

  if (options_.filter_policy != nullptr) {
    // Versions of one user key are adjacent: add each distinct user key once.
    const std::string_view user(parsed.user_key.data(), parsed.user_key.size());
    const bool repeat = !filter_key_starts_.empty() &&
                        std::string_view(filter_keys_).substr(filter_key_starts_.back()) == user;
    if (!repeat) {
      filter_key_starts_.push_back(filter_keys_.size());
      filter_keys_.append(user);
    }
  }
}

// How the data blocks are found, without LevelDB internals:
//  1. Before Finish, TableBuilder writes only data blocks, each as two Appends: the
//     contents, then the kBlockTrailerBytes trailer (the documented table format).
//  2. Finish() writes the last data block together with the meta blocks, so Finish
//     first calls TableBuilder::Flush(); data_end is the size after it.
//  3. Each (contents, trailer) pair is checked: the trailer's CRC must cover the
//     contents. Should a LevelDB version write blocks differently, Finish fails with
//     IllegalState instead of cutting a fragment inside a block.
Status FragmentedTableBuilder::FindDataBlocks(size_t num_data_appends, uint64_t data_end,
                                              std::vector<uint64_t>* block_starts) const {
  const std::vector<uint64_t>& offsets = file_.append_offsets();
  const std::string& contents = file_.contents();
  const auto unexpected = [](const std::string& what) {
    return Status::IllegalState("leveldb::TableBuilder wrote an unexpected data block layout: " +
                                what);
  };
  if (num_data_appends % 2 != 0) return unexpected("odd number of writes");
  if (num_data_appends == 0 && data_end != 0) return unexpected("data without writes");
  block_starts->reserve(num_data_appends / 2);
  for (size_t k = 0; k < num_data_appends; k += 2) {
    const uint64_t block = offsets[k];
    const uint64_t trailer = offsets[k + 1];
    const uint64_t end = k + 2 < num_data_appends ? offsets[k + 2] : data_end;
    if (end < trailer || end - trailer != kBlockTrailerBytes) {
      return unexpected("no trailer after the block at " + std::to_string(block));
    }
    const char* base = contents.data();
    uint32_t crc = crc32c::Value(base + block, trailer - block);
    crc = crc32c::Extend(crc, base + trailer, 1);  // the compression type byte
    if (crc32c::Unmask(DecodeFixed32(base + trailer + 1)) != crc) {
      return unexpected("trailer CRC mismatch for the block at " + std::to_string(block));
    }
    block_starts->push_back(block);
  }
  return Status::OK();
}

Status FragmentedTableBuilder::Finish(BuiltTable* out) {
  if (finished_) return Status::IllegalState("FragmentedTableBuilder::Finish called twice");
  finished_ = true;
  if (!status_.ok()) {
    if (builder_ != nullptr) builder_->Abandon();
    return status_;
  }
  builder_->Flush();  // see FindDataBlocks, step 2
  const uint64_t data_end = file_.size();
  const size_t num_data_appends = file_.append_offsets().size();
  leveldb::Status s = builder_->Finish();
  if (s.ok()) s = file_.Close();
  if (!s.ok()) return FromLevelDbStatus(s).Prepend("building table");

  std::vector<uint64_t> block_starts;
  NOVA_RETURN_NOT_OK(FindDataBlocks(num_data_appends, data_end, &block_starts));
  TableLayout layout;
  layout.file_size = file_.size();
  layout.data_end = data_end;
  layout.fragment_starts = CutDataFragments(block_starts, data_end, options_.num_data_fragments);
  NOVA_RETURN_NOT_OK_PREPEND(layout.Validate(), "cutting table into fragments");

  std::string filter;
  if (options_.filter_policy != nullptr) {
    if (filter_key_starts_.size() > static_cast<size_t>(INT_MAX)) {
      return Status::ResourceExhausted("too many keys for one table filter");
    }
    std::vector<leveldb::Slice> keys;
    keys.reserve(filter_key_starts_.size());
    for (size_t i = 0; i < filter_key_starts_.size(); ++i) {
      const size_t end =
          i + 1 < filter_key_starts_.size() ? filter_key_starts_[i + 1] : filter_keys_.size();
      keys.emplace_back(filter_keys_.data() + filter_key_starts_[i], end - filter_key_starts_[i]);
    }
    options_.filter_policy->CreateFilter(keys.data(), static_cast<int>(keys.size()), &filter);
  }
  filter_keys_.clear();
  filter_keys_.shrink_to_fit();
  filter_key_starts_.clear();
  filter_key_starts_.shrink_to_fit();

  out->contents = file_.ReleaseContents();
  out->layout = std::move(layout);
  out->smallest = std::move(smallest_);
  out->largest = num_entries_ > 0 ? std::move(last_key_) : std::string();
  out->num_entries = num_entries_;
  out->filter = std::move(filter);
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// Reading

leveldb::Status FragmentedFile::Read(uint64_t offset, size_t n, leveldb::Slice* result,
                                     char* scratch) const {
  *result = leveldb::Slice();
  if (offset >= layout_.file_size || n == 0) return leveldb::Status::OK();  // like pread at EOF
  n = static_cast<size_t>(std::min<uint64_t>(n, layout_.file_size - offset));
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = offset + done;
    const auto fragment = static_cast<uint32_t>(layout_.FragmentOf(pos));  // pos < file_size
    const uint64_t start = layout_.FragmentStart(fragment);
    const uint64_t fragment_end = start + layout_.FragmentSize(fragment);
    const auto len = static_cast<size_t>(std::min<uint64_t>(n - done, fragment_end - pos));
    leveldb::Slice piece;
    leveldb::Status s = source_->ReadFragment(fragment, pos - start, len, scratch + done, &piece);
    if (!s.ok()) return s;
    if (piece.size() != len) {
      return leveldb::Status::Corruption(
          "table fragment " + std::to_string(fragment) + " at " + std::to_string(pos - start),
          "read " + std::to_string(piece.size()) + " bytes of " + std::to_string(len));
    }
    if (len == n) {  // the whole read from one fragment: hand its result through
      *result = piece;
      return leveldb::Status::OK();
    }
    if (piece.data() != scratch + done) std::memcpy(scratch + done, piece.data(), len);
    done += len;
  }
  *result = leveldb::Slice(scratch, n);
  return leveldb::Status::OK();
}

Status OpenTable(const TableReadOptions& options, const TableLayout& layout, FragmentSource* source,
                 std::unique_ptr<FragmentedTable>* out) {
  if (options.comparator == nullptr) return Status::InvalidArgument("OpenTable: no comparator");
  NOVA_RETURN_NOT_OK_PREPEND(layout.Validate(), "opening table");
  leveldb::Options lo;
  lo.comparator = options.comparator;
  lo.block_cache = options.block_cache;
  lo.paranoid_checks = options.paranoid_checks;
  lo.filter_policy = nullptr;  // the table has no filter block; skips reading the metaindex
  std::unique_ptr<FragmentedTable> table(new FragmentedTable());
  table->icmp_ = options.comparator;
  table->file_ = std::make_unique<FragmentedFile>(layout, source);
  leveldb::Table* raw = nullptr;
  const leveldb::Status s = leveldb::Table::Open(lo, table->file_.get(), layout.file_size, &raw);
  if (!s.ok()) return FromLevelDbStatus(s).Prepend("opening table");
  table->table_.reset(raw);
  *out = std::move(table);
  return Status::OK();
}

bool TableFilter::KeyMayMatch(const leveldb::Slice& user_key) const {
  if (policy_ == nullptr || filter_.empty()) return true;
  return policy_->KeyMayMatch(user_key, filter_);
}

Status TableGet(const FragmentedTable& table, const leveldb::ReadOptions& options,
                const TableFilter* filter, const leveldb::Slice& user_key, SequenceNumber snapshot,
                std::string* value, TableGetResult* result) {
  if (filter != nullptr && !filter->KeyMayMatch(user_key)) {
    *result = TableGetResult::kNotFound;
    return Status::OK();
  }
  // The seek key sorts before every entry of user_key with sequence <= snapshot and
  // after every newer one, so the first entry at or after it is the one wanted.
  std::string lookup;
  AppendInternalKey(&lookup, user_key, std::min(snapshot, kMaxSequenceNumber), kTypeForSeek);
  std::unique_ptr<leveldb::Iterator> it = table.NewIterator(options);
  it->Seek(lookup);
  // Checked even when Valid(): LevelDB's iterator skips a block it failed to read and
  // reports the failure only through status().
  NOVA_RETURN_NOT_OK_PREPEND(FromLevelDbStatus(it->status()), "table get");
  if (!it->Valid()) {
    *result = TableGetResult::kNotFound;
    return Status::OK();
  }
  ParsedInternalKey parsed;
  if (!ParseInternalKey(it->key(), &parsed)) {
    return Status::Corruption("table get: malformed internal key in table");
  }
  if (table.comparator()->user_comparator()->Compare(parsed.user_key, user_key) != 0) {
    *result = TableGetResult::kNotFound;
    return Status::OK();
  }
  if (parsed.type == kTypeDeletion) {
    *result = TableGetResult::kDeleted;
  } else {
    value->assign(it->value().data(), it->value().size());
    *result = TableGetResult::kFound;
  }
  return Status::OK();
}

}  // namespace nova::lsm
