#include "benchmarks/ycsb/rocksdb_binding.h"

#ifdef NOVA_YCSB_HAVE_ROCKSDB
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>

#include "benchmarks/ycsb/embedded_db.h"
#endif

namespace nova::ycsb {

#ifdef NOVA_YCSB_HAVE_ROCKSDB

namespace {

constexpr size_t kMiB = size_t{1} << 20;

struct RocksDbApi {
  using DB = rocksdb::DB;
  using ReadOptions = rocksdb::ReadOptions;
  using WriteOptions = rocksdb::WriteOptions;
  using Slice = rocksdb::Slice;
  using Iterator = rocksdb::Iterator;
};

class RocksDbBinding : public Binding {
 public:
  explicit RocksDbBinding(EmbeddedOptions options)
      : options_(std::move(options)), log_("rocksdb") {}

  Status Open() {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.write_buffer_size = static_cast<size_t>(options_.write_buffer_size_mb) * kMiB;
    rocksdb::BlockBasedTableOptions table;
    if (options_.cache_size_mb > 0) {
      table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(options_.cache_size_mb) * kMiB);
    } else {
      table.no_block_cache = true;
    }
    if (options_.bloom_bits > 0) {
      table.filter_policy.reset(
          rocksdb::NewBloomFilterPolicy(static_cast<double>(options_.bloom_bits)));
    }
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    o.compression =
        options_.compression ? rocksdb::kSnappyCompression : rocksdb::kNoCompression;
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, options_.dir, &db);
    if (!s.ok()) return Status::IOError("rocksdb open " + options_.dir + ": " + s.ToString());
    db_.reset(db);
    return Status::OK();
  }

  Result<std::unique_ptr<DB>> NewDB() override {
    return std::unique_ptr<DB>(
        std::make_unique<EmbeddedDB<RocksDbApi>>(db_.get(), &options_, &log_));
  }

 private:
  const EmbeddedOptions options_;
  ErrorLog log_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace

bool RocksDbBindingBuilt() { return true; }

Result<std::unique_ptr<Binding>> OpenRocksDbBinding(const Properties& props) {
  Result<EmbeddedOptions> options = ParseEmbeddedOptions(props, "rocksdb");
  if (!options.ok()) return options.status();
  auto binding = std::make_unique<RocksDbBinding>(std::move(*options));
  NOVA_RETURN_NOT_OK(binding->Open());
  return std::unique_ptr<Binding>(std::move(binding));
}

#else  // !NOVA_YCSB_HAVE_ROCKSDB

bool RocksDbBindingBuilt() { return false; }

Result<std::unique_ptr<Binding>> OpenRocksDbBinding(const Properties&) {
  return Status::NotSupported(
      "rocksdb binding not built: librocksdb was not found when nova_ycsb was configured "
      "(install it with deploy/install_deps.sh, which adds librocksdb-dev, and re-run cmake)");
}

#endif  // NOVA_YCSB_HAVE_ROCKSDB

}  // namespace nova::ycsb
