#include "common/lsm/memory_table_store.h"

#include <algorithm>
#include <cstring>

namespace nova::lsm {

namespace {

std::string TableName(uint64_t number) { return "table " + std::to_string(number); }

// Every copy of `t` (locations holding bytes).
std::vector<const FragmentLocation*> AllCopies(const TableMeta& t) {
  std::vector<const FragmentLocation*> out;
  for (const auto& replicas : t.fragments) {
    for (const FragmentLocation& l : replicas) {
      if (l.size > 0) out.push_back(&l);
    }
  }
  for (const FragmentLocation& l : t.filter) {
    if (l.size > 0) out.push_back(&l);
  }
  for (const FragmentLocation& l : t.parity) {
    if (l.size > 0) out.push_back(&l);
  }
  return out;
}

std::set<std::pair<uint32_t, uint64_t>> CopyKeys(const TableMeta& t) {
  std::set<std::pair<uint32_t, uint64_t>> keys;
  for (const FragmentLocation* l : AllCopies(t)) keys.emplace(l->stoc_id, l->file_id);
  return keys;
}

leveldb::Status ToLevelDB(const Status& s) {
  if (s.ok()) return leveldb::Status::OK();
  if (s.IsCorruption()) return leveldb::Status::Corruption(s.ToString());
  if (s.IsNotFound()) return leveldb::Status::NotFound(s.ToString());
  return leveldb::Status::IOError(s.ToString());
}

}  // namespace

// Reads through the store on every call, so a deleted table stops being readable.
class MemoryTableStore::Source final : public FragmentSource {
 public:
  // `store` must outlive this.
  // `fragments`: the copies it may read (StoC mode), else empty.
  Source(MemoryTableStore* store, uint64_t number,
         std::vector<std::vector<FragmentLocation>> fragments)
      : store_(store), number_(number), fragments_(std::move(fragments)) {}

  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override {
    const std::vector<FragmentLocation>* loc =
        fragment < fragments_.size() ? &fragments_[fragment] : nullptr;
    Status s = store_->ReadFragment(number_, loc, fragment, offset, n, scratch);
    if (s.ok()) *result = leveldb::Slice(scratch, n);
    return ToLevelDB(s);
  }

 private:
  MemoryTableStore* const store_;  // must outlive this
  const uint64_t number_;
  const std::vector<std::vector<FragmentLocation>> fragments_;
};

MemoryTableStore::MemoryTableStore(std::vector<uint32_t> stocs)
    : stoc_mode_(true), stocs_(std::move(stocs)) {}

std::optional<uint32_t> MemoryTableStore::PlaceLocked(
    const std::function<bool(uint32_t)>& avoid) {
  for (size_t i = 0; i < stocs_.size(); ++i) {
    const uint32_t s = stocs_[(next_stoc_ + i) % stocs_.size()];
    if (down_.count(s) != 0 || (avoid && avoid(s))) continue;
    next_stoc_ = (next_stoc_ + i + 1) % stocs_.size();
    return s;
  }
  return std::nullopt;
}

bool MemoryTableStore::DeleteCopiesLocked(StoredTable* t,
                                          const std::vector<const FragmentLocation*>& locs,
                                          uint64_t* deleted) {
  bool all = true;
  for (const FragmentLocation* l : locs) {
    auto key = std::pair(l->stoc_id, l->file_id);
    if (t->copies.count(key) == 0) continue;  // already gone
    if (down_.count(l->stoc_id) != 0) {
      all = false;
      continue;
    }
    t->copies.erase(key);
    ++*deleted;
  }
  return all;
}

bool MemoryTableStore::TakeFault(int* counter) {
  if (*counter <= 0) return false;
  --*counter;
  return true;
}

Status MemoryTableStore::WriteTable(uint64_t number, const BuiltTable& table,
                                    TableMeta* meta) {
  NOVA_RETURN_NOT_OK_PREPEND(table.layout.Validate(), "writing " + TableName(number));
  if (table.contents.size() != table.layout.file_size) {
    return Status::InvalidArgument(
        "writing " + TableName(number) + ": contents are " + std::to_string(table.contents.size()) +
        " bytes, the layout says " + std::to_string(table.layout.file_size));
  }
  StoredTable stored;
  std::vector<std::vector<FragmentLocation>> locations(table.layout.num_fragments());
  MutexLock lock(&mu_);
  // Where a new copy goes: the pseudo StoC (file id: the table number), or a file of its own
  // on the next StoC (StoC mode).
  Status placed;
  auto place = [&](uint64_t size) REQUIRES(mu_) {
    if (!stoc_mode_) return FragmentLocation{kMemoryStoreStocId, number, 0, size};
    std::optional<uint32_t> s = PlaceLocked(nullptr);
    if (!s) {
      placed = Status::Unavailable("writing " + TableName(number) + ": no StoC is up");
      return FragmentLocation{};
    }
    stored.copies.emplace(*s, next_file_id_);
    return FragmentLocation{*s, next_file_id_++, 0, size};
  };
  for (uint32_t i = 0; i < table.layout.num_fragments(); ++i) {
    stored.fragments.emplace_back(table.Fragment(i));
    if (!stored.fragments.back().empty()) {
      locations[i].push_back(place(stored.fragments.back().size()));
    }
  }
  stored.filter = table.filter;
  std::vector<FragmentLocation> filter;
  if (!stored.filter.empty()) filter.push_back(place(stored.filter.size()));
  NOVA_RETURN_NOT_OK(placed);
  if (fenced_) return Status::Fenced("writing " + TableName(number) + ": fenced");
  if (TakeFault(&fail_writes_)) {
    return Status::IOError("writing " + TableName(number) + ": injected fault");
  }
  if (!tables_.emplace(number, std::move(stored)).second) {
    return Status::AlreadyExists(TableName(number) + " is already stored");
  }
  ++tables_written_;
  meta->fragments = std::move(locations);
  meta->filter = std::move(filter);
  return Status::OK();
}

Result<std::unique_ptr<FragmentSource>> MemoryTableStore::OpenTable(const TableMeta& meta) {
  NOVA_RETURN_NOT_OK_PREPEND(meta.layout.Validate(), "opening " + TableName(meta.number));
  MutexLock lock(&mu_);
  auto it = tables_.find(meta.number);
  if (it == tables_.end()) {
    return Status::NotFound("opening " + TableName(meta.number) + ": not stored");
  }
  if (it->second.fragments.size() != meta.layout.num_fragments()) {
    return Status::Corruption("opening " + TableName(meta.number) +
                              ": its metadata does not match the stored table");
  }
  return std::unique_ptr<FragmentSource>(
      new Source(this, meta.number,
                 stoc_mode_ ? meta.fragments : std::vector<std::vector<FragmentLocation>>()));
}

Status MemoryTableStore::ReadFragment(uint64_t number, const std::vector<FragmentLocation>* loc,
                                      uint32_t fragment, uint64_t offset, size_t n, char* dst) {
  MutexLock lock(&mu_);
  if (TakeFault(&fail_reads_)) {
    return Status::IOError("reading " + TableName(number) + ": injected fault");
  }
  auto it = tables_.find(number);
  if (it == tables_.end()) return Status::NotFound("reading " + TableName(number) + ": not stored");
  if (stoc_mode_ && n > 0) {
    const bool readable = loc != nullptr && std::any_of(loc->begin(), loc->end(), [&](const auto& l)
        REQUIRES(mu_) {
          return it->second.copies.count(std::pair(l.stoc_id, l.file_id)) != 0;
        });
    if (!readable) {
      return Status::NotFound("reading " + TableName(number) + ": no copy of fragment " +
                              std::to_string(fragment) + " is readable");
    }
  }
  const auto& fragments = it->second.fragments;
  if (fragment >= fragments.size() || offset > fragments[fragment].size() ||
      n > fragments[fragment].size() - offset) {
    return Status::Corruption("reading " + TableName(number) + ": fragment " +
                              std::to_string(fragment) + " [" + std::to_string(offset) + ", +" +
                              std::to_string(n) + ") is outside the stored fragment");
  }
  std::memcpy(dst, fragments[fragment].data() + offset, n);
  return Status::OK();
}

Result<std::string> MemoryTableStore::ReadFilter(const TableMeta& meta) {
  MutexLock lock(&mu_);
  if (TakeFault(&fail_reads_)) {
    return Status::IOError("reading the filter of " + TableName(meta.number) + ": injected fault");
  }
  auto it = tables_.find(meta.number);
  if (it == tables_.end()) {
    return Status::NotFound("reading the filter of " + TableName(meta.number) + ": not stored");
  }
  if (stoc_mode_ && !it->second.filter.empty()) {
    const bool readable = std::any_of(meta.filter.begin(), meta.filter.end(), [&](const auto& l)
        REQUIRES(mu_) {
          return it->second.copies.count(std::pair(l.stoc_id, l.file_id)) != 0;
        });
    if (!readable) {
      return Status::NotFound("reading the filter of " + TableName(meta.number) +
                              ": no copy is readable");
    }
  }
  return it->second.filter;
}

Status MemoryTableStore::DeleteTable(const TableMeta& meta) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("deleting " + TableName(meta.number) + ": fenced");
  auto it = tables_.find(meta.number);
  if (it == tables_.end()) {
    return Status::NotFound("deleting " + TableName(meta.number) + ": not stored");
  }
  bool all = true;
  if (stoc_mode_) {
    uint64_t deleted = 0;
    all = DeleteCopiesLocked(&it->second, AllCopies(meta), &deleted);
    if (!it->second.copies.empty()) {
      return all ? Status::OK()
                 : Status::IOError("deleting " + TableName(meta.number) + ": a StoC is down");
    }
  }
  tables_.erase(it);
  ++tables_deleted_;
  return all ? Status::OK()
             : Status::IOError("deleting " + TableName(meta.number) + ": a StoC is down");
}

Result<TableMeta> MemoryTableStore::RelocateTable(
    const TableMeta& meta, const std::function<bool(uint32_t stoc_id)>& must_move,
    uint64_t* bytes_copied) {
  if (bytes_copied != nullptr) *bytes_copied = 0;
  std::function<void(uint64_t)> hook;
  {
    MutexLock lock(&mu_);
    hook = relocate_hook_;
  }
  if (hook) hook(meta.number);
  MutexLock lock(&mu_);
  const std::string what = "relocating " + TableName(meta.number);
  if (fenced_) return Status::Fenced(what + ": fenced");
  if (TakeFault(&fail_relocations_)) return Status::IOError(what + ": injected fault");
  auto it = tables_.find(meta.number);
  if (it == tables_.end()) return Status::NotFound(what + ": not stored");
  if (!stoc_mode_) return meta;
  TableMeta out = meta;
  std::vector<std::pair<uint32_t, uint64_t>> added;
  uint64_t bytes = 0;
  // Each selected copy goes to a StoC not selected and holding no other replica of it.
  auto move = [&](std::vector<FragmentLocation>* replicas) REQUIRES(mu_) -> bool {
    for (FragmentLocation& l : *replicas) {
      if (l.size == 0 || !must_move(l.stoc_id)) continue;
      std::optional<uint32_t> s = PlaceLocked([&](uint32_t c) {
        if (must_move(c)) return true;
        return std::any_of(replicas->begin(), replicas->end(),
                           [&](const FragmentLocation& r) { return r.stoc_id == c; });
      });
      if (!s) return false;
      l.stoc_id = *s;
      l.file_id = next_file_id_++;
      added.emplace_back(l.stoc_id, l.file_id);
      bytes += l.size;
    }
    return true;
  };
  bool ok = true;
  for (auto& replicas : out.fragments) ok = ok && move(&replicas);
  ok = ok && move(&out.filter);
  for (FragmentLocation& p : out.parity) {
    std::vector<FragmentLocation> one{p};
    ok = ok && move(&one);
    p = one.front();
  }
  if (!ok) return Status::Unavailable(what + ": no StoC to place a copy on");
  for (const auto& k : added) it->second.copies.insert(k);
  if (!added.empty()) ++relocations_;
  if (bytes_copied != nullptr) *bytes_copied = bytes;
  return out;
}

Status MemoryTableStore::DeleteCopiesNotIn(const TableMeta& from, const TableMeta& to) {
  return DeleteCopiesNotInAny(from, {to});
}

Status MemoryTableStore::DeleteCopiesNotInAny(const TableMeta& from,
                                              const std::vector<TableMeta>& keep_metas) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("deleting copies of " + TableName(from.number) + ": fenced");
  if (!stoc_mode_) return Status::OK();
  auto it = tables_.find(from.number);
  if (it == tables_.end()) return Status::OK();
  auto keep = CopyKeys(keep_metas.empty() ? TableMeta() : keep_metas.front());
  for (size_t k = 1; k < keep_metas.size(); ++k) {
    const auto more = CopyKeys(keep_metas[k]);
    keep.insert(more.begin(), more.end());
  }
  std::vector<const FragmentLocation*> gone;
  for (const FragmentLocation* l : AllCopies(from)) {
    if (keep.count(std::pair(l->stoc_id, l->file_id)) == 0) gone.push_back(l);
  }
  const bool all = DeleteCopiesLocked(&it->second, gone, &copies_deleted_);
  if (it->second.copies.empty()) tables_.erase(it);
  return all ? Status::OK()
             : Status::IOError("deleting copies of " + TableName(from.number) +
                               ": a StoC is down");
}

Result<uint64_t> MemoryTableStore::SweepTableFiles(const std::map<uint64_t, TableMeta>& live,
                                                   uint64_t unreferenced_below) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("sweeping table files: fenced");
  if (TakeFault(&fail_gc_calls_)) return Status::IOError("sweeping table files: injected fault");
  uint64_t swept = 0;
  for (auto it = tables_.begin(); it != tables_.end();) {
    auto l = live.find(it->first);
    auto& copies = it->second.copies;
    if (l != live.end()) {
      if (stoc_mode_) {
        const auto keep = CopyKeys(l->second);
        for (auto c = copies.begin(); c != copies.end();) {
          if (keep.count(*c) == 0 && down_.count(c->first) == 0) {
            c = copies.erase(c);
            ++swept;
          } else {
            ++c;
          }
        }
      }
      ++it;
    } else if (it->first < unreferenced_below) {
      if (!stoc_mode_) {
        ++swept;
        it = tables_.erase(it);
        continue;
      }
      for (auto c = copies.begin(); c != copies.end();) {
        if (down_.count(c->first) == 0) {
          c = copies.erase(c);
          ++swept;
        } else {
          ++c;
        }
      }
      it = copies.empty() ? tables_.erase(it) : std::next(it);
    } else {
      ++it;
    }
  }
  files_swept_ += swept;
  return swept;
}

Result<std::vector<uint64_t>> MemoryTableStore::ListTables() {
  MutexLock lock(&mu_);
  if (TakeFault(&fail_gc_calls_)) return Status::IOError("listing tables: injected fault");
  std::vector<uint64_t> numbers;
  numbers.reserve(tables_.size());
  for (const auto& [number, table] : tables_) numbers.push_back(number);
  return numbers;
}

Status MemoryTableStore::DeleteTableFiles(uint64_t number) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("deleting the files of " + TableName(number) + ": fenced");
  if (TakeFault(&fail_gc_calls_)) {
    return Status::IOError("deleting the files of " + TableName(number) + ": injected fault");
  }
  tables_collected_ += tables_.erase(number);
  return Status::OK();
}

Status MemoryTableStore::AppendManifest(const std::string& record) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("MANIFEST append: fenced");
  if (TakeFault(&fail_manifest_writes_)) return Status::IOError("MANIFEST append: injected fault");
  manifest_ += record;
  ++manifest_appends_;
  return Status::OK();
}

Status MemoryTableStore::RollManifest(const std::string& snapshot_record) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("MANIFEST roll: fenced");
  if (TakeFault(&fail_manifest_writes_)) return Status::IOError("MANIFEST roll: injected fault");
  manifest_ = snapshot_record;
  ++manifest_rolls_;
  return Status::OK();
}

Result<std::string> MemoryTableStore::ReadManifest() {
  MutexLock lock(&mu_);
  return manifest_;
}

void MemoryTableStore::Fence() {
  MutexLock lock(&mu_);
  fenced_ = true;
}

void MemoryTableStore::FailNextWrites(int n) {
  MutexLock lock(&mu_);
  fail_writes_ = n;
}
void MemoryTableStore::FailNextManifestWrites(int n) {
  MutexLock lock(&mu_);
  fail_manifest_writes_ = n;
}
void MemoryTableStore::FailNextReads(int n) {
  MutexLock lock(&mu_);
  fail_reads_ = n;
}
void MemoryTableStore::FailNextGcCalls(int n) {
  MutexLock lock(&mu_);
  fail_gc_calls_ = n;
}
void MemoryTableStore::FailNextRelocations(int n) {
  MutexLock lock(&mu_);
  fail_relocations_ = n;
}
void MemoryTableStore::SetRelocateHook(std::function<void(uint64_t)> hook) {
  MutexLock lock(&mu_);
  relocate_hook_ = std::move(hook);
}
void MemoryTableStore::SetStocs(std::vector<uint32_t> stocs) {
  MutexLock lock(&mu_);
  stocs_ = std::move(stocs);
  next_stoc_ = 0;
}
void MemoryTableStore::SetDownStocs(std::set<uint32_t> down) {
  MutexLock lock(&mu_);
  down_ = std::move(down);
}
uint64_t MemoryTableStore::CopiesOnStoc(uint32_t stoc) const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [number, t] : tables_) {
    for (const auto& c : t.copies) n += c.first == stoc ? 1 : 0;
  }
  return n;
}
uint64_t MemoryTableStore::total_copies() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [number, t] : tables_) n += t.copies.size();
  return n;
}
std::vector<uint64_t> MemoryTableStore::StoredTables() const {
  MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const auto& [number, t] : tables_) out.push_back(number);
  return out;
}
uint64_t MemoryTableStore::relocations() const {
  MutexLock lock(&mu_);
  return relocations_;
}
uint64_t MemoryTableStore::copies_deleted() const {
  MutexLock lock(&mu_);
  return copies_deleted_;
}
uint64_t MemoryTableStore::files_swept() const {
  MutexLock lock(&mu_);
  return files_swept_;
}

uint64_t MemoryTableStore::tables_written() const {
  MutexLock lock(&mu_);
  return tables_written_;
}
uint64_t MemoryTableStore::tables_deleted() const {
  MutexLock lock(&mu_);
  return tables_deleted_;
}
uint64_t MemoryTableStore::tables_collected() const {
  MutexLock lock(&mu_);
  return tables_collected_;
}
uint64_t MemoryTableStore::manifest_appends() const {
  MutexLock lock(&mu_);
  return manifest_appends_;
}
uint64_t MemoryTableStore::manifest_rolls() const {
  MutexLock lock(&mu_);
  return manifest_rolls_;
}
size_t MemoryTableStore::live_tables() const {
  MutexLock lock(&mu_);
  return tables_.size();
}
bool MemoryTableStore::HasTable(uint64_t number) const {
  MutexLock lock(&mu_);
  return tables_.count(number) != 0;
}
uint64_t MemoryTableStore::live_bytes() const {
  MutexLock lock(&mu_);
  uint64_t bytes = 0;
  for (const auto& [number, t] : tables_) {
    for (const auto& f : t.fragments) bytes += f.size();
    bytes += t.filter.size();
  }
  return bytes;
}

}  // namespace nova::lsm
