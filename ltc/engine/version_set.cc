#include "ltc/engine/version_set.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

namespace nova::ltc {

VersionSet::VersionSet(const VersionSetOptions& options, const TableContext* ctx)
    : options_(options), ctx_(ctx), current_(std::make_shared<Version>()) {}

Status VersionSet::Recover(bool* new_range) {
  auto contents = ctx_->store->ReadManifest();
  if (!contents.ok()) return contents.status().Prepend("reading the MANIFEST");
  ParsedManifest parsed;
  NOVA_RETURN_NOT_OK(ParseManifest(contents.value(), &parsed));
  for (const VersionEdit& e : parsed.edits) NOVA_RETURN_NOT_OK(state_.Apply(e));
  *new_range = parsed.edits.empty();
  if (parsed.edits.empty()) {
    const std::string snapshot = SnapshotRecord();
    NOVA_RETURN_NOT_OK(ctx_->store->AppendManifest(snapshot));
    manifest_bytes_ = snapshot.size();
  } else if (parsed.torn_bytes > 0) {
    // Records appended after the torn bytes would leave them in the middle of the MANIFEST:
    // continue in a new one.
    LOG(WARNING) << "range " << options_.range_id << ": ignoring a torn MANIFEST record of "
                 << parsed.torn_bytes << " bytes; starting a new MANIFEST";
    const std::string snapshot = SnapshotRecord();
    NOVA_RETURN_NOT_OK_PREPEND(ctx_->store->RollManifest(snapshot),
                               "starting a new MANIFEST after a torn record");
    manifest_bytes_ = snapshot.size();
  } else {
    manifest_bytes_ = parsed.valid_bytes;
  }
  current_ = BuildVersion(Version(), state_.Snapshot());
  return Status::OK();
}

Status VersionSet::LogAndApply(const VersionEdit& edit, bool* fatal) {
  *fatal = false;
  const std::string record = EncodeManifestRecord(edit);
  Status appended;
  for (int attempt = 0; attempt < options_.append_attempts; ++attempt) {
    // A failed append leaves the store to repair on the next one (e.g. a StoC restarted and
    // its append slot is gone); only repeated failure gives the edit up.
    appended = ctx_->store->AppendManifest(record);
    if (appended.ok()) break;
    if (appended.IsFenced()) {
      // A newer owner has the range: no retry, no new MANIFEST, no deletes. The edit may
      // not have been applied anywhere; the range stops here.
      *fatal = true;
      fenced_ = appended;
      return appended.Prepend("MANIFEST append");
    }
    LOG(WARNING) << "range " << options_.range_id << ": MANIFEST append failed (attempt "
                 << attempt + 1 << "): " << appended.ToString();
  }
  if (!appended.ok()) {
    // The record may still have reached a replica, and a later Open could pick it up (then
    // contradicting the edits that follow). A new MANIFEST holding the state without it
    // settles the question: Open reads only the newest MANIFEST.
    const std::string snapshot = SnapshotRecord();
    const Status rolled = ctx_->store->RollManifest(snapshot);
    if (rolled.IsFenced()) {
      *fatal = true;
      fenced_ = rolled;
      return rolled.Prepend("MANIFEST append failed (" + appended.ToString() +
                            "), and a new MANIFEST");
    }
    if (!rolled.ok()) {
      LOG(ERROR) << "range " << options_.range_id << ": MANIFEST append failed ("
                 << appended.ToString() << ") and a new MANIFEST could not be written ("
                 << rolled.ToString() << ")";
      *fatal = true;
      return appended.Prepend("MANIFEST append");
    }
    manifest_bytes_ = snapshot.size();
    ++manifest_failures_;
    // The edit is gone for good, and with it the only reference to its new tables. A table
    // it replaced (deleted and added at one level: a relocation) or moved (deleted at one
    // level and added at another) stays with its old metadata: only the copies the old one
    // does not hold go (none, for a move).
    for (const auto& [level, meta] : edit.new_tables) {
      if (TableRef old = FindReplaced(edit, meta.number)) {
        Status d = ctx_->store->DeleteCopiesNotIn(meta, old->meta());
        LOG_IF(WARNING, !d.ok()) << "range " << options_.range_id << ": deleting the new "
                                 << "copies of table " << meta.number << " of a failed edit: "
                                 << d.ToString();
        continue;
      }
      Status d = ctx_->store->DeleteTable(meta);
      LOG_IF(WARNING, !d.ok()) << "range " << options_.range_id << ": deleting table "
                               << meta.number << " of a failed edit: " << d.ToString();
    }
    LOG(WARNING) << "range " << options_.range_id << ": MANIFEST append failed, edit dropped "
                 << "(a new MANIFEST holds the state without it): " << appended.ToString();
    return appended.Prepend("MANIFEST append");
  }
  NOVA_RETURN_NOT_OK(state_.Apply(edit));
  current_ = BuildVersion(*current_, edit);
  manifest_bytes_ += record.size();
  if (manifest_bytes_ > options_.manifest_roll_bytes) {
    // Start a new MANIFEST with the whole state; the old one is retired by the store.
    const std::string snapshot = SnapshotRecord();
    Status s = ctx_->store->RollManifest(snapshot);
    if (s.IsFenced()) {
      fenced_ = s;  // the edit is in the MANIFEST; the caller stops the range
    } else if (s.ok()) {
      manifest_bytes_ = snapshot.size();
    } else {
      LOG(WARNING) << "range " << options_.range_id
                   << ": MANIFEST roll-over failed (will retry): " << s.ToString();
    }
  }
  return Status::OK();
}

uint64_t VersionSet::NewFileNumber() {
  const uint64_t n = state_.next_file_number();
  SkipFileNumbersThrough(n);
  return n;
}

void VersionSet::SkipFileNumbersThrough(uint64_t number) {
  if (number < state_.next_file_number()) return;
  VersionEdit e;
  e.next_file_number = number + 1;
  state_.Apply(e).IgnoreError();  // only a counter: cannot contradict the state
}

TableRef VersionSet::FindReplaced(const VersionEdit& edit, uint64_t number) const {
  // At the level it is added (a relocation) or another one (a move down).
  for (const auto& [level, deleted] : edit.deleted_tables) {
    if (deleted != number) continue;
    for (const TableRef& t : current_->levels[level]) {
      if (t->meta().number == number) return t;
    }
  }
  return nullptr;
}

std::shared_ptr<Version> VersionSet::BuildVersion(const Version& base,
                                                  const VersionEdit& edit) const {
  auto v = std::make_shared<Version>();
  // A table deleted and added at the same level is replaced (the edit's encoding, version_
  // edit.h): its old handle hands its copies over to the new one instead of being deleted.
  // One deleted at one level and added at another moved down (a compaction's table move):
  // the new version holds the same handle, open table and all, at its new level.
  std::vector<std::pair<TableRef, size_t>> replaced;  // old handle, index in new_tables
  std::vector<TableRef> moved(edit.new_tables.size());  // by index in new_tables
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    for (const TableRef& t : base.levels[l]) {
      const bool deleted =
          std::any_of(edit.deleted_tables.begin(), edit.deleted_tables.end(),
                      [&](const auto& d) { return d.first == l && d.second == t->meta().number; });
      if (!deleted) {
        v->levels[l].push_back(t);
        continue;
      }
      auto added = std::find_if(edit.new_tables.begin(), edit.new_tables.end(), [&](const auto& n) {
        return n.second.number == t->meta().number;
      });
      if (added == edit.new_tables.end()) {
        t->MarkObsolete();
      } else if (added->first == l) {
        replaced.emplace_back(t, added - edit.new_tables.begin());
      } else {
        moved[added - edit.new_tables.begin()] = t;
      }
    }
  }
  std::vector<TableRef> added;
  for (size_t i = 0; i < edit.new_tables.size(); ++i) {
    const auto& [level, meta] = edit.new_tables[i];
    added.push_back(moved[i] != nullptr ? moved[i] : std::make_shared<TableHandle>(meta, ctx_));
    v->levels[level].push_back(added.back());
  }
  for (const auto& [old, index] : replaced) old->MarkReplaced(added[index]);
  std::sort(v->levels[0].begin(), v->levels[0].end(), [](const TableRef& a, const TableRef& b) {
    return a->meta().number < b->meta().number;
  });
  for (int l = 1; l < lsm::kNumLevels; ++l) {
    std::sort(v->levels[l].begin(), v->levels[l].end(),
              [this](const TableRef& a, const TableRef& b) {
                return ctx_->icmp->Compare(a->meta().smallest, b->meta().smallest) < 0;
              });
  }
  return v;
}

}  // namespace nova::ltc
