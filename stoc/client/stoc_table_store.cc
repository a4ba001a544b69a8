#include "stoc/client/stoc_table_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/erasure_code.h"
#include "stoc/client/file_names.h"
#include "stoc/client/scoped_registration.h"

namespace nova::stoc {

namespace {

// Read buffer pool made when the options bring none: classes from a small data block up
// to a large index block; bigger reads register their destination instead.
constexpr uint64_t kReadMinClassBytes = 4 << 10;
constexpr uint64_t kReadMaxClassBytes = 1 << 20;
constexpr uint64_t kReadSlabBytes = 1 << 20;
// Jobs that may wait for an io thread; past it the caller runs them itself.
constexpr size_t kMaxQueuedIo = 4096;

std::vector<uint32_t> Distinct(std::vector<uint32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

leveldb::Status ToLevelDB(const Status& s) {
  if (s.ok()) return leveldb::Status::OK();
  if (s.IsCorruption()) return leveldb::Status::Corruption(s.ToString());
  if (s.IsNotFound()) return leveldb::Status::NotFound(s.ToString());
  return leveldb::Status::IOError(s.ToString());
}

}  // namespace

// Reads the fragments of one table; remembers per fragment the replica that last worked.
// A fragment with a replica on a StoC of this host is read in place from a mapping of that
// replica's file (StocClient::MapLocal), which the source keeps until it is destroyed (the
// table is closed before its source: FragmentSource's contract for results in place).
class StocTableStore::Source final : public lsm::FragmentSource {
 public:
  // `store` must outlive this.
  Source(StocTableStore* store, const lsm::TableMeta& meta)
      : store_(store),
        meta_(meta),
        preferred_(new std::atomic<uint32_t>[meta.fragments.size()]()),
        mapped_(new std::atomic<const Mapped*>[meta.fragments.size()]()),
        map_after_(new std::atomic<uint64_t>[meta.fragments.size()]()) {}

  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override {
    if (fragment >= meta_.fragments.size()) {
      return leveldb::Status::Corruption("table " + std::to_string(meta_.number) +
                                         " has no fragment " + std::to_string(fragment));
    }
    if (const char* in_place = InPlace(fragment, offset, n)) {
      *result = leveldb::Slice(in_place, n);
      return leveldb::Status::OK();
    }
    Status s =
        store_->ReadFragmentOf(meta_, fragment, offset, n, scratch, &preferred_[fragment]);
    if (s.ok()) *result = leveldb::Slice(scratch, n);
    return ToLevelDB(s);
  }

 private:
  // A replica of a fragment on this host and the mapping of its file.
  struct Mapped {
    lsm::FragmentLocation loc;
    std::shared_ptr<const MappedFile> file;
  };
  // How long a fragment none of whose replicas could be mapped is read otherwise before
  // the source tries again (a StoC of this host that was down may be back).
  static constexpr uint64_t kRemapNanos = 1'000'000'000;

  // [offset, +n) of the fragment in place, or null if it must be read by ReadFragmentOf.
  const char* InPlace(uint32_t fragment, uint64_t offset, uint64_t n) {
    const Mapped* m = mapped_[fragment].load(std::memory_order_acquire);
    if (m == nullptr) {
      const uint64_t now = MonoNanos();
      if (now < map_after_[fragment].load(std::memory_order_relaxed)) return nullptr;
      m = MapFragment(fragment);
      if (m == nullptr) {
        map_after_[fragment].store(now + kRemapNanos, std::memory_order_relaxed);
        return nullptr;
      }
    }
    uint64_t at = 0;
    if (!FileOffsetOf(m->loc, offset, n, &at)) return nullptr;
    const char* p = m->file->Find(at, n);
    if (p != nullptr) store_->client_->CountMappedRead();
    return p;
  }

  // Maps the first replica of the fragment that is on this host; null if none is.
  const Mapped* MapFragment(uint32_t fragment) EXCLUDES(mu_) {
    for (const lsm::FragmentLocation& loc : meta_.fragments[fragment]) {
      std::shared_ptr<const MappedFile> file = store_->client_->MapLocal(loc.stoc_id, loc.file_id);
      if (file == nullptr) continue;
      MutexLock lock(&mu_);
      const Mapped* other = mapped_[fragment].load(std::memory_order_acquire);
      if (other != nullptr) return other;  // another thread mapped it first
      mappings_.push_back(std::make_unique<Mapped>(Mapped{loc, std::move(file)}));
      mapped_[fragment].store(mappings_.back().get(), std::memory_order_release);
      return mappings_.back().get();
    }
    return nullptr;
  }

  StocTableStore* const store_;  // must outlive this
  const lsm::TableMeta meta_;
  const std::unique_ptr<std::atomic<uint32_t>[]> preferred_;  // per fragment
  // Per fragment: its mapped replica (owned by mappings_) once one is, else null.
  const std::unique_ptr<std::atomic<const Mapped*>[]> mapped_;
  // Per fragment: MonoNanos() before which no mapping is tried again.
  const std::unique_ptr<std::atomic<uint64_t>[]> map_after_;
  Mutex mu_;
  std::vector<std::unique_ptr<Mapped>> mappings_ GUARDED_BY(mu_);
};

StocTableStore::StocTableStore(StocClient* client, StocTableStoreOptions options)
    : client_(client),
      options_(std::move(options)),
      loads_(options_.loads != nullptr ? options_.loads : &client->load_view()),
      rng_(options_.seed != 0 ? options_.seed : std::random_device()()),
      stocs_(Distinct(options_.stocs)),
      no_new_data_(Distinct(options_.no_new_data)) {}

void StocTableStore::SetStocs(std::vector<uint32_t> stocs, std::vector<uint32_t> no_new_data) {
  if (stocs.empty()) return;
  MutexLock lock(&rng_mu_);
  stocs_ = Distinct(std::move(stocs));
  no_new_data_ = Distinct(std::move(no_new_data));
}

std::vector<uint32_t> StocTableStore::stocs() const {
  MutexLock lock(&rng_mu_);
  return stocs_;
}

StocTableStore::~StocTableStore() {
  MutexLock lock(&manifest_mu_);
  CloseManifestLocked();
}

Status StocTableStore::Init() {
  const std::string what = "table store of range " + std::to_string(options_.range_id);
  const std::vector<uint32_t> all = stocs();
  if (all.empty()) return Status::InvalidArgument(what + ": no StoCs");
  auto check = [&](int n, const char* name) {
    if (n < 1 || static_cast<size_t>(n) > all.size()) {
      return Status::InvalidArgument(what + ": " + name + " must be in [1, " +
                                     std::to_string(all.size()) + "] (the StoCs), not " +
                                     std::to_string(n));
    }
    return Status::OK();
  };
  if (options_.availability == lsm::TableAvailability::kReplicas) {
    NOVA_RETURN_NOT_OK(check(options_.fragment_replicas, "fragment replicas"));
  }
  if (options_.availability == lsm::TableAvailability::kParity ||
      options_.availability == lsm::TableAvailability::kHybrid) {
    if (options_.parity_fragments < 1 || options_.parity_fragments > kMaxParityFragments) {
      return Status::InvalidArgument(what + ": parity fragments must be in [1, " +
                                     std::to_string(kMaxParityFragments) + "], not " +
                                     std::to_string(options_.parity_fragments));
    }
    // The smallest stripe: one data fragment (and the meta column in parity mode) and m
    // parity fragments, each on its own StoC.
    const int smallest = 1 + options_.parity_fragments +
                         (options_.availability == lsm::TableAvailability::kParity ? 1 : 0);
    NOVA_RETURN_NOT_OK(check(smallest, "a stripe's StoCs (data, meta and parity fragments)"));
  }
  NOVA_RETURN_NOT_OK(check(options_.manifest_replicas, "MANIFEST replicas"));
  if (options_.io_threads < 1) return Status::InvalidArgument(what + ": io threads must be >= 1");
  if (options_.owner_epoch > kMaxOwnerEpoch) {
    return Status::InvalidArgument(what + ": owner epoch " + std::to_string(options_.owner_epoch) +
                                   " exceeds " + std::to_string(kMaxOwnerEpoch));
  }
  read_buffers_ = options_.read_buffers;
  if (read_buffers_ == nullptr) {
    transport::SlabOptions slab;
    slab.pool_bytes = options_.read_pool_bytes;
    slab.min_class_bytes = kReadMinClassBytes;
    slab.max_class_bytes = kReadMaxClassBytes;
    slab.slab_bytes = kReadSlabBytes;
    own_read_buffers_ = std::make_unique<transport::SlabAllocator>(client_->transport(), slab);
    NOVA_RETURN_NOT_OK_PREPEND(own_read_buffers_->Init(), what + ": read buffers");
    read_buffers_ = own_read_buffers_.get();
  }
  io_pool_ = std::make_unique<ThreadPool>("ltc-store-io", static_cast<size_t>(options_.io_threads),
                                          kMaxQueuedIo);
  if (options_.owner_epoch == 0 || !options_.fence_on_init) return Status::OK();
  // F1: before any MANIFEST is read.
  auto unconfirmed = FenceStocs(all);
  if (!unconfirmed.ok()) return unconfirmed.status().Prepend(what);
  MutexLock lock(&manifest_mu_);
  unfenced_ = std::move(unconfirmed.value());
  if (unfenced_.size() >= static_cast<size_t>(options_.manifest_replicas)) {
    std::string ids;
    for (uint32_t id : unfenced_) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    return Status::Unavailable(
        what + ": fencing owner epoch " + std::to_string(options_.owner_epoch) + " needs " +
        std::to_string(all.size() - options_.manifest_replicas + 1) + " of " +
        std::to_string(all.size()) + " StoCs, but StoCs " + ids +
        " did not confirm (they could hold every replica of a MANIFEST an older owner still "
        "appends to)");
  }
  return Status::OK();
}

// ---- Owner fencing --------------------------------------------------------------------

Status StocTableStore::FencedError() const {
  return Status::Fenced("range " + std::to_string(options_.range_id) + ": owner epoch " +
                        std::to_string(options_.owner_epoch) +
                        " was fenced off by a newer owner; this store writes nothing more");
}

Status StocTableStore::NoteFenced(const Status& s) {
  if (s.IsFenced() && !fenced_.exchange(true, std::memory_order_acq_rel)) {
    LOG(WARNING) << "range " << options_.range_id << ": owner epoch " << options_.owner_epoch
                 << " is fenced off (" << s.ToString() << "): no more writes, repairs or deletes";
  }
  return s;
}

Status StocTableStore::FirstError(const std::vector<Status>& results) {
  for (const Status& s : results) {
    if (s.IsFenced()) return s;
  }
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status StocTableStore::ProbeFence(uint32_t stoc_id, const Status& failure) {
  if (options_.owner_epoch == 0 || failure.ok() || failure.IsFenced()) return failure;
  if (fenced()) return FencedError();
  // A StoC that cannot be reached cannot have answered Fenced either: no second wait.
  if (failure.IsTimedOut() || failure.IsNetworkError() || failure.IsUnavailable()) return failure;
  Status probe = client_->FenceRange(stoc_id, options_.range_id, options_.owner_epoch);
  if (probe.IsFenced()) return NoteFenced(probe).Prepend("after " + failure.ToString());
  return failure;
}

Result<std::vector<uint32_t>> StocTableStore::FenceStocs(const std::vector<uint32_t>& stocs) {
  std::vector<std::function<Status()>> jobs;
  for (uint32_t id : stocs) {
    jobs.push_back(
        [this, id] { return client_->FenceRange(id, options_.range_id, options_.owner_epoch); });
  }
  const std::vector<Status> results = RunAll(jobs);
  std::vector<uint32_t> unconfirmed;
  for (size_t k = 0; k < results.size(); ++k) {
    if (results[k].IsFenced()) {
      return NoteFenced(results[k]).Prepend("fencing StoC " + std::to_string(stocs[k]));
    }
    if (!results[k].ok()) {
      LOG(WARNING) << "range " << options_.range_id << ": StoC " << stocs[k]
                   << " did not confirm the fence of owner epoch " << options_.owner_epoch << ": "
                   << results[k].ToString();
      unconfirmed.push_back(stocs[k]);
    }
  }
  return unconfirmed;
}

// ---- Helpers --------------------------------------------------------------------------

std::vector<Status> StocTableStore::RunAll(const std::vector<std::function<Status()>>& jobs) {
  std::vector<Status> results(jobs.size());
  std::vector<std::function<void()>> run;
  run.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    run.push_back([&, i] { results[i] = jobs[i](); });
  }
  nova::RunAll(io_pool_.get(), run);
  return results;
}

Status StocTableStore::Choose(int n, const std::vector<uint32_t>& exclude,
                              std::vector<uint32_t>* out) {
  std::vector<uint32_t> candidates, healthy;
  const MonoTime now = MonoNow();
  MutexLock lock(&rng_mu_);
  for (uint32_t id : stocs_) {
    if (std::find(exclude.begin(), exclude.end(), id) != exclude.end()) continue;
    if (std::binary_search(no_new_data_.begin(), no_new_data_.end(), id)) continue;
    candidates.push_back(id);
    auto it = suspects_.find(id);
    if (it != suspects_.end() && it->second <= now) {
      suspects_.erase(it);
      it = suspects_.end();
    }
    if (it == suspects_.end()) healthy.push_back(id);
  }
  const auto& from = n > 0 && healthy.size() >= static_cast<size_t>(n) ? healthy : candidates;
  return ChooseStocs(options_.placement, from, *loads_, n, 2 * n, &rng_, out);
}

size_t StocTableStore::HealthyStocs() {
  const MonoTime now = MonoNow();
  MutexLock lock(&rng_mu_);
  size_t n = 0;
  for (uint32_t id : stocs_) {
    if (std::binary_search(no_new_data_.begin(), no_new_data_.end(), id)) continue;
    auto it = suspects_.find(id);
    n += it == suspects_.end() || it->second <= now ? 1 : 0;
  }
  return n;
}

void StocTableStore::MarkSuspect(uint32_t stoc_id, const Status& why) {
  LOG(WARNING) << "range " << options_.range_id << ": leaving StoC " << stoc_id
               << " out of placement for " << kSuspectPeriod.count() << " s after "
               << why.ToString();
  MutexLock lock(&rng_mu_);
  suspects_[stoc_id] = MonoNow() + kSuspectPeriod;
}

Status StocTableStore::DeleteFile(uint32_t stoc_id, const std::string& name) {
  if (fenced()) return FencedError();
  Status s = NoteFenced(client_->Delete(stoc_id, name, options_.owner_epoch));
  if (s.IsNotFound()) return Status::OK();
  return s.Prepend("deleting " + name + " at StoC " + std::to_string(stoc_id));
}

Result<lsm::FragmentLocation> StocTableStore::AppendInBlocks(StocFile* file,
                                                        const transport::MemoryRegion& src,
                                                        uint64_t offset, uint64_t length) {
  DCHECK_GT(length, 0u);
  const uint64_t chunk = std::max<uint64_t>(1, options_.max_append_bytes);
  lsm::FragmentLocation whole;
  for (uint64_t done = 0, i = 0; done < length; ++i) {
    if (fenced()) return FencedError();
    const uint64_t n = std::min(chunk, length - done);
    auto h = client_->Append(file, src, offset + done, n);
    if (!h.ok()) return NoteFenced(h.status());
    if (i == 0) {
      whole = lsm::FragmentLocation{h->stoc_id, h->file_id, h->offset, 0};
    } else {
      if (i == 1) {
        whole.chunk_bytes = chunk;
        whole.chunk_stride = h->offset - whole.offset;
      }
      // Readers find chunk i at offset + i * stride: the StoC must have placed it there.
      if (h->file_id != whole.file_id || h->offset < whole.offset + chunk ||
          h->offset != whole.offset + i * whole.chunk_stride) {
        return Status::IOError("StoC " + std::to_string(h->stoc_id) + " placed chunk " +
                               std::to_string(i) + " of a fragment at offset " +
                               std::to_string(h->offset) + ", not after the previous one at " +
                               "the same distance as before");
      }
    }
    done += n;
    whole.size = done;
  }
  return whole;
}

Result<std::unique_ptr<StocFile>> StocTableStore::CreateFile(uint32_t stoc_id,
                                                                   const std::string& name,
                                                                   uint64_t slot_bytes) {
  if (fenced()) return FencedError();
  OpenOptions o;
  o.create = true;
  o.for_append = true;
  o.slot_bytes = slot_bytes;
  o.owner_epoch = options_.owner_epoch;
  auto file = client_->Open(stoc_id, name, FileKind::kDisk, o);
  if (!file.ok()) {
    return NoteFenced(file.status())
        .Prepend("creating " + name + " at StoC " + std::to_string(stoc_id));
  }
  if (file.value()->length == 0) return file;
  // Its blocks would sit before ours and its name would be deleted with our table.
  LOG(WARNING) << "StoC " << stoc_id << " already holds " << name << " (" << file.value()->length
               << " bytes, left by an earlier attempt): replacing it";
  client_->Close(file.value().get()).IgnoreError();
  NOVA_RETURN_NOT_OK(DeleteFile(stoc_id, name));
  file = client_->Open(stoc_id, name, FileKind::kDisk, o);
  if (!file.ok()) {
    return NoteFenced(file.status())
        .Prepend("creating " + name + " at StoC " + std::to_string(stoc_id));
  }
  return file;
}

bool StocTableStore::FileOffsetOf(const lsm::FragmentLocation& loc, uint64_t offset, uint64_t n,
                                  uint64_t* file_offset) {
  if (offset > loc.size || n > loc.size - offset) return false;
  if (loc.chunk_bytes == 0) {
    *file_offset = loc.offset + offset;
    return true;
  }
  if (n > loc.chunk_bytes - offset % loc.chunk_bytes) return false;  // runs into the next chunk
  *file_offset = loc.offset + offset / loc.chunk_bytes * loc.chunk_stride + offset % loc.chunk_bytes;
  return true;
}

Status StocTableStore::ReadBlock(const lsm::FragmentLocation& loc, uint64_t offset, uint64_t n,
                                 char* dst) {
  if (offset > loc.size || n > loc.size - offset) {
    return Status::Corruption("read [" + std::to_string(offset) + ", +" + std::to_string(n) +
                              ") outside a block of " + std::to_string(loc.size) + " bytes");
  }
  if (n == 0) return Status::OK();
  // One StoC read stays inside one chunk and carries no more than an append
  // (--stoc_max_block_mb); a longer range is read piece by piece.
  const uint64_t max_block = std::max<uint64_t>(1, options_.max_append_bytes);
  auto piece = [&](uint64_t at, uint64_t left) {
    const uint64_t k = std::min(left, max_block);
    return loc.chunk_bytes == 0 ? k : std::min(k, loc.chunk_bytes - at % loc.chunk_bytes);
  };
  if (piece(offset, n) < n) {
    for (uint64_t done = 0; done < n;) {
      const uint64_t k = piece(offset + done, n - done);
      NOVA_RETURN_NOT_OK(ReadBlock(loc, offset + done, k, dst + done));
      done += k;
    }
    return Status::OK();
  }
  uint64_t file_offset = 0;
  FileOffsetOf(loc, offset, n, &file_offset);  // true: inside one chunk here
  const BlockHandle block{loc.stoc_id, loc.file_id, FileKind::kDisk, file_offset, n};
  // A StoC on this host: straight into dst, without a staging buffer.
  if (client_->ReadLocal(block, dst)) return Status::OK();
  if (n <= read_buffers_->options().max_class_bytes) {
    auto buf = read_buffers_->Allocate(n);
    if (buf.ok()) {
      Status s = client_->Read(block, *buf->region, buf->offset);
      if (s.IsTimedOut()) {
        // The StoC may still WRITE into the buffer later: never hand it out again.
        LOG(WARNING) << "read timed out; quarantining its " << buf->capacity << "-byte buffer";
        return s;
      }
      if (s.ok()) std::memcpy(dst, buf->data, n);
      read_buffers_->Free(buf.value());
      return s;
    }
  }
  // Large, or the pool is exhausted: the StoC writes straight into dst. Deregistering
  // waits for (and then refuses) any WRITE of a timed-out read.
  ScopedRegistration reg(client_->transport(), dst, n, transport::kRemoteWrite);
  NOVA_RETURN_NOT_OK(reg.status());
  return client_->Read(block, reg.region(), 0);
}

Status StocTableStore::ReadAnyReplica(const std::vector<lsm::FragmentLocation>& replicas,
                                      uint64_t offset, uint64_t n, char* dst,
                                      std::atomic<uint32_t>* preferred, const std::string& what) {
  if (replicas.empty()) return Status::Corruption(what + " has no replica to read");
  const size_t start = preferred != nullptr ? preferred->load(std::memory_order_relaxed) : 0;
  Status last;
  for (size_t k = 0; k < replicas.size(); ++k) {
    const size_t r = (start + k) % replicas.size();
    last = ReadBlock(replicas[r], offset, n, dst);
    if (last.ok()) {
      ClearReadSuspect(replicas[r].stoc_id);
      if (k != 0 && preferred != nullptr) preferred->store(static_cast<uint32_t>(r));
      return last;
    }
    const bool more = k + 1 < replicas.size();
    if (more) counters_.read_failovers.fetch_add(1, std::memory_order_relaxed);
    if (!last.IsCorruption()) MarkReadSuspect(replicas[r].stoc_id);
    LOG(WARNING) << "reading " << what << " from replica " << r << " at StoC "
                 << replicas[r].stoc_id << ": " << last.ToString()
                 << (more ? "; trying the next replica" : "; no replica left");
  }
  return last.Prepend("reading " + what + " (every replica failed)");
}

// ---- Tables ---------------------------------------------------------------------------

Status StocTableStore::WriteTable(uint64_t number, const lsm::BuiltTable& table,
                                  lsm::TableMeta* meta) {
  const std::string what =
      "writing table " + std::to_string(number) + " of range " + std::to_string(options_.range_id);
  if (fenced()) return FencedError().Prepend(what);
  const lsm::TableLayout& layout = table.layout;
  NOVA_RETURN_NOT_OK_PREPEND(layout.Validate(), what);
  if (table.contents.size() != layout.file_size) {
    return Status::InvalidArgument(what + ": contents are " +
                                   std::to_string(table.contents.size()) +
                                   " bytes, the layout says " + std::to_string(layout.file_size));
  }
  const uint32_t rho = layout.num_data_fragments();
  const uint32_t meta_fragment = layout.meta_fragment();
  const bool has_filter = !table.filter.empty();

  // How many copies of what ("Availability" in the header).
  lsm::TableAvailability mode = options_.availability;
  int m = options_.parity_fragments;
  int replicas = options_.fragment_replicas;
  if (mode == lsm::TableAvailability::kParity || mode == lsm::TableAvailability::kHybrid) {
    // Fewer StoCs take data than the stripe needs (StoCs lost or draining): fewer parity
    // fragments, or, if not even one fits, m + 1 copies where they fit, never fewer than 2
    // (with one StoC left the write waits for another, as it always did: a table that one
    // more loss destroys would let its memtable's log go). The table records what it got;
    // relocation does not widen it later (a later compaction rewrites it).
    int members = mode == lsm::TableAvailability::kParity ? 1 : 0;
    for (uint32_t i = 0; i < rho; ++i) members += layout.FragmentSize(i) != 0 ? 1 : 0;
    const int healthy = static_cast<int>(HealthyStocs());
    if (members + m > healthy) {
      const int fit = healthy - members;
      LOG_EVERY_N(WARNING, 100) << what << ": " << healthy << " StoCs take data, too few for "
                                << members << " + " << m << " stripe fragments: "
                                << (fit >= 1 ? "writing " + std::to_string(fit) + " parity"
                                             : "writing copies instead");
      if (fit >= 1) {
        m = fit;
      } else {
        replicas = std::max(2, std::min(m + 1, healthy));
        mode = lsm::TableAvailability::kReplicas;
      }
    }
  }
  if (mode == lsm::TableAvailability::kReplicas && replicas > 1) {
    const int healthy = static_cast<int>(HealthyStocs());
    if (healthy < replicas) {
      // Never fewer than 2 (see above): with one StoC left the write fails and is retried.
      LOG_EVERY_N(WARNING, 100) << what << ": " << healthy << " StoCs take data, too few for "
                                << replicas << " copies: writing " << std::max(healthy, 2);
      replicas = std::max(healthy, 2);
    }
  }
  const bool striped =
      mode == lsm::TableAvailability::kParity || mode == lsm::TableAvailability::kHybrid;
  const bool covers_meta = mode == lsm::TableAvailability::kParity;
  const int data_copies = mode == lsm::TableAvailability::kReplicas ? replicas : 1;
  const int meta_copies = mode == lsm::TableAvailability::kReplicas ? replicas
                          : mode == lsm::TableAvailability::kHybrid ? m + 1
                                                                    : 1;

  // Parity: the stripe's columns are the data fragments, then (parity mode) the meta
  // fragment followed by the filter.
  std::vector<std::string> parity;
  if (striped) {
    std::vector<std::string_view> columns;
    const std::string_view contents(table.contents);
    for (uint32_t i = 0; i < rho; ++i) {
      columns.push_back(contents.substr(layout.FragmentStart(i), layout.FragmentSize(i)));
    }
    std::string meta_column;
    if (covers_meta) {
      meta_column.reserve(layout.FragmentSize(meta_fragment) + table.filter.size());
      meta_column.append(contents.substr(layout.FragmentStart(meta_fragment)));
      meta_column.append(table.filter);
      columns.push_back(meta_column);
    }
    auto code = ErasureCode::Make(static_cast<int>(columns.size()), m);
    NOVA_RETURN_NOT_OK_PREPEND(code.status(), what);
    code->EncodeUneven(columns, &parity);
    if (!parity.empty() && parity.front().empty()) parity.clear();  // every column is empty
  }

  // Placement: fragment i's copy r goes to where[i][r]; parity fragment j to parity_at[j].
  std::vector<std::vector<uint32_t>> where(layout.num_fragments());
  std::vector<uint32_t> parity_at;
  if (striped) {
    // Every member of the stripe on its own StoC: a lost StoC costs one column.
    std::vector<uint32_t> members;
    for (uint32_t i = 0; i < rho; ++i) {
      if (layout.FragmentSize(i) != 0) members.push_back(i);
    }
    if (covers_meta) members.push_back(meta_fragment);
    std::vector<uint32_t> chosen;
    const int n = static_cast<int>(members.size() + parity.size());
    NOVA_RETURN_NOT_OK_PREPEND(Choose(n, {}, &chosen),
                               what + ": placing a stripe of " + std::to_string(n) + " fragments");
    for (size_t k = 0; k < members.size(); ++k) where[members[k]] = {chosen[k]};
    parity_at.assign(chosen.begin() + static_cast<long>(members.size()), chosen.end());
    if (!covers_meta) {
      NOVA_RETURN_NOT_OK_PREPEND(Choose(meta_copies, {}, &where[meta_fragment]),
                                 what + ": placing the meta fragment's replicas");
    }
  } else {
    std::vector<uint32_t> primaries, meta_stoc;
    NOVA_RETURN_NOT_OK_PREPEND(Choose(static_cast<int>(rho), {}, &primaries),
                               what + ": placing " + std::to_string(rho) + " data fragments");
    NOVA_RETURN_NOT_OK_PREPEND(Choose(1, {}, &meta_stoc), what + ": placing the meta fragment");
    primaries.push_back(meta_stoc[0]);
    for (uint32_t i = 0; i < layout.num_fragments(); ++i) {
      where[i] = {primaries[i]};
      const int copies = i == meta_fragment ? meta_copies : data_copies;
      if (copies > 1) {
        std::vector<uint32_t> more;
        NOVA_RETURN_NOT_OK_PREPEND(Choose(copies - 1, {primaries[i]}, &more),
                                   what + ": placing replicas");
        where[i].insert(where[i].end(), more.begin(), more.end());
      }
    }
  }

  ScopedRegistration contents(client_->transport(), table.contents.data(), table.contents.size(),
                              transport::kLocalOnly);
  NOVA_RETURN_NOT_OK_PREPEND(contents.status(), what);
  std::unique_ptr<ScopedRegistration> filter;
  if (has_filter) {
    filter = std::make_unique<ScopedRegistration>(client_->transport(), table.filter.data(),
                                                  table.filter.size(), transport::kLocalOnly);
    NOVA_RETURN_NOT_OK_PREPEND(filter->status(), what + ": filter");
  }
  std::vector<std::unique_ptr<ScopedRegistration>> parity_regs;
  for (const std::string& p : parity) {
    parity_regs.push_back(std::make_unique<ScopedRegistration>(client_->transport(), p.data(),
                                                               p.size(), transport::kLocalOnly));
    NOVA_RETURN_NOT_OK_PREPEND(parity_regs.back()->status(), what + ": parity");
  }

  // One file per copy of a non-empty fragment, and per parity fragment.
  struct FileWrite {
    uint32_t fragment = 0;  // file name's fragment: num_fragments + j for parity j
    uint32_t replica = 0;
    uint32_t stoc_id = 0;
    std::string name;
    const transport::MemoryRegion* region = nullptr;  // the bytes to write
    uint64_t offset = 0, size = 0;
    bool with_filter = false;
    bool touched = false;                 // may exist at the StoC: delete on failure
    lsm::FragmentLocation block, filter;  // where the fragment (and filter) landed
  };
  std::vector<FileWrite> files;
  for (uint32_t i = 0; i < layout.num_fragments(); ++i) {
    if (layout.FragmentSize(i) == 0) continue;
    for (uint32_t r = 0; r < where[i].size(); ++r) {
      FileWrite f;
      f.fragment = i;
      f.replica = r;
      f.stoc_id = where[i][r];
      f.name = TableFragmentFileName({options_.range_id, number, i, r});
      f.region = &contents.region();
      f.offset = layout.FragmentStart(i);
      f.size = layout.FragmentSize(i);
      f.with_filter = has_filter && i == meta_fragment;
      files.push_back(std::move(f));
    }
  }
  for (uint32_t j = 0; j < parity.size(); ++j) {
    FileWrite f;
    f.fragment = layout.num_fragments() + j;
    f.stoc_id = parity_at[j];
    f.name = TableFragmentFileName({options_.range_id, number, f.fragment, 0});
    f.region = &parity_regs[j]->region();
    f.size = parity[j].size();
    files.push_back(std::move(f));
  }

  std::vector<std::function<Status()>> jobs;
  for (FileWrite& f : files) {
    jobs.push_back([&, fw = &f]() -> Status {
      fw->touched = true;
      const uint64_t largest =
          std::max<uint64_t>(fw->size, fw->with_filter ? table.filter.size() : 0);
      auto file = CreateFile(fw->stoc_id, fw->name, std::min(largest, options_.max_append_bytes));
      if (!file.ok()) return file.status();
      auto block = AppendInBlocks(file.value().get(), *fw->region, fw->offset, fw->size);
      if (!block.ok()) return block.status();
      fw->block = block.value();
      if (fw->with_filter) {
        block = AppendInBlocks(file.value().get(), filter->region(), 0, table.filter.size());
        if (!block.ok()) return block.status();
        fw->filter = block.value();
      }
      // The blocks are durable; closing only releases the StoC's append slot.
      Status c = client_->Close(file.value().get());
      LOG_IF(WARNING, !c.ok()) << "closing " << fw->name << ": " << c.ToString();
      return Status::OK();
    });
  }
  std::vector<Status> results = RunAll(jobs);
  for (size_t k = 0; k < files.size(); ++k) results[k] = ProbeFence(files[k].stoc_id, results[k]);
  const Status fenced_off = FirstError(results);
  if (fenced_off.IsFenced()) {
    // F3: no cleanup. Its deletes could remove a newer owner's files of the same names.
    return fenced_off.Prepend(what);
  }
  for (size_t k = 0; k < files.size(); ++k) {
    if (!results[k].ok()) MarkSuspect(files[k].stoc_id, results[k]);
  }
  for (size_t k = 0; k < files.size(); ++k) {
    if (results[k].ok()) continue;
    const FileWrite& bad = files[k];
    for (const FileWrite& f : files) {
      if (!f.touched) continue;
      Status d = DeleteFile(f.stoc_id, f.name);
      LOG_IF(WARNING, !d.ok()) << what << ": cleaning up after a failure: " << d.ToString();
    }
    return results[k].Prepend(what + ": fragment " + std::to_string(bad.fragment) + " replica " +
                              std::to_string(bad.replica) + " at StoC " +
                              std::to_string(bad.stoc_id));
  }

  meta->fragments.assign(layout.num_fragments(), {});
  meta->filter.clear();
  meta->parity.assign(parity.size(), {});
  meta->parity_covers_meta = covers_meta && !parity.empty();
  uint64_t bytes = 0;
  for (const FileWrite& f : files) {
    bytes += f.block.size;
    if (f.fragment >= layout.num_fragments()) {
      meta->parity[f.fragment - layout.num_fragments()] = f.block;
      counters_.parity_files_written.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    auto& replicas = meta->fragments[f.fragment];
    if (replicas.size() <= f.replica) replicas.resize(f.replica + 1);
    replicas[f.replica] = f.block;
    if (f.with_filter) {
      if (meta->filter.size() <= f.replica) meta->filter.resize(f.replica + 1);
      meta->filter[f.replica] = f.filter;
      bytes += f.filter.size;
    }
  }
  counters_.tables_written.fetch_add(1, std::memory_order_relaxed);
  counters_.fragment_files_written.fetch_add(files.size() - parity.size(), std::memory_order_relaxed);
  counters_.bytes_written.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

Result<std::unique_ptr<lsm::FragmentSource>> StocTableStore::OpenTable(const lsm::TableMeta& meta) {
  const std::string what = "opening table " + std::to_string(meta.number);
  NOVA_RETURN_NOT_OK_PREPEND(meta.layout.Validate(), what);
  if (meta.fragments.size() != meta.layout.num_fragments()) {
    return Status::Corruption(what + ": " + std::to_string(meta.fragments.size()) +
                              " fragment entries for " +
                              std::to_string(meta.layout.num_fragments()) + " fragments");
  }
  for (uint32_t i = 0; i < meta.fragments.size(); ++i) {
    const uint64_t size = meta.layout.FragmentSize(i);
    if (size != 0 && meta.fragments[i].empty()) {
      return Status::Corruption(what + ": fragment " + std::to_string(i) + " has no replica");
    }
    for (const lsm::FragmentLocation& loc : meta.fragments[i]) {
      if (loc.size != size) {
        return Status::Corruption(what + ": a replica of fragment " + std::to_string(i) +
                                  " holds " + std::to_string(loc.size) + " bytes, not " +
                                  std::to_string(size));
      }
    }
  }
  if (!meta.parity.empty()) {
    uint64_t longest = 0;
    for (int c = 0; c < StripeColumns(meta); ++c) longest = std::max(longest, ColumnSize(meta, c));
    for (const lsm::FragmentLocation& p : meta.parity) {
      if (p.size != longest) {
        return Status::Corruption(what + ": a parity fragment holds " + std::to_string(p.size) +
                                  " bytes, not " + std::to_string(longest) +
                                  " (the stripe's longest column)");
      }
    }
  }
  return std::unique_ptr<lsm::FragmentSource>(new Source(this, meta));
}

Result<std::string> StocTableStore::ReadFilter(const lsm::TableMeta& meta) {
  if (meta.filter.empty()) return std::string();
  const uint64_t size = meta.filter.front().size;
  std::string filter(size, '\0');
  Status s = ReadAnyReplica(meta.filter, 0, size, filter.data(), nullptr,
                            "the filter of table " + std::to_string(meta.number));
  if (!s.ok() && meta.parity_covers_meta && !meta.parity.empty()) {
    // The filter follows the meta fragment in the stripe's meta column.
    const int column = static_cast<int>(meta.layout.meta_fragment());
    Status d = RebuildColumn(meta, column, meta.layout.FragmentSize(column), size, filter.data());
    if (d.ok()) return filter;
    s = s.Prepend(d.ToString() + "; before that");
  }
  NOVA_RETURN_NOT_OK(s);
  return filter;
}

Status StocTableStore::DeleteTable(const lsm::TableMeta& meta) {
  Status first;
  for (uint32_t i = 0; i < meta.fragments.size(); ++i) {
    for (uint32_t r = 0; r < meta.fragments[i].size(); ++r) {
      const std::string name = TableFragmentFileName({options_.range_id, meta.number, i, r});
      Status s = DeleteFile(meta.fragments[i][r].stoc_id, name);
      if (s.IsFenced()) return s;
      if (!s.ok() && first.ok()) first = s;
    }
  }
  const uint32_t parity_base = static_cast<uint32_t>(meta.fragments.size());
  for (uint32_t j = 0; j < meta.parity.size(); ++j) {
    const std::string name =
        TableFragmentFileName({options_.range_id, meta.number, parity_base + j, 0});
    Status s = DeleteFile(meta.parity[j].stoc_id, name);
    if (s.IsFenced()) return s;
    if (!s.ok() && first.ok()) first = s;
  }
  if (first.ok()) counters_.tables_deleted.fetch_add(1, std::memory_order_relaxed);
  return first;
}

// ---- Garbage collection ---------------------------------------------------------------

std::vector<Status> StocTableStore::VisitTableFiles(
    const std::function<Status(uint32_t, const std::string&, const ParsedFileName&)>& visit) {
  std::vector<std::function<Status()>> jobs;
  for (uint32_t id : stocs()) {
    jobs.push_back([this, id, &visit]() -> Status {
      auto list = client_->List(id);
      if (!list.ok()) return list.status().Prepend("listing StoC " + std::to_string(id));
      Status first;
      for (const FileState& f : list.value()) {
        const ParsedFileName p = ParseStocFileName(f.name);
        if (p.type != StocFileType::kTableFragment || p.range_id != options_.range_id) {
          continue;
        }
        Status s = visit(id, f.name, p);
        if (!s.ok() && first.ok()) first = s;
      }
      return first;
    });
  }
  return RunAll(jobs);
}

Result<std::vector<uint64_t>> StocTableStore::ListTables() {
  const std::string what = "range " + std::to_string(options_.range_id) + ": listing tables";
  Mutex mu;
  std::set<uint64_t> numbers;  // guarded by mu (a local cannot carry GUARDED_BY)
  const std::vector<Status> results =
      VisitTableFiles([&](uint32_t, const std::string&, const ParsedFileName& p) {
        MutexLock lock(&mu);
        numbers.insert(p.number);
        return Status::OK();
      });
  Status last;
  size_t answered = 0;
  for (const Status& s : results) {
    if (s.ok()) {
      ++answered;
      continue;
    }
    LOG(WARNING) << what << ": " << s.ToString() << " (its tables are left out)";
    last = s;
  }
  if (answered == 0) return last.Prepend(what + ": no StoC answered");
  return std::vector<uint64_t>(numbers.begin(), numbers.end());
}

Status StocTableStore::DeleteTableFiles(uint64_t number) {
  const std::string what = "range " + std::to_string(options_.range_id) +
                           ": deleting the files of table " + std::to_string(number);
  if (fenced()) return FencedError().Prepend(what);
  const std::vector<Status> results = VisitTableFiles(
      [&](uint32_t id, const std::string& name, const ParsedFileName& p) -> Status {
        if (p.number != number) return Status::OK();
        NOVA_RETURN_NOT_OK(DeleteFile(id, name));
        counters_.table_files_collected.fetch_add(1, std::memory_order_relaxed);
        return Status::OK();
      });
  return FirstError(results).Prepend(what);
}

StocTableStoreStats StocTableStore::GetStats() const {
  StocTableStoreStats s;
  s.tables_written = counters_.tables_written.load(std::memory_order_relaxed);
  s.tables_deleted = counters_.tables_deleted.load(std::memory_order_relaxed);
  s.fragment_files_written = counters_.fragment_files_written.load(std::memory_order_relaxed);
  s.bytes_written = counters_.bytes_written.load(std::memory_order_relaxed);
  s.read_failovers = counters_.read_failovers.load(std::memory_order_relaxed);
  s.manifest_appends = counters_.manifest_appends.load(std::memory_order_relaxed);
  s.manifest_rolls = counters_.manifest_rolls.load(std::memory_order_relaxed);
  s.manifest_repairs = counters_.manifest_repairs.load(std::memory_order_relaxed);
  s.table_files_collected = counters_.table_files_collected.load(std::memory_order_relaxed);
  s.parity_files_written = counters_.parity_files_written.load(std::memory_order_relaxed);
  s.degraded_reads = counters_.degraded_reads.load(std::memory_order_relaxed);
  s.copies_relocated = counters_.copies_relocated.load(std::memory_order_relaxed);
  s.files_swept = counters_.files_swept.load(std::memory_order_relaxed);
  return s;
}

}  // namespace nova::stoc
