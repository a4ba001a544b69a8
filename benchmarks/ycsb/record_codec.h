// How the embedded bindings (leveldb, rocksdb) store a YCSB record: all its fields
// serialized into the one value of the record's key.
//
//   value := field*
//   field := varint32 name_length, name bytes, varint32 value_length, value bytes
//
// Fields keep the order they were written in. YCSB's own RocksDB binding uses the same
// idea with fixed 4-byte lengths; varints save 6 bytes a field.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/ycsb/db.h"

namespace nova::ycsb {

// Appends the encoding of `record` to *dst.
void EncodeRecord(const Record& record, std::string* dst);
// Decodes `value`, keeping only the fields named in `fields` (all when null). Returns false
// (and leaves *out in an unspecified state) if `value` is malformed.
bool DecodeRecord(std::string_view value, const std::vector<std::string>* fields, Record* out);
// Sets the fields of `update` in *record: replaces the values of fields present, appends
// the others.
void MergeRecord(const Record& update, Record* record);

}  // namespace nova::ycsb
