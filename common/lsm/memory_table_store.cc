#include "common/lsm/memory_table_store.h"

#include <cstring>

namespace nova::lsm {

namespace {

std::string TableName(uint64_t number) { return "table " + std::to_string(number); }

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
  Source(MemoryTableStore* store, uint64_t number) : store_(store), number_(number) {}

  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override {
    Status s = store_->ReadFragment(number_, fragment, offset, n, scratch);
    if (s.ok()) *result = leveldb::Slice(scratch, n);
    return ToLevelDB(s);
  }

 private:
  MemoryTableStore* const store_;  // must outlive this
  const uint64_t number_;
};

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
  for (uint32_t i = 0; i < table.layout.num_fragments(); ++i) {
    stored.fragments.emplace_back(table.Fragment(i));
    if (!stored.fragments.back().empty()) {
      locations[i].push_back(
          FragmentLocation{kMemoryStoreStocId, number, 0, stored.fragments.back().size()});
    }
  }
  stored.filter = table.filter;
  std::vector<FragmentLocation> filter;
  if (!stored.filter.empty()) {
    filter.push_back(FragmentLocation{kMemoryStoreStocId, number, 0, stored.filter.size()});
  }
  MutexLock lock(&mu_);
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
  return std::unique_ptr<FragmentSource>(new Source(this, meta.number));
}

Status MemoryTableStore::ReadFragment(uint64_t number, uint32_t fragment, uint64_t offset, size_t n,
                                      char* dst) {
  MutexLock lock(&mu_);
  if (TakeFault(&fail_reads_)) {
    return Status::IOError("reading " + TableName(number) + ": injected fault");
  }
  auto it = tables_.find(number);
  if (it == tables_.end()) return Status::NotFound("reading " + TableName(number) + ": not stored");
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
  return it->second.filter;
}

Status MemoryTableStore::DeleteTable(const TableMeta& meta) {
  MutexLock lock(&mu_);
  if (fenced_) return Status::Fenced("deleting " + TableName(meta.number) + ": fenced");
  if (tables_.erase(meta.number) == 0) {
    return Status::NotFound("deleting " + TableName(meta.number) + ": not stored");
  }
  ++tables_deleted_;
  return Status::OK();
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
