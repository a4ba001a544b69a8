// StocTableStore, MANIFEST half: finding the current MANIFEST, appending to it, rolling it
// over and repairing it (the invariants are listed in stoc_table_store.h).
#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/manifest_format.h"
#include "stoc/client/file_names.h"
#include "stoc/client/scoped_registration.h"
#include "stoc/client/stoc_table_store.h"

namespace nova::stoc {

namespace {

// Append slot asked for a MANIFEST replica: records are small, and a range keeps its
// MANIFEST open for its whole life, so a default 1 MiB slot per range would tie up much of
// a StoC's file buffer. A larger record reserves a larger slot on demand.
constexpr uint64_t kManifestSlotBytes = 64 << 10;
// Placements a new MANIFEST gets when writing it fails at some StoC (each further one
// leaves out the StoCs that failed): steps around a StoC or two that died unnoticed, while
// bounding how many StoC timeouts one call can wait for.
constexpr int kManifestPlacements = 3;

// The slot a new MANIFEST replica asks for: its first record's size (written in blocks of
// at most max_append_bytes), at least kManifestSlotBytes.
uint64_t ManifestSlotBytes(uint64_t first_record, uint64_t max_append_bytes) {
  return std::max<uint64_t>(kManifestSlotBytes,
                            std::min(first_record, std::max<uint64_t>(1, max_append_bytes)));
}

bool Contains(const std::vector<uint32_t>& ids, uint32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::vector<uint32_t> Distinct(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

// ---- MANIFEST -------------------------------------------------------------------------

void StocTableStore::CloseManifestLocked() {
  for (auto& f : manifest_.files) client_->Close(f.get()).IgnoreError();
  manifest_.files.clear();
  NoteManifestFilesLocked();
  manifest_.found = false;
  manifest_.number = 0;
  manifest_.contents.clear();
  manifest_.broken = false;
}

Status StocTableStore::EnsureManifestLocked() {
  if (manifest_.found) return Status::OK();
  std::string contents;
  return DiscoverManifestLocked(&contents);
}

Status StocTableStore::ReadManifestReplica(uint32_t stoc_id, uint64_t file_id,
                                           std::string* contents) {
  auto st = client_->StatFile(stoc_id, file_id);
  if (!st.ok()) return st.status();
  if (st->kind != FileKind::kDisk) {
    return Status::Corruption("MANIFEST " + st->name + " is not a persistent file");
  }
  contents->clear();
  for (const auto& [offset, size] : st->blocks) {
    const size_t at = contents->size();
    contents->resize(at + size);
    NOVA_RETURN_NOT_OK(ReadBlock(lsm::FragmentLocation{stoc_id, file_id, offset, size}, 0, size,
                                 contents->data() + at));
  }
  return Status::OK();
}

Status StocTableStore::DiscoverManifestLocked(std::string* contents) {
  const std::string range = "range " + std::to_string(options_.range_id);
  if (!options_.manifest_pointer_path.empty()) {
    if (manifest_.pointer == nullptr) {
      manifest_.pointer = std::make_unique<ManifestPointer>(options_.manifest_pointer_path);
    }
    auto loaded = manifest_.pointer->Load();
    if (loaded.ok()) {
      manifest_.pointed = loaded.value();
    } else if (options_.force_recovery) {
      LOG(ERROR) << range << ": ignoring the MANIFEST pointer (--ltc_force_recovery_ranges): "
                 << loaded.status().ToString();
      manifest_.pointed = ManifestPointer::Numbers{};
    } else {
      return loaded.status().Prepend(range + ": the MANIFEST pointer (" +
                                     manifest_.pointer->path() + ")");
    }
    // Never a number a failed attempt may have left files under (invariant 1).
    manifest_.next_number = std::max(manifest_.next_number, manifest_.pointed.allocated + 1);
  }
  const uint64_t epoch = options_.owner_epoch;
  if (epoch != 0) {
    if (!unfenced_.empty()) {  // F1: a StoC that missed the fence may have come back
      auto still = FenceStocs(unfenced_);
      if (!still.ok()) return still.status().Prepend(range);
      unfenced_ = std::move(still.value());
      if (unfenced_.size() >= static_cast<size_t>(options_.manifest_replicas)) {
        std::string ids;
        for (uint32_t id : unfenced_) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
        return Status::Unavailable(range + ": StoCs " + ids + " have not confirmed the fence " +
                                   "of owner epoch " + std::to_string(epoch));
      }
    }
    // F2: this owner's numbers start at its band.
    manifest_.next_number = std::max(manifest_.next_number, epoch << kManifestEpochShift);
  }
  // Every replica of every MANIFEST of the range: number -> (StoC, file id).
  std::map<uint64_t, std::vector<std::pair<uint32_t, uint64_t>>> found;
  std::string unreachable;
  int num_unreachable = 0;
  // StoCs that failed a list, a read or a reopen here: a repair must not place the new
  // MANIFEST on them (it would fail), and later placements leave them out for a while.
  // F1: a StoC that has not confirmed the fence holds nothing this store trusts, and gets no
  // new MANIFEST replica.
  std::vector<uint32_t> avoid = unfenced_;
  for (uint32_t id : stocs()) {
    // F1: the replicas at a StoC that has not confirmed the fence are not read, so for
    // invariant 3 it counts as unreachable.
    auto list = client_->List(id);
    if (!list.ok() || Contains(unfenced_, id)) {
      unreachable += (num_unreachable++ ? ", " : "") + std::to_string(id);
    }
    if (!list.ok()) {
      LOG(WARNING) << range << ": cannot list StoC " << id << ": " << list.status().ToString();
      avoid.push_back(id);
      MarkSuspect(id, list.status());
      continue;
    }
    for (const FileState& f : list.value()) {
      const ParsedFileName p = ParseStocFileName(f.name);
      if (p.type != StocFileType::kManifest || p.range_id != options_.range_id) continue;
      if (epoch != 0 && (p.number >> kManifestEpochShift) > epoch) {  // F2
        return NoteFenced(Status::Fenced(range + ": StoC " + std::to_string(id) + " holds " +
                                         f.name + ", a MANIFEST of owner epoch " +
                                         std::to_string(p.number >> kManifestEpochShift) +
                                         ", newer than this store's " + std::to_string(epoch)));
      }
      if (Contains(unfenced_, id)) {
        // Not trusted (F1), but its number is never reused (invariant 1).
        manifest_.next_number = std::max(manifest_.next_number, p.number + 1);
        continue;
      }
      found[p.number].emplace_back(id, f.file_id);
    }
  }
  if (num_unreachable >= options_.manifest_replicas) {  // invariant 3
    return Status::Unavailable(range + ": cannot tell which MANIFEST is current while StoCs " +
                               unreachable +
                               " are unreachable or have not confirmed the fence (they "
                               "may hold every replica of the newest)");
  }
  if (!found.empty()) {
    manifest_.next_number = std::max(manifest_.next_number, found.rbegin()->first + 1);
  }

  std::vector<std::pair<uint32_t, std::string>> leftovers;  // (StoC, name) to delete
  uint64_t chosen = 0;
  std::string best;
  std::vector<std::pair<uint32_t, uint64_t>> healthy;  // replicas of `chosen` holding `best`
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    const uint64_t number = it->first;
    const auto& replicas = it->second;
    const std::string name = ManifestFileName(options_.range_id, number);
    if (chosen != 0) {  // older than the current one
      for (const auto& [id, file_id] : replicas) leftovers.emplace_back(id, name);
      continue;
    }
    struct ReplicaRead {
      bool ok = false;
      std::string bytes;
      lsm::ManifestFrames parsed;
    };
    std::vector<ReplicaRead> reads(replicas.size());
    Status failure;
    size_t most = replicas.size();
    for (size_t i = 0; i < replicas.size(); ++i) {
      Status s = ReadManifestReplica(replicas[i].first, replicas[i].second, &reads[i].bytes);
      if (s.ok()) s = lsm::ParseManifestFrames(reads[i].bytes, &reads[i].parsed);
      if (s.ok() && options_.validate_manifest) {
        s = options_.validate_manifest(
            std::string_view(reads[i].bytes).substr(0, reads[i].parsed.valid_bytes));
      }
      if (!s.ok()) {
        LOG(WARNING) << range << ": reading " << name << " at StoC " << replicas[i].first << ": "
                     << s.ToString();
        failure = s;
        // Damaged contents say nothing about the StoC; a failed read does.
        if (!s.IsCorruption()) avoid.push_back(replicas[i].first);
        continue;
      }
      reads[i].ok = true;
      if (most == replicas.size() ||
          reads[i].parsed.payloads.size() > reads[most].parsed.payloads.size()) {
        most = i;
      }
    }
    if (most < replicas.size() && !reads[most].parsed.payloads.empty()) {
      chosen = number;
      best = reads[most].bytes.substr(0, reads[most].parsed.valid_bytes);
      for (size_t i = 0; i < replicas.size(); ++i) {
        if (reads[i].ok && reads[i].bytes == best) {
          healthy.push_back(replicas[i]);
        } else {
          leftovers.emplace_back(replicas[i].first, name);  // diverged or unreadable
        }
      }
      continue;
    }
    // Without a record on any replica read, it is a roll-over that never finished, unless
    // a replica could not be read: then nothing can be concluded.
    if (!failure.ok()) return failure.Prepend(range + ": reading " + name);
    LOG(WARNING) << range << ": " << name << " holds no record (an unfinished roll-over)";
    for (const auto& [id, file_id] : replicas) leftovers.emplace_back(id, name);
  }

  if (chosen < manifest_.pointed.committed) {  // invariant 6
    const std::string why =
        range + ": this LTC completed MANIFEST " + std::to_string(manifest_.pointed.committed) +
        " but the newest found is " + (chosen == 0 ? "none" : std::to_string(chosen)) +
        ": the StoCs holding it are unreachable or lost their disks";
    if (!options_.force_recovery) {
      return Status::Unavailable(why + "; waiting for them (opening from an older MANIFEST "
                                 "would drop the edits since)");
    }
    LOG(ERROR) << why << "; opening from it anyway (--ltc_force_recovery_ranges): the edits "
               << "since, with the writes they held, are lost";
  }

  manifest_.files.clear();
  NoteManifestFilesLocked();
  manifest_.number = 0;
  manifest_.contents.clear();
  manifest_.broken = false;
  bool repair = false;
  if (chosen != 0) {
    const std::string name = ManifestFileName(options_.range_id, chosen);
    repair = healthy.size() < static_cast<size_t>(options_.manifest_replicas);
    // F2: a MANIFEST of an older owner (or of none) moves into this owner's band.
    const bool below_band = epoch != 0 && chosen < (epoch << kManifestEpochShift);
    repair = repair || below_band;
    for (size_t i = 0; !repair && i < healthy.size(); ++i) {
      OpenOptions o;
      o.create = false;
      o.for_append = true;
      o.slot_bytes = kManifestSlotBytes;
      o.owner_epoch = epoch;
      auto f = client_->Open(healthy[i].first, name, FileKind::kDisk, o);
      if (!f.ok()) {
        if (NoteFenced(f.status()).IsFenced()) {
          return f.status().Prepend(range + ": reopening " + name);
        }
        LOG(WARNING) << range << ": reopening " << name << " at StoC " << healthy[i].first << ": "
                     << f.status().ToString();
        avoid.push_back(healthy[i].first);
        MarkSuspect(healthy[i].first, f.status());
        repair = true;
        break;
      }
      manifest_.files.push_back(std::move(f.value()));
      NoteManifestFilesLocked();
    }
    manifest_.contents = best;
    if (repair) {  // invariant 4
      if (below_band) {
        LOG(INFO) << range << ": moving " << name << " into the MANIFEST numbers of owner epoch "
                  << epoch;
      } else {
        LOG(WARNING) << range << ": " << name << " is intact on " << healthy.size() << " of "
                     << options_.manifest_replicas << " StoCs: rewriting it as a new MANIFEST";
      }
      for (auto& f : manifest_.files) client_->Close(f.get()).IgnoreError();
      manifest_.files.clear();
      NoteManifestFilesLocked();
      // Its replicas go only once the new MANIFEST is complete (invariant 1).
      Status s = CreateManifestLocked(best, avoid);
      if (!s.ok()) {
        manifest_.contents.clear();
        return s.Prepend(range + ": repairing " + name);
      }
      counters_.manifest_repairs.fetch_add(1, std::memory_order_relaxed);
      for (const auto& [id, file_id] : healthy) leftovers.emplace_back(id, name);
    } else {
      manifest_.number = chosen;
      if (manifest_.pointer != nullptr && chosen > manifest_.pointed.committed) {
        // Completed by an earlier run that died before recording it (invariant 6).
        NOVA_RETURN_NOT_OK(RecordPointerLocked(chosen, chosen));
      }
    }
  }
  manifest_.found = true;
  for (const auto& [id, name] : leftovers) {
    Status s = DeleteFile(id, name);
    if (s.IsFenced()) return s.Prepend(range + ": removing an old MANIFEST");
    LOG_IF(WARNING, !s.ok()) << range << ": removing an old MANIFEST: " << s.ToString();
  }
  *contents = best;
  return Status::OK();
}

Status StocTableStore::RecordPointerLocked(uint64_t allocated, uint64_t committed) {
  const ManifestPointer::Numbers n{std::max(manifest_.pointed.allocated, allocated), committed};
  NOVA_RETURN_NOT_OK_PREPEND(
      manifest_.pointer->Store(n),
      "range " + std::to_string(options_.range_id) + ": the MANIFEST pointer");
  manifest_.pointed = n;
  return Status::OK();
}

Status StocTableStore::CreateManifestLocked(const std::string& first_block,
                                            std::vector<uint32_t> avoid) {
  const std::string range = "range " + std::to_string(options_.range_id);
  Status last;
  for (int attempt = 0; attempt < kManifestPlacements; ++attempt) {
    std::vector<uint32_t> where;
    Status placed = Choose(options_.manifest_replicas, avoid, &where);
    if (!placed.ok()) {
      if (!last.ok()) break;  // the failed write says more than "too few StoCs left"
      std::string left_out;
      for (uint32_t id : Distinct(avoid)) left_out += " " + std::to_string(id);
      return Status::Unavailable(
          range + ": placing a new MANIFEST on " + std::to_string(options_.manifest_replicas) +
          " StoCs, leaving out unreachable StoCs" + left_out + ": " + placed.ToString());
    }
    // Every attempt takes a new number (invariant 1): a replica a failed attempt could not
    // delete is older than the next attempt's MANIFEST. The pointer records it first, so
    // no later run reuses it.
    const uint64_t number = manifest_.next_number++;
    if (manifest_.pointer != nullptr)
      NOVA_RETURN_NOT_OK(RecordPointerLocked(number, manifest_.pointed.committed));
    std::vector<std::unique_ptr<StocFile>> files;
    std::vector<uint32_t> failed;
    last = WriteManifestReplicas(number, first_block, where, &files, &failed);
    if (last.IsFenced()) {
      // F3: not placed elsewhere, and the previous MANIFEST stays as it is.
      manifest_.broken = true;
      return last;
    }
    if (last.ok() && manifest_.pointer != nullptr) {
      // Complete on every replica: from now on an older MANIFEST is stale (invariant 6).
      last = RecordPointerLocked(number, number);
    }
    if (last.ok()) {
      // Complete on every replica: retire the previous MANIFEST (invariant 1).
      for (auto& f : manifest_.files) {
        client_->Close(f.get()).IgnoreError();
        Status d = DeleteFile(f->stoc_id, f->name);
        LOG_IF(WARNING, !d.ok()) << "retiring " << f->name << ": " << d.ToString();
      }
      manifest_.files = std::move(files);
      NoteManifestFilesLocked();
      manifest_.number = number;
      manifest_.contents = first_block;
      manifest_.broken = false;
      manifest_.found = true;
      return Status::OK();
    }
    // A replica left behind would be newer than the current MANIFEST (invariant 2).
    manifest_.broken = true;
    LOG(WARNING) << range << ": " << last.ToString()
                 << (attempt + 1 < kManifestPlacements ? "; placing it on other StoCs" : "");
    avoid.insert(avoid.end(), failed.begin(), failed.end());
  }
  return last;
}

Status StocTableStore::WriteManifestReplicas(uint64_t number, const std::string& first_block,
                                             const std::vector<uint32_t>& where,
                                             std::vector<std::unique_ptr<StocFile>>* out,
                                             std::vector<uint32_t>* failed) {
  const std::string name = ManifestFileName(options_.range_id, number);
  ScopedRegistration src(client_->transport(), first_block.data(), first_block.size(),
                         transport::kLocalOnly);
  NOVA_RETURN_NOT_OK_PREPEND(src.status(), "writing " + name);
  std::vector<std::unique_ptr<StocFile>> files(where.size());
  std::vector<char> touched(where.size(), 0);  // not vector<bool>: written concurrently
  std::vector<std::function<Status()>> jobs;
  for (size_t i = 0; i < where.size(); ++i) {
    jobs.push_back([&, i]() -> Status {
      touched[i] = 1;
      auto f = CreateFile(where[i], name,
                          ManifestSlotBytes(first_block.size(), options_.max_append_bytes));
      if (!f.ok()) return f.status();
      files[i] = std::move(f.value());
      if (fenced()) return FencedError();
      // In StoC blocks of at most max_append_bytes: a snapshot of many tables with big keys
      // outgrows one block. Readers concatenate the blocks (ReadManifestReplica), and an
      // append cut short by a crash is a torn last record (lsm/manifest_format.h).
      return AppendInBlocks(files[i].get(), src.region(), 0, first_block.size()).status();
    });
  }
  std::vector<Status> results = RunAll(jobs);
  for (size_t k = 0; k < results.size(); ++k) results[k] = ProbeFence(where[k], results[k]);
  const Status fenced_off = FirstError(results);
  if (fenced_off.IsFenced()) {
    // F3: no cleanup (the deletes could hit a newer owner's MANIFEST of this number).
    for (auto& f : files) {
      if (f) client_->Close(f.get()).IgnoreError();
    }
    return fenced_off.Prepend("writing " + name);
  }
  Status first;
  for (size_t k = 0; k < results.size(); ++k) {
    if (results[k].ok()) continue;
    MarkSuspect(where[k], results[k]);
    failed->push_back(where[k]);
    if (first.ok()) {
      first = results[k].Prepend("writing " + name + " at StoC " + std::to_string(where[k]));
    }
  }
  if (first.ok()) {
    *out = std::move(files);
    return first;
  }
  for (size_t i = 0; i < where.size(); ++i) {
    if (files[i]) client_->Close(files[i].get()).IgnoreError();
    if (!touched[i]) continue;
    Status d = DeleteFile(where[i], name);
    LOG_IF(WARNING, !d.ok()) << "cleaning up the unfinished " << name << ": " << d.ToString();
  }
  return first;
}

Status StocTableStore::AppendManifest(const std::string& record) {
  const std::string what = "range " + std::to_string(options_.range_id) + ": MANIFEST append";
  if (record.empty()) return Status::InvalidArgument(what + ": empty record");
  MutexLock lock(&manifest_mu_);
  if (fenced()) return FencedError().Prepend(what);
  NOVA_RETURN_NOT_OK_PREPEND(EnsureManifestLocked(), what);
  if (manifest_.number != 0 && manifest_.broken) {  // invariant 2
    NOVA_RETURN_NOT_OK_PREPEND(CreateManifestLocked(manifest_.contents, {}),
                               what + ": repairing after a failed write");
    counters_.manifest_repairs.fetch_add(1, std::memory_order_relaxed);
  }
  if (manifest_.number == 0) {  // the range's first record starts its first MANIFEST
    NOVA_RETURN_NOT_OK_PREPEND(CreateManifestLocked(record, {}), what);
    counters_.manifest_appends.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }
  ScopedRegistration src(client_->transport(), record.data(), record.size(), transport::kLocalOnly);
  NOVA_RETURN_NOT_OK_PREPEND(src.status(), what);
  std::vector<std::function<Status()>> jobs;
  for (auto& f : manifest_.files) {
    jobs.push_back([&, file = f.get()] {
      if (fenced()) return FencedError();
      return AppendInBlocks(file, src.region(), 0, record.size()).status();  // as above
    });
  }
  std::vector<Status> results = RunAll(jobs);
  for (size_t k = 0; k < results.size(); ++k) {
    results[k] = ProbeFence(manifest_.files[k]->stoc_id, results[k]);
  }
  const Status fenced_off = FirstError(results);
  if (fenced_off.IsFenced()) {
    manifest_.broken = true;  // moot: a fenced store appends nothing more
    return fenced_off.Prepend(what);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    if (!results[k].ok()) MarkSuspect(manifest_.files[k]->stoc_id, results[k]);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    if (results[k].ok()) continue;
    manifest_.broken = true;
    return results[k].Prepend(what + " at StoC " + std::to_string(manifest_.files[k]->stoc_id));
  }
  manifest_.contents += record;
  counters_.manifest_appends.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status StocTableStore::RollManifest(const std::string& snapshot_record) {
  const std::string what = "range " + std::to_string(options_.range_id) + ": MANIFEST roll-over";
  if (snapshot_record.empty()) return Status::InvalidArgument(what + ": empty snapshot");
  MutexLock lock(&manifest_mu_);
  if (fenced()) return FencedError().Prepend(what);
  NOVA_RETURN_NOT_OK_PREPEND(EnsureManifestLocked(), what);
  NOVA_RETURN_NOT_OK_PREPEND(CreateManifestLocked(snapshot_record, {}), what);
  counters_.manifest_rolls.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Result<std::string> StocTableStore::ReadManifest() {
  MutexLock lock(&manifest_mu_);
  if (fenced()) return FencedError();
  CloseManifestLocked();
  std::string contents;
  NOVA_RETURN_NOT_OK(DiscoverManifestLocked(&contents));
  return contents;
}

Status StocTableStore::EvacuateManifest(const std::function<bool(uint32_t)>& must_move) {
  const std::string what =
      "range " + std::to_string(options_.range_id) + ": moving the MANIFEST off a StoC";
  MutexLock lock(&manifest_mu_);
  if (fenced()) return FencedError().Prepend(what);
  NOVA_RETURN_NOT_OK_PREPEND(EnsureManifestLocked(), what);
  if (manifest_.number == 0) return Status::OK();
  bool move = false;
  for (const auto& f : manifest_.files) move = move || must_move(f->stoc_id);
  if (!move) return Status::OK();
  std::vector<uint32_t> avoid;
  for (uint32_t id : stocs()) {
    if (must_move(id)) avoid.push_back(id);
  }
  for (const auto& f : manifest_.files) {
    if (must_move(f->stoc_id)) avoid.push_back(f->stoc_id);
  }
  // A repair (invariant 1): the acknowledged bytes as one block of a new MANIFEST, complete
  // on every replica before the old one is deleted.
  NOVA_RETURN_NOT_OK_PREPEND(CreateManifestLocked(manifest_.contents, avoid), what);
  counters_.manifest_repairs.fetch_add(1, std::memory_order_relaxed);
  LOG(INFO) << "range " << options_.range_id << ": MANIFEST " << manifest_.number
            << " written anew off the StoCs being drained or removed";
  return Status::OK();
}

void StocTableStore::NoteManifestFilesLocked() {
  std::vector<uint32_t> ids;
  for (const auto& f : manifest_.files) ids.push_back(f->stoc_id);
  MutexLock lock(&manifest_stocs_mu_);
  manifest_stocs_ = std::move(ids);
}

std::vector<uint32_t> StocTableStore::ManifestStocs() const {
  MutexLock lock(&manifest_stocs_mu_);
  return manifest_stocs_;
}

uint64_t StocTableStore::manifest_number() const {
  MutexLock lock(&manifest_mu_);
  return manifest_.number;
}

}  // namespace nova::stoc
