// Live migration of a range between LTCs, the engine's part (docs/coordinator.md, "Live
// migration"; paper 4.9).
//
// The source LTC copies a range's memtables to the destination while it keeps serving
// (pre-copy), then stops the range for a short hand-off that copies only what changed, and
// the destination opens the range from the MANIFEST with the copied memtables instead of
// replaying their logs:
//
//   source engine                               destination
//   BeginMigrationOut(): actives become          (fetches each immutable memtable, chunk by
//     immutable, flushes are held                 chunk: EncodeMemtableChunk/DecodeMemtableChunk)
//   ExportImmutables()  ------------------->
//   Handoff(): writes stop for good, every  -->  (fetches the memtables it lacks)
//     memtable and the id bookkeeping            EngineOptions::migrated = the MigratedState;
//   (EndMigrationOut() if the move is undone)    Open() fences, reads the MANIFEST, adopts
//
// Why it loses nothing: a write is acknowledged only after it is in a memtable, and a
// memtable leaves the engine only after the MANIFEST edit recording its table is durable.
// Handoff waits for every write that was given a sequence number, so every acknowledged
// write is in a memtable it returns or in the MANIFEST. The destination fences the StoCs
// before it reads the MANIFEST, so an edit the source writes afterwards either is in what it
// reads (the memtable it replaces is dropped as obsolete, as at recovery) or is refused.
// Memtables copied before a hand-off that never happened are complete in themselves
// (immutable, every write to them finished): the logs of the others are replayed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/lsm/internal_key.h"
#include "common/status.h"
#include "ltc/engine/memtable.h"

namespace nova::ltc {

// One memtable of a moving range (its engine id is mem->id()). At the destination its
// comparator (mem->comparator()) must order by the range's user comparator (Open refuses
// another with InvalidArgument) and outlive the engine that adopts it.
struct MigratedMemtable {
  std::shared_ptr<MemTable> mem;
};

// What a destination opens a range with (EngineOptions::migrated), and what the source's
// Handoff returns.
struct MigratedState {
  // Ascending id, each id once. Open adopts each one whose log the MANIFEST does not mark
  // obsolete, in place of its log (which stays the range's log, listed but not read, until
  // the memtable is flushed); one marked obsolete was flushed (or dropped) at the source
  // after it was copied, and is left out. Without logs the MANIFEST marks them all the same.
  std::vector<MigratedMemtable> memtables;
  // True after a hand-off: `memtables` holds every memtable the source had when it stopped
  // (a log of any other memtable is replayed only for entries of memtables not copied).
  // False: only memtables copied before a hand-off that did not happen (each complete); the
  // logs of all others are replayed as at recovery.
  bool complete = false;
  // The source's id bookkeeping (set only when complete): the next memtable id, memtables
  // merged into another whose logs that one's flush makes obsolete, and logs dropped without
  // a MANIFEST edit yet.
  uint64_t next_memtable_id = 0;
  std::unordered_map<uint64_t, std::vector<uint64_t>> absorbed;
  std::vector<uint64_t> unrecorded_obsolete;
  lsm::SequenceNumber last_sequence = 0;  // the largest sequence the source assigned
};

// The bookkeeping of a MigratedState (everything but the memtables' contents) and the ids
// of its memtables, for the wire. Decode returns Corruption for malformed input.
std::string EncodeMigratedMeta(const MigratedState& state);
// Fills every field but `memtables`; *memtable_ids gets the ids of state.memtables.
Status DecodeMigratedMeta(std::string_view in, MigratedState* state,
                          std::vector<uint64_t>* memtable_ids);

// Encodes the entries of `mem` that follow internal key `after` (empty: from the first) in
// iteration order into *out (replacing it), stopping once it holds about `max_bytes` (at
// least one entry if any is left). *last_key gets the last internal key encoded (the next
// call's `after`), *done whether no entry follows. Entries added to `mem` meanwhile may be
// missed: call it only on a memtable no write is still adding to.
void EncodeMemtableChunk(const MemTable& mem, std::string_view after, size_t max_bytes,
                         std::string* out, std::string* last_key, bool* done);
// Adds the entries of a chunk to `mem`; *entries (not null) counts them. The chunks of a
// memtable must be decoded in order, each once, into a memtable nothing else adds to: an
// entry that does not follow everything `mem` holds is Corruption (a chunk applied twice
// would add entries twice). Corruption for a malformed chunk too (entries decoded before
// the damage stay added).
Status DecodeMemtableChunk(std::string_view chunk, MemTable* mem, uint64_t* entries);

}  // namespace nova::ltc
