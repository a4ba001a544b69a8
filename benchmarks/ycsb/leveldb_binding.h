// -db leveldb: an embedded LevelDB (Debian's libleveldb) in one directory.
//
// Keys are the YCSB keys as they are (the table name is not stored: one directory holds
// one table); values are records encoded by record_codec.h. Update reads the record,
// merges the new fields and writes it back (not atomic against a concurrent update of the
// same key, as in YCSB's RocksDB binding), except when the update carries all `fieldcount`
// fields, which is a blind overwrite.
#pragma once

#include <memory>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/properties.h"

namespace nova::ycsb {

inline constexpr const char* kLevelDbBindingHelp =
    "embedded LevelDB: -p leveldb.dir=DIR (required, created if missing), "
    "leveldb.write_buffer_size_mb=64, leveldb.cache_size_mb=128, leveldb.bloom_bits=10 "
    "(0: none), leveldb.compression=snappy|none, leveldb.sync=false, "
    "leveldb.destroy=false (wipe DIR first)";

// Opens (creating if missing) the database in leveldb.dir. InvalidArgument for a missing
// or malformed property, IOError if LevelDB cannot open it.
Result<std::unique_ptr<Binding>> OpenLevelDbBinding(const Properties& props);

}  // namespace nova::ycsb
