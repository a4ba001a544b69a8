// ReadaheadSource: a FragmentSource for reading a table front to back once, as a compaction
// reads its inputs (paper 4.4.3: the compacting StoC pre-fetches its input tables).
//
// A leveldb::Table iterator asks for one data block at a time; over StoCs each of those is
// a round trip (a one-sided READ, or a request to the StoC). This source instead reads
// each fragment of the wrapped source in windows of `window_bytes` and serves the blocks
// inside a window from memory, so a front-to-back pass over a fragment of F bytes takes
// about F / window_bytes reads instead of one per block. Memory stays bounded: one window
// per fragment (rho data fragments and the meta fragment), not the whole table.
//
// A read that does not fit in the current window of its fragment replaces the window with
// one starting at that read (shorter at the fragment's end); a read larger than a window
// goes straight to the wrapped source. Results are always copied into the caller's
// scratch (so LevelDB treats them as its own block reads), never handed out in place.
//
//   auto base = store->OpenTable(meta);                       // per-block reads
//   lsm::ReadaheadSource source(std::move(base.value()), meta.layout, 256 << 10);
//   std::unique_ptr<lsm::FragmentedTable> table;
//   NOVA_RETURN_NOT_OK(lsm::OpenTable(ro, meta.layout, &source, &table));
//
// Thread safety: thread-safe (one mutex; a compaction reads each input from one thread, so
// it is uncontended). Window reads happen under it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/fragmented_table.h"
#include "common/mutex.h"

namespace nova::lsm {

class ReadaheadSource final : public FragmentSource {
 public:
  // Reads through `base`, whose fragments `layout` describes. REQUIRES: base non-null,
  // layout.Validate().ok(), window_bytes > 0.
  ReadaheadSource(std::unique_ptr<FragmentSource> base, TableLayout layout, size_t window_bytes);

  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override;

  // Reads made from the wrapped source so far (tests and statistics).
  uint64_t base_reads() const;

 private:
  struct Window {
    uint64_t start = 0;  // offset of bytes[0] within the fragment
    std::string bytes;   // empty: nothing read yet
  };

  // Constant after construction.
  const std::unique_ptr<FragmentSource> base_;
  const TableLayout layout_;
  const size_t window_bytes_;

  mutable Mutex mu_;
  std::vector<Window> windows_ GUARDED_BY(mu_);  // per fragment
  uint64_t base_reads_ GUARDED_BY(mu_) = 0;
};

}  // namespace nova::lsm
