// Merging iterator: several sorted iterators read as one sorted stream.
//
// The LTC merges memtables and tables for reads; compactions (at the LTC or offloaded to a
// StoC) merge their input tables. Both go through NewMergingIterator.
//
// Cost, for n children:
//   - Next() in the forward direction and Prev() in the reverse direction: O(log n)
//     comparisons (a binary heap of children, a min-heap forward and a max-heap backward).
//   - SeekToFirst/SeekToLast/Seek: one seek per child, then O(n) to build the heap. With a
//     seek pool the children seek concurrently (one on the caller, the others on the pool):
//     a seek waits for its slowest child instead of the sum of them all.
//   - Switching direction (Prev() after a forward move, or Next() after a backward one):
//     one Seek (plus a step or two) per child, then O(n) to rebuild the heap. Scans that
//     switch direction at every step therefore cost O(n) per step, as in LevelDB.
//
// Thread safety: as leveldb::Iterator: const methods may be called concurrently, anything
// else needs external synchronization.
#pragma once

#include <leveldb/comparator.h>
#include <leveldb/iterator.h>

#include <vector>

#include "common/thread_pool.h"

namespace nova::lsm {

// Returns an iterator over the union of the entries of `children`, in `cmp` order. Every
// child must yield its entries in `cmp` order. Entries whose keys compare equal are all
// yielded, the one from the lower child index first going forward (and last going
// backward), so Prev() exactly retraces Next().
//
// Ownership: takes ownership of every child (deleted with the result). Caller deletes the
// result. `cmp` must outlive the result. With no child the result is an empty iterator;
// with one child the result is that child itself.
//
// Errors: status() is the first non-OK status among the children, in child order. Once a
// child is seen to fail (it stops being Valid() with a non-OK status), the merged iterator
// stops being Valid() too, instead of carrying on without that child's entries: a reader
// or a compaction never mistakes a partial stream for the whole one.
//
// `seek_pool` (optional, must outlive the result): SeekToFirst, SeekToLast and Seek position
// the children concurrently on it (RunAll). The children must then tolerate being positioned
// on another thread than the one that made them (each is still used by one thread at a
// time). Next, Prev and a change of direction stay on the caller's thread.
leveldb::Iterator* NewMergingIterator(const leveldb::Comparator* cmp,
                                      std::vector<leveldb::Iterator*> children,
                                      ThreadPool* seek_pool = nullptr);

}  // namespace nova::lsm
