// The merge step of a compaction: decides which versions survive and how they are cut into
// output tables, independently of where tables live.
//
// The LTC (local compactions) and a StoC (offloaded compactions) both feed a merged
// internal iterator over the input tables into RunCompactionMerge, and plug in their own
// CompactionOutputSink that builds the output tables (FragmentedTableBuilder).
//
// Which versions survive. Let S_1 < ... < S_m be the live snapshots and S_{m+1} = "latest"
// (kMaxSequenceNumber). A reader at S_j sees, for each user key, the newest version with
// sequence <= S_j. Split the sequence numbers into stripes (S_{j-1}, S_j]; then:
//   1. In each stripe only the newest version of a user key can be seen by anyone: it is
//      kept, the older versions in the same stripe are dropped ("shadowed").
//   2. When `bottommost` (no data for these keys lies below the output level), a kept
//      deletion is dropped unless the next older kept version of its key is a value: with
//      nothing (or only another deletion) underneath, every reader sees "not found"
//      without it. Otherwise deletions are always kept: they hide older data below.
//   3. Nothing else is dropped. Malformed or out-of-order input is a Corruption error,
//      never skipped.
//
// How outputs are cut. All versions of one user key go to one output. Before the first
// kept version of a new user key, the current output is finished when
//   - the sink reports CurrentBytes() >= max_output_bytes, or
//   - a split key lies between the previous user key (exclusive) and this one (inclusive),
// so no output holds user keys on both sides of a split key (Drange boundaries).
//
// Thread safety: RunCompactionMerge keeps no state between calls; concurrent calls are safe
// with distinct inputs and sinks.
#pragma once

#include <leveldb/iterator.h>
#include <leveldb/slice.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/lsm/internal_key.h"
#include "common/status.h"

namespace nova::lsm {

// LevelDB's default table size: a reasonable unit of compaction output.
constexpr uint64_t kDefaultMaxOutputBytes = 2ull << 20;

struct CompactionMergeOptions {
  // Orders the input; its user comparator orders split_user_keys. Must outlive the call.
  const InternalKeyComparator* icmp = nullptr;
  // Sequence numbers of the live snapshots, non-decreasing (duplicates are allowed).
  std::vector<SequenceNumber> snapshots;
  // snapshots.front(), or kMaxSequenceNumber when there is none. Redundant with `snapshots`
  // and checked against it (an inconsistent pair is InvalidArgument).
  SequenceNumber smallest_snapshot_or_max = kMaxSequenceNumber;
  // True if no data for the input's user keys exists below the output level, so
  // deletions that hide nothing can be dropped.
  bool bottommost = false;
  // Approximate size of an output, as measured by CompactionOutputSink::CurrentBytes(). An
  // output may exceed it by the versions of its last user key. REQUIRES: > 0.
  uint64_t max_output_bytes = kDefaultMaxOutputBytes;
  // Strictly ascending user keys (user comparator): no output holds a key < k and a
  // key >= k for any k here.
  std::vector<std::string> split_user_keys;
};

struct CompactionStats {
  uint64_t input_entries = 0;
  uint64_t output_entries = 0;
  // input_entries - output_entries after a successful merge: shadowed versions plus
  // dropped deletions.
  uint64_t dropped_entries = 0;
  // Of dropped_entries, deletions dropped because `bottommost` and hiding nothing.
  uint64_t dropped_deletions = 0;
  uint64_t outputs = 0;  // StartOutput() calls that succeeded
};

// Where the surviving entries go; the caller decides how tables are built and stored.
// RunCompactionMerge calls, for each output: StartOutput(), Add() one or more times (in
// increasing internal key order, across outputs too), FinishOutput(). It never starts an
// output it does not add to. Any non-OK Status from the sink aborts the merge and is
// returned (with context).
//
// Thread safety: called from one thread at a time.
class CompactionOutputSink {
 public:
  virtual ~CompactionOutputSink() = default;
  // Opens a new output table.
  virtual Status StartOutput() = 0;
  // Appends an internal key and its value to the open output.
  virtual Status Add(const leveldb::Slice& ikey, const leveldb::Slice& value) = 0;
  // Approximate bytes of the open output so far (e.g. TableBuilder::FileSize()).
  virtual uint64_t CurrentBytes() const = 0;
  // Completes the open output.
  virtual Status FinishOutput() = 0;
};

// Reads `input` (a merged internal iterator; it is sought to its first entry) to its end
// and writes the surviving versions to `sink` (see the file comment).
//
// Returns OK once every output has been finished. On failure returns InvalidArgument (bad
// options), Corruption (malformed or out-of-order input key), the input's error, or the
// sink's error; an output may then have been started and not finished, and the caller
// must discard every output of this run. `stats` (may be null) is filled in either case
// (with the counts reached on failure).
//
// Ownership: borrows `input` and `sink` for the duration of the call.
Status RunCompactionMerge(leveldb::Iterator* input, const CompactionMergeOptions& options,
                          CompactionOutputSink* sink, CompactionStats* stats);

}  // namespace nova::lsm
