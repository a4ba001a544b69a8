// -db rocksdb: an embedded RocksDB (Debian's librocksdb) in one directory; same record
// layout and Update semantics as the leveldb binding (leveldb_binding.h).
//
// Built only when CMake finds librocksdb (NOVA_YCSB_HAVE_ROCKSDB); otherwise -db rocksdb
// fails with a message saying how to get it.
#pragma once

#include <memory>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/properties.h"

namespace nova::ycsb {

inline constexpr const char* kRocksDbBindingHelp =
    "embedded RocksDB: -p rocksdb.dir=DIR (required, created if missing), "
    "rocksdb.write_buffer_size_mb=64, rocksdb.cache_size_mb=128, rocksdb.bloom_bits=10 "
    "(0: none), rocksdb.compression=snappy|none, rocksdb.sync=false, rocksdb.destroy=false";

// True iff this nova_ycsb was built with librocksdb.
bool RocksDbBindingBuilt();

Result<std::unique_ptr<Binding>> OpenRocksDbBinding(const Properties& props);

}  // namespace nova::ycsb
