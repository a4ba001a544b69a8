// User iterator: what a reader sees of an LSM-tree at a snapshot.
//
// The LSM-tree stores versions: internal keys (user key, sequence, type; see
// internal_key.h) in internal key order. A reader at snapshot S sees, for every user key,
// the newest version with sequence <= S, and sees the key only if that version is a value
// (not a deletion). NewUserIterator turns an internal iterator (typically a merging
// iterator over memtables and tables) into that view.
//
// Thread safety: as leveldb::Iterator: const methods may be called concurrently, anything
// else needs external synchronization.
#pragma once

#include <leveldb/iterator.h>

#include "common/lsm/internal_key.h"

namespace nova::lsm {

// Returns an iterator over the user's view of `internal` at `snapshot`:
//   - key() is a user key, value() its value; keys are in user-comparator order;
//   - versions newer than `snapshot`, versions shadowed by a newer visible one, and keys
//     whose newest visible version is a deletion are hidden;
//   - Seek(target) takes a user key and finds the first visible user key >= target;
//   - Next() and Prev() may be mixed freely.
// Pass kMaxSequenceNumber to read the latest data.
//
// Ownership: takes ownership of `internal`; caller deletes the result. `icmp` (and its user
// comparator) must outlive the result.
//
// Errors: an internal key that does not parse (too short, unknown type) makes the iterator
// invalid with a Corruption status() for the rest of its life; it is never skipped
// silently. An error of `internal` is returned by status() and ends the iteration: no
// value is yielded from a partly read group of versions.
//
// Cost: going forward the current entry is read in place; going backward the current key
// and value are copied (versions of a key are met oldest first, so the visible one is
// only known once the whole group has been read).
leveldb::Iterator* NewUserIterator(const InternalKeyComparator* icmp, leveldb::Iterator* internal,
                                   SequenceNumber snapshot);

}  // namespace nova::lsm
