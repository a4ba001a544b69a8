// StocTableStore: reads through a table's stripe (parity), relocation of copies off StoCs
// that are gone or being drained, and the sweep of garbage table files. See the header.
#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/erasure_code.h"
#include "stoc/client/file_names.h"
#include "stoc/client/scoped_registration.h"
#include "stoc/client/stoc_table_store.h"

namespace nova::stoc {

namespace {

// The stripe column fragment `fragment` of `meta` is, or -1 if it is not in the stripe.
int ColumnOfFragment(const lsm::TableMeta& meta, uint32_t fragment) {
  if (meta.parity.empty()) return -1;
  if (fragment < meta.layout.num_data_fragments()) return static_cast<int>(fragment);
  if (fragment == meta.layout.meta_fragment() && meta.parity_covers_meta) {
    return static_cast<int>(fragment);
  }
  return -1;
}

// The StoC holding stripe column `column`'s first copy (0 for an empty column).
uint32_t ColumnStoc(const lsm::TableMeta& meta, int column, int k) {
  if (column >= k) return meta.parity[column - k].stoc_id;
  const auto& replicas = meta.fragments[column];
  return replicas.empty() ? 0 : replicas.front().stoc_id;
}

// Whether `meta` places copy (fragment, replica) of its file names at `stoc`: fragment
// indices past the meta fragment name parity fragments (replica 0).
bool Places(const lsm::TableMeta& meta, uint32_t fragment, uint32_t replica, uint32_t stoc) {
  const size_t n = meta.fragments.size();
  if (fragment < n) {
    return replica < meta.fragments[fragment].size() &&
           meta.fragments[fragment][replica].stoc_id == stoc;
  }
  const size_t j = fragment - n;
  return replica == 0 && j < meta.parity.size() && meta.parity[j].stoc_id == stoc;
}

}  // namespace

// ---- Reads through the stripe ----------------------------------------------------------

int StocTableStore::StripeColumns(const lsm::TableMeta& meta) {
  return static_cast<int>(meta.layout.num_data_fragments()) + (meta.parity_covers_meta ? 1 : 0);
}

uint64_t StocTableStore::ColumnSize(const lsm::TableMeta& meta, int column) {
  const int rho = static_cast<int>(meta.layout.num_data_fragments());
  if (column < rho) return meta.layout.FragmentSize(column);
  if (column == rho && meta.parity_covers_meta) {
    return meta.layout.FragmentSize(column) + (meta.filter.empty() ? 0 : meta.filter.front().size);
  }
  const size_t j = static_cast<size_t>(column - StripeColumns(meta));
  return j < meta.parity.size() ? meta.parity[j].size : 0;
}

bool StocTableStore::ReadSuspect(uint32_t stoc_id) {
  if (num_read_suspects_.load(std::memory_order_relaxed) == 0) return false;
  MutexLock lock(&rng_mu_);
  auto it = read_suspects_.find(stoc_id);
  if (it == read_suspects_.end()) return false;
  if (it->second > MonoNow()) return true;
  read_suspects_.erase(it);
  num_read_suspects_.store(read_suspects_.size(), std::memory_order_relaxed);
  return false;
}

void StocTableStore::MarkReadSuspect(uint32_t stoc_id) {
  MutexLock lock(&rng_mu_);
  read_suspects_[stoc_id] = MonoNow() + kSuspectPeriod;
  num_read_suspects_.store(read_suspects_.size(), std::memory_order_relaxed);
}

void StocTableStore::ClearReadSuspect(uint32_t stoc_id) {
  if (num_read_suspects_.load(std::memory_order_relaxed) == 0) return;
  MutexLock lock(&rng_mu_);
  read_suspects_.erase(stoc_id);
  num_read_suspects_.store(read_suspects_.size(), std::memory_order_relaxed);
}

Status StocTableStore::ReadFragmentOf(const lsm::TableMeta& meta, uint32_t fragment,
                                      uint64_t offset, uint64_t n, char* dst,
                                      std::atomic<uint32_t>* preferred) {
  const std::string what =
      "fragment " + std::to_string(fragment) + " of table " + std::to_string(meta.number);
  const auto& replicas = meta.fragments[fragment];
  const int column = ColumnOfFragment(meta, fragment);
  if (column < 0) return ReadAnyReplica(replicas, offset, n, dst, preferred, what);
  // A StoC that failed reads a moment ago is most likely down: decode without waiting for
  // it to fail again.
  bool all_suspect = !replicas.empty();
  for (const lsm::FragmentLocation& l : replicas) all_suspect = all_suspect && ReadSuspect(l.stoc_id);
  if (all_suspect && RebuildColumn(meta, column, offset, n, dst).ok()) return Status::OK();
  Status s = ReadAnyReplica(replicas, offset, n, dst, preferred, what);
  if (s.ok()) return s;
  if (all_suspect) return s;  // rebuilding failed already
  Status d = RebuildColumn(meta, column, offset, n, dst);
  if (d.ok()) return d;
  return d.Prepend(s.ToString() + "; then");
}

Status StocTableStore::ReadColumn(const lsm::TableMeta& meta, int column, uint64_t offset,
                                  uint64_t n, char* dst) {
  const int k = StripeColumns(meta);
  const uint64_t size = ColumnSize(meta, column);
  const uint64_t have = offset >= size ? 0 : std::min(n, size - offset);
  std::memset(dst + have, 0, n - have);
  if (have == 0) return Status::OK();
  const std::string table = " of table " + std::to_string(meta.number);
  if (column >= k) {
    const size_t j = static_cast<size_t>(column - k);
    Status s = ReadBlock(meta.parity[j], offset, have, dst);
    if (s.ok()) {
      ClearReadSuspect(meta.parity[j].stoc_id);
    } else if (!s.IsCorruption()) {
      MarkReadSuspect(meta.parity[j].stoc_id);
    }
    return s.Prepend("reading parity fragment " + std::to_string(j) + table);
  }
  const uint32_t rho = meta.layout.num_data_fragments();
  if (static_cast<uint32_t>(column) < rho) {
    return ReadAnyReplica(meta.fragments[column], offset, have, dst, nullptr,
                          "fragment " + std::to_string(column) + table);
  }
  // The meta column: the meta fragment, then the filter.
  const uint64_t meta_size = meta.layout.FragmentSize(rho);
  uint64_t done = 0;
  if (offset < meta_size) {
    done = std::min(have, meta_size - offset);
    NOVA_RETURN_NOT_OK(ReadAnyReplica(meta.fragments[rho], offset, done, dst, nullptr,
                                      "the meta fragment" + table));
  }
  if (done < have) {
    NOVA_RETURN_NOT_OK(ReadAnyReplica(meta.filter, offset + done - meta_size, have - done,
                                      dst + done, nullptr, "the filter" + table));
  }
  return Status::OK();
}

Status StocTableStore::RebuildColumn(const lsm::TableMeta& meta, int want, uint64_t offset,
                                     uint64_t n, char* dst) {
  const std::string what = "rebuilding [" + std::to_string(offset) + ", +" + std::to_string(n) +
                           ") of stripe column " + std::to_string(want) + " of table " +
                           std::to_string(meta.number);
  const int k = StripeColumns(meta);
  const int m = static_cast<int>(meta.parity.size());
  auto code = ErasureCode::Make(k, m);
  NOVA_RETURN_NOT_OK_PREPEND(code.status(), what);
  // Columns to read from: those on StoCs that did not fail lately first.
  std::vector<int> order, later;
  for (int c = 0; c < k + m; ++c) {
    if (c == want) continue;
    (ReadSuspect(ColumnStoc(meta, c, k)) ? later : order).push_back(c);
  }
  order.insert(order.end(), later.begin(), later.end());
  std::vector<std::string> rows;
  std::vector<int> have;
  Status last;
  for (int c : order) {
    if (static_cast<int>(have.size()) == k) break;
    std::string row(n, '\0');
    // A column that ends before `offset` reads as zeros: nothing to fetch.
    if (c >= k || ColumnSize(meta, c) > offset) {
      Status s = ReadColumn(meta, c, offset, n, row.data());
      if (!s.ok()) {
        last = s;
        continue;
      }
    }
    rows.push_back(std::move(row));
    have.push_back(c);
  }
  if (static_cast<int>(have.size()) < k) {
    return Status::Unavailable(what + ": only " + std::to_string(have.size()) + " of the " +
                               std::to_string(k) + " columns it needs could be read (last: " +
                               last.ToString() + ")");
  }
  std::vector<const uint8_t*> ptrs;
  for (const std::string& r : rows) ptrs.push_back(reinterpret_cast<const uint8_t*>(r.data()));
  NOVA_RETURN_NOT_OK_PREPEND(
      code->Reconstruct(want, have, n, ptrs.data(), reinterpret_cast<uint8_t*>(dst)), what);
  counters_.degraded_reads.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

// ---- Relocation -----------------------------------------------------------------------

Result<lsm::TableMeta> StocTableStore::RelocateTable(
    const lsm::TableMeta& meta, const std::function<bool(uint32_t)>& must_move,
    uint64_t* bytes_copied) {
  const std::string what = "range " + std::to_string(options_.range_id) + ": relocating table " +
                           std::to_string(meta.number);
  if (bytes_copied != nullptr) *bytes_copied = 0;
  if (fenced()) return FencedError().Prepend(what);
  NOVA_RETURN_NOT_OK_PREPEND(OpenTable(meta).status(), what);  // validates the metadata
  const uint32_t meta_fragment = meta.layout.meta_fragment();
  const uint32_t parity_base = static_cast<uint32_t>(meta.fragments.size());
  const int k = StripeColumns(meta);

  // StoCs nothing may be placed on.
  std::vector<uint32_t> gone;
  for (uint32_t id : stocs()) {
    if (must_move(id)) gone.push_back(id);
  }
  // Where the stripe's members are (they must stay on distinct StoCs).
  std::set<uint32_t> stripe;
  if (!meta.parity.empty()) {
    for (int c = 0; c < k; ++c) {
      for (const lsm::FragmentLocation& l : meta.fragments[c]) stripe.insert(l.stoc_id);
    }
    for (const lsm::FragmentLocation& l : meta.parity) stripe.insert(l.stoc_id);
  }

  lsm::TableMeta out = meta;
  struct Written {
    uint32_t stoc_id;
    std::string name;
  };
  std::vector<Written> written;
  uint64_t bytes = 0;
  auto fail = [&](const Status& s) -> Status {
    if (s.IsFenced() || fenced()) return s.Prepend(what);  // F3: no cleanup
    for (const Written& w : written) {
      Status d = DeleteFile(w.stoc_id, w.name);
      LOG_IF(WARNING, !d.ok()) << what << ": cleaning up after a failure: " << d.ToString();
    }
    return s.Prepend(what);
  };
  // Writes `data` (and `filter`, as a second block) as file `name` on a StoC other than
  // `exclude` and `gone`; sets *loc (and *filter_loc).
  // `fallback_exclude`, if not null: what to exclude instead when nothing outside `exclude`
  // is left (the copy's own fragment's StoCs: never two copies of a fragment on a StoC).
  auto write_copy = [&](const std::string& name, const std::string& data,
                        const std::string* filter_bytes, std::vector<uint32_t> exclude,
                        const std::vector<uint32_t>* fallback_exclude,
                        lsm::FragmentLocation* loc, lsm::FragmentLocation* filter_loc) -> Status {
    exclude.insert(exclude.end(), gone.begin(), gone.end());
    std::vector<uint32_t> to;
    Status placed = Choose(1, exclude, &to);
    if (!placed.ok() && fallback_exclude != nullptr) {
      // Every StoC left holds a member of the stripe: two members on one StoC beat a member
      // nowhere (the table then survives fewer losses until a compaction rewrites it).
      std::vector<uint32_t> narrower = *fallback_exclude;
      narrower.insert(narrower.end(), gone.begin(), gone.end());
      placed = Choose(1, narrower, &to);
      if (placed.ok()) {
        LOG(WARNING) << what << ": no StoC outside the stripe is left; " << name
                     << " shares StoC " << to.front() << " with another member of its stripe";
      }
    }
    NOVA_RETURN_NOT_OK_PREPEND(placed, "placing " + name);
    const uint32_t stoc = to.front();
    written.push_back({stoc, name});
    ScopedRegistration reg(client_->transport(), data.data(), data.size(), transport::kLocalOnly);
    NOVA_RETURN_NOT_OK(reg.status());
    const uint64_t largest =
        std::max<uint64_t>(data.size(), filter_bytes != nullptr ? filter_bytes->size() : 0);
    auto file = CreateFile(stoc, name, std::min(largest, options_.max_append_bytes));
    if (!file.ok()) {
      MarkSuspect(stoc, file.status());
      return file.status();
    }
    Status s;
    auto block = AppendInBlocks(file.value().get(), reg.region(), 0, data.size());
    if (block.ok()) {
      *loc = block.value();
      if (filter_bytes != nullptr && !filter_bytes->empty()) {
        ScopedRegistration freg(client_->transport(), filter_bytes->data(), filter_bytes->size(),
                                transport::kLocalOnly);
        s = freg.status();
        if (s.ok()) {
          auto fblock = AppendInBlocks(file.value().get(), freg.region(), 0, filter_bytes->size());
          if (fblock.ok()) {
            *filter_loc = fblock.value();
          } else {
            s = fblock.status();
          }
        }
      }
    } else {
      s = block.status();
    }
    Status c = client_->Close(file.value().get());
    LOG_IF(WARNING, !c.ok()) << "closing " << name << ": " << c.ToString();
    s = ProbeFence(stoc, s);
    if (!s.ok()) {
      if (!s.IsFenced()) MarkSuspect(stoc, s);
      return s.Prepend("writing " + name + " at StoC " + std::to_string(stoc));
    }
    bytes += data.size() + (filter_bytes != nullptr ? filter_bytes->size() : 0);
    counters_.copies_relocated.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  };

  for (uint32_t i = 0; i < meta.fragments.size(); ++i) {
    const auto& replicas = meta.fragments[i];
    bool any = false;
    for (const lsm::FragmentLocation& l : replicas) any = any || must_move(l.stoc_id);
    if (!any) continue;
    const uint64_t size = meta.layout.FragmentSize(i);
    std::string data(size, '\0');
    Status s = ReadFragmentOf(meta, i, 0, size, data.data(), nullptr);
    if (!s.ok()) return fail(s);
    std::string filter_bytes;
    const bool with_filter = i == meta_fragment && !meta.filter.empty();
    if (with_filter) {
      auto f = ReadFilter(meta);
      if (!f.ok()) return fail(f.status());
      filter_bytes = std::move(f.value());
    }
    const bool in_stripe = ColumnOfFragment(meta, i) >= 0;
    for (uint32_t r = 0; r < replicas.size(); ++r) {
      if (!must_move(replicas[r].stoc_id)) continue;
      std::vector<uint32_t> own;
      for (const lsm::FragmentLocation& l : out.fragments[i]) own.push_back(l.stoc_id);
      std::vector<uint32_t> exclude = own;
      if (in_stripe) exclude.insert(exclude.end(), stripe.begin(), stripe.end());
      lsm::FragmentLocation loc, floc;
      s = write_copy(TableFragmentFileName({options_.range_id, meta.number, i, r}), data,
                     with_filter ? &filter_bytes : nullptr, exclude, in_stripe ? &own : nullptr,
                     &loc, &floc);
      if (!s.ok()) return fail(s);
      out.fragments[i][r] = loc;
      if (with_filter && r < out.filter.size()) out.filter[r] = floc;
      if (in_stripe) stripe.insert(loc.stoc_id);
    }
  }
  for (uint32_t j = 0; j < meta.parity.size(); ++j) {
    if (!must_move(meta.parity[j].stoc_id)) continue;
    const uint64_t size = meta.parity[j].size;
    std::string data(size, '\0');
    // A draining StoC still serves its copy; a lost one's is computed again.
    Status s = ReadBlock(meta.parity[j], 0, size, data.data());
    if (!s.ok()) s = RebuildColumn(meta, k + static_cast<int>(j), 0, size, data.data());
    if (!s.ok()) return fail(s);
    std::vector<uint32_t> exclude(stripe.begin(), stripe.end());
    const std::vector<uint32_t> own{meta.parity[j].stoc_id};
    lsm::FragmentLocation loc;
    s = write_copy(TableFragmentFileName({options_.range_id, meta.number, parity_base + j, 0}),
                   data, nullptr, exclude, &own, &loc, nullptr);
    if (!s.ok()) return fail(s);
    out.parity[j] = loc;
    stripe.insert(loc.stoc_id);
  }
  if (bytes_copied != nullptr) *bytes_copied = bytes;
  return out;
}

Status StocTableStore::DeleteCopiesNotIn(const lsm::TableMeta& from, const lsm::TableMeta& to) {
  return DeleteCopiesNotInAny(from, {to});
}

Status StocTableStore::DeleteCopiesNotInAny(const lsm::TableMeta& from,
                                            const std::vector<lsm::TableMeta>& keep) {
  const std::string what = "range " + std::to_string(options_.range_id) +
                           ": deleting replaced copies of table " + std::to_string(from.number);
  if (fenced()) return FencedError().Prepend(what);
  Status first;
  auto drop = [&](uint32_t fragment, uint32_t replica, uint32_t stoc) {
    for (const lsm::TableMeta& k : keep) {
      if (Places(k, fragment, replica, stoc)) return;  // the same file is still in use
    }
    Status s = DeleteFile(
        stoc, TableFragmentFileName({options_.range_id, from.number, fragment, replica}));
    if (!s.ok() && first.ok()) first = s;
  };
  for (uint32_t i = 0; i < from.fragments.size(); ++i) {
    for (uint32_t r = 0; r < from.fragments[i].size(); ++r) {
      drop(i, r, from.fragments[i][r].stoc_id);
    }
  }
  const uint32_t parity_base = static_cast<uint32_t>(from.fragments.size());
  for (uint32_t j = 0; j < from.parity.size(); ++j) {
    drop(parity_base + j, 0, from.parity[j].stoc_id);
  }
  return first.Prepend(what);
}

// ---- Sweep ----------------------------------------------------------------------------

Result<uint64_t> StocTableStore::SweepTableFiles(const std::map<uint64_t, lsm::TableMeta>& live,
                                                 uint64_t unreferenced_below) {
  const std::string what = "range " + std::to_string(options_.range_id) + ": sweeping table files";
  if (fenced()) return FencedError().Prepend(what);
  std::atomic<uint64_t> deleted{0};
  const std::vector<Status> results =
      VisitTableFiles([&](uint32_t id, const std::string& name, const ParsedFileName& p) -> Status {
        auto it = live.find(p.number);
        const bool garbage = it == live.end() ? p.number < unreferenced_below
                                              : !Places(it->second, p.fragment, p.replica, id);
        if (!garbage) return Status::OK();
        NOVA_RETURN_NOT_OK(DeleteFile(id, name));
        LOG(INFO) << what << ": deleted " << name << " at StoC " << id
                  << (it == live.end() ? " (no live table has it)"
                                       : " (its table's copy is elsewhere now)");
        deleted.fetch_add(1, std::memory_order_relaxed);
        counters_.files_swept.fetch_add(1, std::memory_order_relaxed);
        return Status::OK();
      });
  size_t answered = 0;
  Status last;
  for (const Status& s : results) {
    if (s.IsFenced()) return s.Prepend(what);
    if (s.ok()) {
      ++answered;
    } else {
      last = s;
    }
  }
  if (answered == 0 && !results.empty()) return last.Prepend(what + ": no StoC answered");
  return deleted.load();
}

}  // namespace nova::stoc
