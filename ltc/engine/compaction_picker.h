// CompactionPicker: which compaction a range runs next (paper 4.4.3), and which tables the
// running compactions hold.
//
// Scores: each level's actual size over its expected size; the highest goes first, and a
// level whose candidates are all busy yields to the next.
//  - Level 0: a cluster of overlapping tables (each Drange's Level-0 tables form their
//    own, compacted independently and in parallel) is due at l0_compaction_trigger tables
//    (LevelDB's Level-0 rule, per Drange); all of Level 0 is due at half the bytes at
//    which writes slow down (or stop), so compaction starts well before the slow-down and a
//    stop is always lifted; from the slow-down mark on, Level 0 goes before every other
//    level. A cluster moves down only once no memtable holds older versions of its keys
//    (the caller's OlderVersionsInMemory says so, and asks for their rotation or flush).
//  - Level 1: level1_bytes, but at least a table's worth per Drange, since each Drange
//    compacts its Level-0 tables into its own slice of Level 1 and a slice smaller than
//    one table would push every such compaction straight on into Level 2; each further
//    level 10x more. Without the comparison, a steady stream of Level-0 work starved
//    Level 1: it grew to 50x its target and every Level-0 compaction rewrote all of it.
//  - Above Level 0, one table at a time, round-robin over the key space (LevelDB's
//    compaction pointer): after the largest key the level's last pick took, wrapping
//    around. Pointers are not persisted: a reopened range starts from the front.
//
// Thread safety: not thread-safe (the engine calls it under its mutex).
#pragma once

#include <leveldb/comparator.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/lsm/table_meta.h"
#include "ltc/engine/version.h"

namespace nova::ltc {

struct CompactionPickerOptions {
  const leveldb::Comparator* comparator = nullptr;  // of user keys; must outlive the picker
  int l0_compaction_trigger = 4;
  uint64_t l0_slowdown_writes_bytes = 192ull << 20;
  uint64_t l0_stop_writes_bytes = 256ull << 20;
  uint64_t level1_bytes = 10ull << 20;
  uint64_t sstable_bytes = 2ull << 20;
};

struct CompactionPick {
  int level = 0;  // of the inputs; the outputs go to level + 1
  std::vector<TableRef> inputs;
  std::vector<TableRef> next;  // the tables of level + 1 the inputs overlap
};

class CompactionPicker {
 public:
  // True while a memtable may hold a version, older than the cluster's newest, of a key in
  // [lo, hi] (user keys): the cluster must not move below Level 0 yet.
  using OlderVersionsInMemory = std::function<bool(const std::vector<TableRef>& cluster,
                                                   const std::string& lo, const std::string& hi)>;

  explicit CompactionPicker(const CompactionPickerOptions& options) : options_(options) {}

  // The next compaction of `v`, whose layout has `num_dranges` Dranges, or nullopt if none
  // is due or every due one would touch a busy table. Picking above Level 0 advances that
  // level's round-robin pointer.
  std::optional<CompactionPick> Pick(const Version& v, int num_dranges,
                                     const OlderVersionsInMemory& older_in_memory);

  // A manual compaction's next step (RangeEngine::CompactRange, LevelDB's manual
  // compaction): tables of `level` whose numbers are in *todo move to level + 1.
  //  - Level 0: the first cluster of overlapping tables holding a table of *todo; the whole
  //    cluster moves (a newer table must never stay above an older version moved down), and
  //    only once no memtable holds older versions of its keys (`older_in_memory`).
  //  - Above: tables of *todo in key order from the first, consecutive in the level, until
  //    they hold `max_bytes` (at least one table).
  // Numbers no longer in the level (a background compaction moved them) leave *todo, and
  // the picked ones too. nullopt when *todo is empty (done), or when its next step must
  // wait: then *wait is true (a table of it is busy, or memtables hold older versions).
  // Tables that join the level meanwhile are not in *todo: the step count is bounded.
  std::optional<CompactionPick> PickManual(const Version& v, int level,
                                           std::set<uint64_t>* todo, uint64_t max_bytes,
                                           const OlderVersionsInMemory& older_in_memory,
                                           bool* wait);

  // The pick's tables are busy (never picked again) until Finish(pick).
  void Start(const CompactionPick& pick);
  void Finish(const CompactionPick& pick);
  bool IsCompacting(uint64_t table_number) const { return compacting_.count(table_number) != 0; }

 private:
  // Level 0's clusters of overlapping tables and each one's user-key range.
  void Level0Clusters(const Version& v, std::vector<std::vector<TableRef>>* clusters,
                      std::vector<std::pair<std::string, std::string>>* ranges) const;
  // The tables of `level` overlapping [lo, hi] (user keys).
  std::vector<TableRef> Overlapping(const Version& v, int level, const std::string& lo,
                                    const std::string& hi) const;
  bool Busy(const std::vector<TableRef>& tables) const;

  const CompactionPickerOptions options_;
  std::set<uint64_t> compacting_;  // table numbers of running compactions
  // Per level >= 1: the largest user key its last pick took (empty: from the front).
  std::string compact_pointer_[lsm::kNumLevels];
};

}  // namespace nova::ltc
