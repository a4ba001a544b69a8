// The binding interface of nova_ycsb: what YCSB calls site.ycsb.DB.
//
// A Binding is the process-wide part of a store (an open leveldb::DB, a cluster client);
// it hands each client thread its own DB, as YCSB creates one DB object per thread.
// Bindings are created by name through a BindingRegistry (db_registry.h).
//
// Records: a record is a list of (field name, value) pairs. How a binding stores a record
// is its own business; the embedded bindings serialize all fields of a record into one
// value (record_codec.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "benchmarks/ycsb/measurements.h"
#include "common/status.h"

namespace nova::ycsb {

using Field = std::pair<std::string, std::string>;  // name, value
using Record = std::vector<Field>;

// One client thread's connection to the store. Thread-compatible: used by one thread.
//
// Operations return ReturnCode::kOk, kNotFound (Read of a missing key) or kError; they
// never return kUnexpectedState (that is the verifier's verdict).
class DB {
 public:
  virtual ~DB() = default;

  // Per-thread set-up and tear-down (YCSB's init()/cleanup()). Errors end the run.
  virtual Status Init() { return Status::OK(); }
  virtual Status Cleanup() { return Status::OK(); }

  // Reads the record `key`; `fields` null means all fields, else only those named.
  // On kOk, *result holds the fields found (replacing its contents).
  virtual ReturnCode Read(std::string_view table, std::string_view key,
                          const std::vector<std::string>* fields, Record* result) = 0;
  // Reads up to `count` records in key order starting at `start_key` (inclusive).
  virtual ReturnCode Scan(std::string_view table, std::string_view start_key, int count,
                          const std::vector<std::string>* fields,
                          std::vector<Record>* result) = 0;
  // Replaces the given fields of the record `key`, leaving its other fields as they were.
  virtual ReturnCode Update(std::string_view table, std::string_view key,
                            const Record& values) = 0;
  // Writes a new record.
  virtual ReturnCode Insert(std::string_view table, std::string_view key,
                            const Record& values) = 0;
  virtual ReturnCode Delete(std::string_view table, std::string_view key) = 0;
};

// The shared part of a binding. Thread-safe: NewDB() may be called from any thread.
// The Binding must outlive every DB it created.
class Binding {
 public:
  virtual ~Binding() = default;
  // A new per-thread handle (owned by the caller), or why it could not be made.
  virtual Result<std::unique_ptr<DB>> NewDB() = 0;
};

}  // namespace nova::ycsb
