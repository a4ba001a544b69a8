#include "ltc/engine/flush_job.h"

#include <glog/logging.h>

#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/lsm/table_sink.h"
#include "ltc/engine/log_record.h"

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

FlushJob::FlushJob(const FlushJobOptions& options, Host* host, ImmutableMemTable imm)
    : options_(options), host_(host), imm_(std::move(imm)) {}

Status FlushJob::Run() {
  // Writes that took a sequence before the rotation may still be adding to the memtable.
  while (!options_.sequences->WaitVisible(imm_.sealed, Deadline::After(kSealWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": flush of memtable " << imm_.mem->id()
                 << " still waits for writes up to sequence " << imm_.sealed << " (visible "
                 << options_.sequences->visible() << ")";
  }
  if (imm_.mem->num_entries() == 0) {
    // Nothing to write (e.g. a reorganization retired an empty memtable).
    host_->DropEmpty(imm_);
    outcome_ = Outcome::kDropped;
    return Status::OK();
  }
  if (TryMerge()) {
    outcome_ = Outcome::kMerged;
    return Status::OK();
  }
  NOVA_RETURN_NOT_OK(WriteTable());
  outcome_ = Outcome::kFlushed;
  return Status::OK();
}

lsm::CompactionMergeOptions FlushJob::MergeOptions() {
  // The newest version of each key plus what live snapshots need.
  lsm::CompactionMergeOptions mo;
  mo.icmp = options_.icmp;
  mo.snapshots = host_->LiveSnapshots();
  mo.smallest_snapshot_or_max =
      mo.snapshots.empty() ? lsm::kMaxSequenceNumber : mo.snapshots.front();
  mo.max_output_bytes = UINT64_MAX / 2;  // a memtable becomes one table (or one merge)
  return mo;
}

Status FlushJob::WriteTable() {
  lsm::TableSink sink(
      options_.icmp, options_.table, options_.store, [this] { return host_->NewFileNumber(); },
      imm_.drange);
  const lsm::CompactionMergeOptions mo = MergeOptions();
  std::unique_ptr<leveldb::Iterator> it(imm_.mem->NewIterator());
  lsm::CompactionStats cs;
  Status s = lsm::RunCompactionMerge(it.get(), mo, &sink, &cs);
  if (!s.ok()) {
    sink.Discard();
    return s.Prepend("flushing memtable " + std::to_string(imm_.mem->id()));
  }
  return host_->InstallTables(imm_, std::move(sink.outputs()));
}

bool FlushJob::TryMerge() {
  if (imm_.state == nullptr || imm_.no_merge || options_.merge_threshold_keys == 0 ||
      imm_.mem->num_unique_keys() >= options_.merge_threshold_keys || host_->FlushForced()) {
    return false;
  }
  // The versions to keep (deletions stay: older versions may be in tables).
  const lsm::CompactionMergeOptions mo = MergeOptions();
  EntryCollector kept;
  std::unique_ptr<leveldb::Iterator> it(imm_.mem->NewIterator());
  Status s = lsm::RunCompactionMerge(it.get(), mo, &kept, nullptr);
  if (!s.ok()) {
    LOG(WARNING) << "range " << options_.range_id << ": merging memtable " << imm_.mem->id()
                 << " failed, flushing it instead: " << s.ToString();
    return false;
  }
  // Large values could make the active memtable grow far past its size: flush those.
  uint64_t bytes = 0;
  for (const auto& [k, v] : kept.entries()) bytes += k.size() + v.size();
  if (bytes > options_.memtable_bytes / 2) return false;

  std::shared_ptr<MemTable> target;
  Status relogged;
  bool moved = false;
  {
    // Under the Drange's lock (the file comment, 2).
    DrangeState* ds = imm_.state.get();
    MutexLock dl(&ds->mu);
    if (ds->retired || host_->FlushForced()) return false;
    // If the Drange has a newer immutable memtable, that one takes the versions: had they
    // gone to the active memtable, the newer one's table (with newer versions) could be
    // compacted below them. It cannot be flushed meanwhile: a Drange's memtables flush in
    // order, and this one is still pending. It needs no Drange lock (it takes no writes).
    target = host_->MergeTarget(imm_);
    if (target == nullptr) {
      target = ds->active;
      relogged = MoveVersions(kept.entries(), target);
      moved = true;
    }
  }
  if (!moved) relogged = MoveVersions(kept.entries(), target);
  // The versions are readable in their new memtable: readers may stop seeing this one.
  host_->FinishMerge(imm_, target, kept.entries().size(), relogged.ok());
  // (If the target's log died, the next write to it fails and retires it.)
  return true;
}

Status FlushJob::MoveVersions(const std::vector<std::pair<std::string, std::string>>& kept,
                              const std::shared_ptr<MemTable>& target) {
  Status relogged;
  if (options_.log != nullptr) {
    std::vector<ltc::LogEntry> entries;
    for (const auto& [ikey, value] : kept) {
      lsm::ParsedInternalKey p;
      if (!lsm::ParseInternalKey(ikey, &p)) continue;
      entries.push_back(ltc::LogEntry{target->id(), p.sequence, static_cast<uint8_t>(p.type),
                                      std::string_view(p.user_key.data(), p.user_key.size()),
                                      value});
    }
    std::string record;
    ltc::AppendLogRecord(&record, entries);
    relogged = options_.log->Append(target->id(), record);
    LOG_IF(WARNING, !relogged.ok())
        << "range " << options_.range_id << ": re-logging memtable " << imm_.mem->id() << " into "
        << target->id() << " failed; its log is kept: " << relogged.ToString();
  }
  for (const auto& [ikey, value] : kept) {
    lsm::ParsedInternalKey p;
    if (!lsm::ParseInternalKey(ikey, &p)) {
      // The memtable holds only keys we encoded: this is memory corruption.
      LOG(DFATAL) << "range " << options_.range_id << ": malformed key in memtable "
                  << imm_.mem->id();
      continue;
    }
    target->Add(p.sequence, p.type, p.user_key, value);
    if (options_.lookup_index != nullptr) {
      options_.lookup_index->Repoint(p.user_key, imm_.mem->id(), target->id());
    }
  }
  return relogged;
}

}  // namespace nova::ltc
