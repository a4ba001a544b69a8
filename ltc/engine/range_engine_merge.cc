// RangeEngine: the small-memtable rule of paper 4.4.2. A Drange whose memtables fill up with
// few distinct keys (a hot key's versions, typically a duplicated point Drange under skew)
// would otherwise write a table per memtable holding almost nothing but one version per
// key. Instead, the versions readers may still need are moved into the Drange's active
// memtable and the immutable memtable is dropped: nothing reaches the StoCs until the Drange
// accumulates enough distinct keys.
//
// Where the versions go: the Drange's next immutable memtable if it has one, else its active
// memtable (the paper builds a new immutable memtable; an immutable memtable kept back from
// flushing would hold versions older than Level-0 tables flushed since, and Level-0
// compaction must not move those tables below it, as reads take the first hit in Levels 1+:
// parking it would stall Level 0). Either way the versions land in the Drange's oldest
// unflushed memtable, which flushes before anything newer of the Drange: every table of the
// Drange flushed later holds newer versions, and the active memtable keeps its property of
// holding only versions newer than its Drange's tables (range_engine_compaction.cc relies
// on it).
#include <glog/logging.h>

#include "common/lsm/compaction_merge.h"
#include "ltc/engine/log_record.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {

// Collects a merge's surviving entries in memory.
class EntryCollector : public lsm::CompactionOutputSink {
 public:
  Status StartOutput() override { return Status::OK(); }
  Status Add(const leveldb::Slice& ikey, const leveldb::Slice& value) override {
    bytes_ += ikey.size() + value.size();
    entries_.emplace_back(ikey.ToString(), value.ToString());
    return Status::OK();
  }
  uint64_t CurrentBytes() const override { return bytes_; }
  Status FinishOutput() override { return Status::OK(); }
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }

 private:
  uint64_t bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace

bool RangeEngine::MaybeMergeIntoActive(const Immutable& imm) {
  if (imm.state == nullptr || imm.no_merge || options_.drange_merge_threshold_keys == 0 ||
      imm.mem->num_unique_keys() >= options_.drange_merge_threshold_keys ||
      forcing_flush_.load() > 0) {
    return false;
  }
  // The versions to keep: the newest of each key plus what live snapshots need (deletions
  // stay: older versions may be in tables).
  lsm::CompactionMergeOptions mo;
  mo.icmp = &icmp_;
  {
    MutexLock lock(&mu_);
    mo.snapshots = LiveSnapshots();
  }
  mo.smallest_snapshot_or_max =
      mo.snapshots.empty() ? lsm::kMaxSequenceNumber : mo.snapshots.front();
  mo.max_output_bytes = UINT64_MAX / 2;
  EntryCollector kept;
  std::unique_ptr<leveldb::Iterator> it(imm.mem->NewIterator());
  Status s = lsm::RunCompactionMerge(it.get(), mo, &kept, nullptr);
  if (!s.ok()) {
    LOG(WARNING) << "range " << options_.range_id << ": merging memtable " << imm.mem->id()
                 << " failed, flushing it instead: " << s.ToString();
    return false;
  }
  // Large values could make the active memtable grow far past its size: flush those.
  uint64_t bytes = 0;
  for (const auto& [k, v] : kept.entries()) bytes += k.size() + v.size();
  if (bytes > options_.memtable_bytes / 2) return false;

  std::shared_ptr<MemTable> target;
  Status relogged;
  {
    // Under the Drange's lock: its active memtable cannot rotate meanwhile, and FlushAll
    // (which rotates under this lock after raising forcing_flush_) either sees the moved
    // versions in the memtable it rotates, or makes us flush instead.
    std::unique_lock dl(imm.state->mu);
    if (imm.state->retired || forcing_flush_.load() > 0) return false;
    {
      // If the Drange has a newer immutable memtable, that one takes the versions: had they
      // gone to the active memtable, the newer one's table (with newer versions) could be
      // compacted below them. It cannot be flushed meanwhile: a Drange's memtables flush
      // in order, and this one is still pending (RangeEngine::NextFlushLocked).
      MutexLock lock(&mu_);
      for (const Immutable& other : immutables_) {
        if (other.mem != imm.mem && other.state == imm.state) {
          target = other.mem;
          break;
        }
      }
    }
    if (target == nullptr) {
      target = imm.state->active;
    } else {
      dl.unlock();
    }
    if (options_.log != nullptr) {
      // The versions get a log in their new memtable first (paper 4.4.2: the merged
      // memtable gets a fresh log): only then may this memtable's log go.
      std::vector<ltc::LogEntry> entries;
      for (const auto& [ikey, value] : kept.entries()) {
        lsm::ParsedInternalKey p;
        if (!lsm::ParseInternalKey(ikey, &p)) continue;
        entries.push_back(ltc::LogEntry{target->id(), p.sequence, static_cast<uint8_t>(p.type),
                                         std::string_view(p.user_key.data(), p.user_key.size()),
                                         value});
      }
      std::string record;
      ltc::AppendLogRecord(&record, entries);
      relogged = options_.log->Append(target->id(), record);
      // On failure the merge goes on (part of the record may be in the target's log, and
      // what a log holds must be in its memtable), but this memtable's log stays until the
      // target is flushed: it still holds the versions.
      LOG_IF(WARNING, !relogged.ok())
          << "range " << options_.range_id << ": re-logging memtable " << imm.mem->id()
          << " into " << target->id() << " failed; its log is kept: " << relogged.ToString();
    }
    for (const auto& [ikey, value] : kept.entries()) {
      lsm::ParsedInternalKey p;
      if (!lsm::ParseInternalKey(ikey, &p)) {
        // The memtable holds only keys we encoded: this is memory corruption.
        LOG(DFATAL) << "range " << options_.range_id << ": malformed key in memtable "
                    << imm.mem->id();
        continue;
      }
      target->Add(p.sequence, p.type, p.user_key, value);
      if (options_.lookup_index) index_.Repoint(p.user_key, imm.mem->id(), target->id());
    }
  }
  // The versions are readable in their new memtable: readers may stop seeing this one.
  {
    MutexLock lock(&mu_);
    EraseImmutableLocked(imm.mem);
    live_.erase(std::remove(live_.begin(), live_.end(), imm.mem), live_.end());
    RebuildRangeIndexLocked();  // the range index lets go of it too
    mid_to_table_.erase(imm.mem->id());
    if (options_.log != nullptr) {
      // Its versions are logged in the target's log now.
      std::vector<uint64_t>& into = ids_.absorbed[target->id()];
      into.push_back(imm.mem->id());
      auto own = ids_.absorbed.find(imm.mem->id());
      if (own != ids_.absorbed.end()) {
        into.insert(into.end(), own->second.begin(), own->second.end());
        ids_.absorbed.erase(own);
      }
      if (relogged.ok()) {
        ids_.unrecorded_obsolete.push_back(imm.mem->id());
        options_.log->Drop({imm.mem->id()});
      }
    }
    ++stats_.memtable_merges;
    stats_.merged_entries += kept.entries().size();
  }
  // (If the target's log died, the next write to it fails and retires it.)
  return true;
}

}  // namespace nova::ltc
