#include "benchmarks/ycsb/leveldb_binding.h"

#include <leveldb/cache.h>
#include <leveldb/db.h>
#include <leveldb/filter_policy.h>

#include "benchmarks/ycsb/embedded_db.h"

namespace nova::ycsb {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

struct LevelDbApi {
  using DB = leveldb::DB;
  using ReadOptions = leveldb::ReadOptions;
  using WriteOptions = leveldb::WriteOptions;
  using Slice = leveldb::Slice;
  using Iterator = leveldb::Iterator;
};

class LevelDbBinding : public Binding {
 public:
  explicit LevelDbBinding(EmbeddedOptions options)
      : options_(std::move(options)), log_("leveldb") {}
  ~LevelDbBinding() override {
    db_.reset();  // before the cache and filter policy it uses
  }

  Status Open() {
    leveldb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = static_cast<size_t>(options_.write_buffer_size_mb) * kMiB;
    if (options_.cache_size_mb > 0) {
      cache_.reset(leveldb::NewLRUCache(static_cast<size_t>(options_.cache_size_mb) * kMiB));
      o.block_cache = cache_.get();
    }
    if (options_.bloom_bits > 0) {
      filter_.reset(leveldb::NewBloomFilterPolicy(static_cast<int>(options_.bloom_bits)));
      o.filter_policy = filter_.get();
    }
    o.compression = options_.compression ? leveldb::kSnappyCompression : leveldb::kNoCompression;
    leveldb::DB* db = nullptr;
    leveldb::Status s = leveldb::DB::Open(o, options_.dir, &db);
    if (!s.ok()) return Status::IOError("leveldb open " + options_.dir + ": " + s.ToString());
    db_.reset(db);
    return Status::OK();
  }

  Result<std::unique_ptr<DB>> NewDB() override {
    return std::unique_ptr<DB>(
        std::make_unique<EmbeddedDB<LevelDbApi>>(db_.get(), &options_, &log_));
  }

 private:
  const EmbeddedOptions options_;
  ErrorLog log_;
  std::unique_ptr<leveldb::Cache> cache_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::DB> db_;
};

}  // namespace

Result<std::unique_ptr<Binding>> OpenLevelDbBinding(const Properties& props) {
  Result<EmbeddedOptions> options = ParseEmbeddedOptions(props, "leveldb");
  if (!options.ok()) return options.status();
  auto binding = std::make_unique<LevelDbBinding>(std::move(*options));
  NOVA_RETURN_NOT_OK(binding->Open());
  return std::unique_ptr<Binding>(std::move(binding));
}

}  // namespace nova::ycsb
