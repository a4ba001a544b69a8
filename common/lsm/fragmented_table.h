// Fragmented tables: LevelDB tables scattered over StoCs as fragments (DESIGN.md section 4).
//
// A table is LevelDB's table format, unmodified: built with leveldb::TableBuilder into a
// TableBufferFile and read with leveldb::Table through a FragmentedFile. Its bytes are cut
// into rho + 1 fragments:
//
//   [0, data_end)          the data blocks, cut at block boundaries into rho contiguous
//                          data fragments 0..rho-1, balanced by bytes
//   [data_end, file_size)  the meta part (metaindex block, index block, footer): fragment rho
//
// Invariants the builder guarantees (and fragmented_table_test checks):
//  1. Every data block, with its 5-byte trailer, lies wholly inside one data fragment, so
//     LevelDB reads a block with one fragment read from one StoC.
//  2. The data fragments tile [0, data_end) in order: fragment i ends where fragment
//     i + 1 begins, and the last one ends at data_end.
//  3. A data fragment is empty only when the table has fewer data blocks than rho; then
//     fragments 0..blocks-1 hold one block each and the trailing ones are empty (an empty
//     table has rho empty data fragments). An empty fragment need not be stored anywhere.
//
// Bloom filter: leveldb::Table consults its own filter block only in the private
// Table::InternalGet, so tables are built without one (leveldb::Options::filter_policy =
// nullptr) and the builder makes one whole-table filter over user keys with the public
// FilterPolicy::CreateFilter. The owner keeps it (in memory at the LTC, persisted beside
// the table) and asks TableFilter::KeyMayMatch before seeking the table.
//
// This file knows nothing of StoCs: reads go through the FragmentSource interface, which
// the LTC implements with StoC reads (and tests with memory).
#pragma once

#include <leveldb/cache.h>
#include <leveldb/env.h>
#include <leveldb/filter_policy.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/slice.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/lsm/internal_key.h"
#include "common/status.h"

namespace nova::lsm {

// Bound on rho. Far more StoCs than a deployment scatters one table over; it bounds what
// DecodeFrom allocates for a damaged layout.
constexpr uint32_t kMaxDataFragments = 1024;

// Where each fragment of a table lies in the table's logical byte range.
//
// Encoding (DO NOT CHANGE: persisted in the MANIFEST), integers from common/coding.h:
//
//   layout := version u8 (= kTableLayoutVersion) | file_size varint64 | data_end varint64
//             | rho varint32 | delta varint64 * (rho - 1)
//   delta_i = fragment_starts[i] - fragment_starts[i - 1] for i = 1..rho-1
//   (fragment_starts[0] is always 0 and is not stored)
//
// Thread safety: a value; const methods may be called concurrently.
struct TableLayout {
  static constexpr uint8_t kTableLayoutVersion = 1;  // DO NOT CHANGE: persisted

  uint64_t file_size = 0;  // bytes of the whole table
  uint64_t data_end = 0;   // end of the data blocks = start of the meta fragment
  // Start of each data fragment 0..rho-1: fragment_starts[0] == 0, non-decreasing,
  // every start <= data_end. Equal neighbours mean an empty fragment.
  std::vector<uint64_t> fragment_starts;

  // OK if the invariants above hold, 1 <= rho <= kMaxDataFragments and
  // data_end <= file_size; else Corruption saying which one fails.
  Status Validate() const;

  // The accessors below REQUIRE Validate().ok().
  // rho.
  uint32_t num_data_fragments() const { return static_cast<uint32_t>(fragment_starts.size()); }
  // rho + 1: the data fragments and the meta fragment.
  uint32_t num_fragments() const { return num_data_fragments() + 1; }
  // Index of the meta fragment: rho.
  uint32_t meta_fragment() const { return num_data_fragments(); }
  // First logical byte of fragment i. REQUIRES: i < num_fragments().
  uint64_t FragmentStart(uint32_t i) const;
  // Bytes of fragment i (0 for an empty one). REQUIRES: i < num_fragments().
  uint64_t FragmentSize(uint32_t i) const;
  // Returns the fragment holding logical byte `offset` (never an empty fragment), or -1
  // if offset >= file_size.
  int FragmentOf(uint64_t offset) const;

  // Appends the encoding described above to *dst. REQUIRES: Validate().ok().
  void EncodeTo(std::string* dst) const;
  // Parses a layout from the front of *input and advances it past the layout. On a
  // truncated, malformed or invalid (Validate) encoding, or an unknown version, returns
  // Corruption and leaves *input and *out unchanged. Lengths and counts read are checked
  // against the remaining input before anything is allocated.
  static Status DecodeFrom(std::string_view* input, TableLayout* out);

  bool operator==(const TableLayout&) const = default;
};

// A leveldb::WritableFile that keeps the whole table in memory and records the offset at
// which each Append began. TableBuilder appends each block's contents and its trailer with
// separate calls, so every block start is among these offsets.
//
// Thread safety: not thread-safe (one TableBuilder writes it).
class TableBufferFile final : public leveldb::WritableFile {
 public:
  TableBufferFile() = default;

  // Appends data. Returns IOError after Close().
  leveldb::Status Append(const leveldb::Slice& data) override;
  // Later Appends fail; contents stay readable.
  leveldb::Status Close() override;
  leveldb::Status Flush() override { return leveldb::Status::OK(); }  // nothing to flush
  leveldb::Status Sync() override { return leveldb::Status::OK(); }   // memory only

  const std::string& contents() const { return contents_; }
  uint64_t size() const { return contents_.size(); }
  // Offset of each Append, in call order (an empty Append records its offset too).
  const std::vector<uint64_t>& append_offsets() const { return append_offsets_; }
  // Moves the contents out, leaving the file empty.
  std::string ReleaseContents() { return std::exchange(contents_, std::string()); }

 private:
  std::string contents_;
  std::vector<uint64_t> append_offsets_;
  bool closed_ = false;
};

// How FragmentedTableBuilder builds a table.
struct TableBuildOptions {
  // Uncompressed bytes of entries per data block (leveldb::Options::block_size).
  size_t block_size = 4096;
  // Entries between restart points in a block (leveldb::Options::block_restart_interval).
  int block_restart_interval = 16;
  // kNoCompression or kSnappyCompression. LevelDB stores a block uncompressed when snappy
  // is unavailable or does not pay, so both kinds of block may occur in one table.
  leveldb::CompressionType compression = leveldb::kNoCompression;
  // rho: data fragments the data blocks are cut into. 1..kMaxDataFragments.
  uint32_t num_data_fragments = 1;
  // Policy of the whole-table filter over user keys, e.g. leveldb::NewBloomFilterPolicy(10).
  // Null: no filter (BuiltTable::filter is empty). Must outlive the builder.
  const leveldb::FilterPolicy* filter_policy = nullptr;

  // OK, or InvalidArgument naming the field out of range.
  Status Validate() const;
};

// A finished table: its bytes and what the owner keeps about it.
struct BuiltTable {
  std::string contents;  // the whole table, file_size bytes
  TableLayout layout;    // how contents are cut into fragments
  std::string smallest;  // first internal key; empty if num_entries == 0
  std::string largest;   // last internal key; empty if num_entries == 0
  uint64_t num_entries = 0;
  // Whole-table filter over the distinct user keys, made by TableBuildOptions::filter_policy;
  // empty if that was null. Read it back with TableFilter and the same policy.
  std::string filter;

  // Bytes of fragment i, aliasing `contents`. REQUIRES: i < layout.num_fragments().
  std::string_view Fragment(uint32_t i) const {
    return std::string_view(contents).substr(layout.FragmentStart(i), layout.FragmentSize(i));
  }
};

// Builds a LevelDB table in memory from internal keys in increasing order and cuts it
// into fragments.
//
//   FragmentedTableBuilder b(&icmp, options);
//   for (...) b.Add(internal_key, value);
//   BuiltTable table;
//   Status s = b.Finish(&table);
//
// Errors (invalid options, a key out of order or malformed) are kept and returned by
// Finish; Add calls after an error are ignored. The whole table is held in memory until
// Finish moves it out.
//
// Thread safety: not thread-safe; const methods may run concurrently with each other.
class FragmentedTableBuilder {
 public:
  // `icmp` must outlive the builder; so must options.filter_policy.
  FragmentedTableBuilder(const InternalKeyComparator* icmp, const TableBuildOptions& options);
  ~FragmentedTableBuilder();  // abandons an unfinished table
  FragmentedTableBuilder(const FragmentedTableBuilder&) = delete;
  FragmentedTableBuilder& operator=(const FragmentedTableBuilder&) = delete;

  // Adds an entry. A malformed internal key, or one not strictly after the previous key
  // in icmp's order, makes Finish return InvalidArgument.
  // REQUIRES: Finish() has not been called.
  void Add(const leveldb::Slice& internal_key, const leveldb::Slice& value);

  // Entries added so far.
  uint64_t NumEntries() const { return num_entries_; }
  // Bytes written so far; excludes the data block being filled and the meta part, so
  // it is a lower bound on the final size (for cutting tables at a target size).
  uint64_t FileSize() const { return file_.size(); }

  // Finishes the table and moves it into *out. Returns OK, or the first error seen:
  // InvalidArgument for bad options or input, IllegalState if called twice or if
  // TableBuilder's writes no longer look like whole blocks (then nothing is cut blindly).
  // *out is unspecified on failure.
  Status Finish(BuiltTable* out);

 private:
  // Splits [0, data_end) into data blocks from the Appends recorded before Finish.
  Status FindDataBlocks(size_t num_data_appends, uint64_t data_end,
                        std::vector<uint64_t>* block_starts) const;

  // Constant after construction.
  const InternalKeyComparator* const icmp_;  // must outlive this
  const TableBuildOptions options_;

  Status status_;  // first error; once set, Add does nothing
  bool finished_ = false;
  TableBufferFile file_;                            // declared before builder_, which writes to it
  std::unique_ptr<leveldb::TableBuilder> builder_;  // null if the options are invalid
  uint64_t num_entries_ = 0;
  std::string smallest_;
  std::string last_key_;
  // Distinct user keys for the filter: concatenated, with each one's start offset.
  std::string filter_keys_;
  std::vector<size_t> filter_key_starts_;
};

// Serves a table's fragments: the LTC implements it with reads from the StoCs holding
// them (any replica, or a parity reconstruction); tests with memory.
//
// Thread safety: implementations must allow concurrent calls, because a leveldb::Table
// reads from any thread that uses it.
class FragmentSource {
 public:
  virtual ~FragmentSource() = default;

  // Reads n bytes at `offset` within fragment `fragment` (0..rho-1 data, rho meta).
  // On success sets *result to the n bytes, either in scratch[0, n) or in memory of the
  // source's that stays valid and unchanged while any leveldb::Table reading through it
  // is open (LevelDB then uses such a block in place and does not cache it). Any other
  // size is reported as Corruption by FragmentedFile. Returns a non-OK status on failure.
  // REQUIRES: offset + n <= the fragment's size (FragmentedFile never asks for more).
  virtual leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                                       leveldb::Slice* result) = 0;
};

// A leveldb::RandomAccessFile over the logical byte range of a fragmented table: each
// read is served by the fragments it touches, one ReadFragment call per fragment (a data
// block read touches one; an arbitrary read may span several, whose pieces are copied
// into scratch).
//
// Thread safety: Read may be called concurrently (if the source allows it, as required).
class FragmentedFile final : public leveldb::RandomAccessFile {
 public:
  // `source` must outlive this. REQUIRES: layout.Validate().ok().
  FragmentedFile(TableLayout layout, FragmentSource* source)
      : layout_(std::move(layout)), source_(source) {}

  // Reads up to n bytes at `offset`: fewer only at the end of the table (none at or past
  // it). Returns the source's error, or Corruption if a source returns the wrong number
  // of bytes. *result may point into scratch or into the source's memory (see
  // FragmentSource::ReadFragment).
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* scratch) const override;

  const TableLayout& layout() const { return layout_; }

 private:
  // Constant after construction.
  const TableLayout layout_;
  FragmentSource* const source_;  // must outlive this
};

// How OpenTable reads a table.
struct TableReadOptions {
  // Required; the one the table was built with. Must outlive the table.
  const InternalKeyComparator* comparator = nullptr;
  // Cache for data blocks read into scratch; null: no caching. Must outlive the table.
  leveldb::Cache* block_cache = nullptr;
  // Verify the index block's checksum when opening (leveldb::Options::paranoid_checks).
  bool paranoid_checks = false;
};

// An open fragmented table: a leveldb::Table together with the FragmentedFile it reads
// through, which leveldb::Table does not own; destroying this destroys the Table first.
//
// Thread safety: as leveldb::Table, safe for concurrent use.
class FragmentedTable {
 public:
  FragmentedTable(const FragmentedTable&) = delete;
  FragmentedTable& operator=(const FragmentedTable&) = delete;

  // Returns an iterator over the table's entries (internal keys, in icmp order). It is
  // initially invalid. REQUIRES: the iterator is destroyed before this table.
  std::unique_ptr<leveldb::Iterator> NewIterator(const leveldb::ReadOptions& options) const {
    return std::unique_ptr<leveldb::Iterator>(table_->NewIterator(options));
  }

  leveldb::Table* table() const { return table_.get(); }
  const TableLayout& layout() const { return file_->layout(); }
  const InternalKeyComparator* comparator() const { return icmp_; }

 private:
  friend Status OpenTable(const TableReadOptions& options, const TableLayout& layout,
                          FragmentSource* source, std::unique_ptr<FragmentedTable>* out);
  FragmentedTable() = default;

  const InternalKeyComparator* icmp_ = nullptr;  // must outlive this
  std::unique_ptr<FragmentedFile> file_;         // declared before table_: outlives it
  std::unique_ptr<leveldb::Table> table_;
};

// Opens the table described by `layout`, reading its footer and index block through
// `source` (which must outlive *out). On success sets *out and returns OK; returns
// InvalidArgument without a comparator, Corruption for an invalid layout or a damaged
// footer or index, or the source's read error. *out is unchanged on failure.
Status OpenTable(const TableReadOptions& options, const TableLayout& layout, FragmentSource* source,
                 std::unique_ptr<FragmentedTable>* out);

// A table's whole-table filter (BuiltTable::filter) with the policy that made it.
//
// Thread safety: immutable; safe for concurrent use.
class TableFilter {
 public:
  // `policy` must be the policy that built `filter` and must outlive this; null means
  // no filter. An empty `filter` means none was built.
  TableFilter(const leveldb::FilterPolicy* policy, std::string filter)
      : policy_(policy), filter_(std::move(filter)) {}

  // False only if the table certainly has no entry for user_key; true when there is no
  // policy or no filter.
  bool KeyMayMatch(const leveldb::Slice& user_key) const;

  const std::string& filter() const { return filter_; }

 private:
  const leveldb::FilterPolicy* const policy_;  // may be null; must outlive this
  const std::string filter_;
};

enum class TableGetResult {
  kFound,     // a value: *value holds it
  kDeleted,   // a deletion: the key has no value as of the snapshot
  kNotFound,  // no entry of the key with sequence <= snapshot in this table
};

// Point lookup: finds the newest entry of user_key with sequence <= snapshot (snapshots
// above kMaxSequenceNumber act as kMaxSequenceNumber). Asks `filter` first, if non-null,
// and reads nothing when it rules the key out. Returns OK with *result set (and *value
// for kFound), or the read error / Corruption (an unparsable key in the table); *result
// and *value are unspecified on failure.
Status TableGet(const FragmentedTable& table, const leveldb::ReadOptions& options,
                const TableFilter* filter, const leveldb::Slice& user_key, SequenceNumber snapshot,
                std::string* value, TableGetResult* result);

}  // namespace nova::lsm
