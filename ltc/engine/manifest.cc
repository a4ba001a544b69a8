#include "ltc/engine/manifest.h"

#include <algorithm>

#include "common/lsm/manifest_format.h"

namespace nova::ltc {

std::string EncodeManifestRecord(const VersionEdit& edit) {
  std::string payload;
  edit.EncodeTo(&payload);
  return lsm::FrameManifestRecord(payload);
}

Status ParseManifest(std::string_view contents, ParsedManifest* out) {
  lsm::ManifestFrames frames;
  NOVA_RETURN_NOT_OK(lsm::ParseManifestFrames(contents, &frames));
  ParsedManifest p;
  p.valid_bytes = frames.valid_bytes;
  p.torn_bytes = frames.torn_bytes;
  for (const std::string_view payload : frames.payloads) {
    const std::string where =
        "MANIFEST record at byte " +
        std::to_string(payload.data() - contents.data() - lsm::kManifestRecordHeaderBytes);
    VersionEdit e;
    Status s = e.DecodeFrom(payload);
    if (!s.ok()) return s.Prepend(where);
    if (p.edits.empty() && !e.snapshot) {
      return Status::Corruption(where + ": a MANIFEST must start with a snapshot");
    }
    p.edits.push_back(std::move(e));
  }
  *out = std::move(p);
  return Status::OK();
}

Status ValidateManifest(std::string_view contents) {
  ParsedManifest parsed;
  return ParseManifest(contents, &parsed);
}

Status ManifestState::Apply(const VersionEdit& edit) {
  ManifestState next = edit.snapshot ? ManifestState() : *this;
  if (edit.next_file_number) next.next_file_number_ = *edit.next_file_number;
  if (edit.last_sequence) next.last_sequence_ = *edit.last_sequence;
  for (const auto& [level, number] : edit.deleted_tables) {
    if (next.levels_[level].erase(number) == 0) {
      return Status::Corruption("MANIFEST deletes table " + std::to_string(number) +
                                " that is not at level " + std::to_string(level));
    }
  }
  for (const auto& [level, table] : edit.new_tables) {
    if (!next.levels_[level].emplace(table.number, table).second) {
      return Status::Corruption("MANIFEST adds table " + std::to_string(table.number) +
                                " twice at level " + std::to_string(level));
    }
    if (table.number >= next.next_file_number_) next.next_file_number_ = table.number + 1;
  }
  if (edit.dranges) next.dranges_ = edit.dranges;
  // Memtable ids and the log floor only grow: an edit can never bring an obsolete log back.
  if (edit.next_memtable_id) {
    next.next_memtable_id_ = std::max(next.next_memtable_id_, *edit.next_memtable_id);
  }
  if (edit.log_floor) next.log_floor_ = std::max(next.log_floor_, *edit.log_floor);
  for (uint64_t m : edit.obsolete_logs) next.obsolete_logs_.insert(m);
  next.obsolete_logs_.erase(next.obsolete_logs_.begin(),
                            next.obsolete_logs_.lower_bound(next.log_floor_));
  // Kept disjoint (overlapping and touching ranges merged), so that LogIsObsolete needs to
  // look only at the last range beginning at or before an id.
  for (auto [begin, end] : edit.obsolete_log_ranges) {
    auto it = next.obsolete_ranges_.upper_bound(begin);
    if (it != next.obsolete_ranges_.begin() && std::prev(it)->second >= begin) --it;
    while (it != next.obsolete_ranges_.end() && it->first <= end) {
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = next.obsolete_ranges_.erase(it);
    }
    next.obsolete_ranges_[begin] = end;
  }
  std::erase_if(next.obsolete_ranges_,
                [&](const auto& r) { return r.second <= next.log_floor_; });
  if (next.next_memtable_id_ <= next.log_floor_) next.next_memtable_id_ = next.log_floor_;
  *this = std::move(next);
  return Status::OK();
}

VersionEdit ManifestState::Snapshot() const {
  VersionEdit e;
  e.snapshot = true;
  e.next_file_number = next_file_number_;
  e.last_sequence = last_sequence_;
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    for (const auto& [number, table] : levels_[l]) e.new_tables.emplace_back(l, table);
  }
  e.dranges = dranges_;
  e.next_memtable_id = next_memtable_id_;
  e.log_floor = log_floor_;
  e.obsolete_logs.assign(obsolete_logs_.begin(), obsolete_logs_.end());
  e.obsolete_log_ranges.assign(obsolete_ranges_.begin(), obsolete_ranges_.end());
  return e;
}

}  // namespace nova::ltc
