// EmbeddedDB: the per-thread DB of the leveldb and rocksdb bindings, written once for both
// (their Get/Put/Delete/NewIterator APIs are the same shape). `Api` names the library's
// types: Api::DB, Api::ReadOptions, Api::WriteOptions, Api::Slice, Api::Iterator.
//
// Record layout and Update semantics: see leveldb_binding.h.
#pragma once

#include <memory>
#include <string>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/embedded_options.h"
#include "benchmarks/ycsb/record_codec.h"

namespace nova::ycsb {

template <typename Api>
class EmbeddedDB : public DB {
 public:
  // `db`, `options` and `log` must outlive this object (the Binding owns them).
  EmbeddedDB(typename Api::DB* db, const EmbeddedOptions* options, ErrorLog* log)
      : db_(db), options_(options), log_(log) {
    write_options_.sync = options->sync;
  }

  ReturnCode Read(std::string_view, std::string_view key, const std::vector<std::string>* fields,
                  Record* result) override {
    std::string value;
    auto s = db_->Get(typename Api::ReadOptions(), Slice(key), &value);
    if (s.IsNotFound()) return ReturnCode::kNotFound;
    if (!s.ok()) return Fail("read", s.ToString());
    if (!DecodeRecord(value, fields, result)) return Fail("read", "malformed record");
    return ReturnCode::kOk;
  }

  ReturnCode Scan(std::string_view, std::string_view start_key, int count,
                  const std::vector<std::string>* fields, std::vector<Record>* result) override {
    result->clear();
    std::unique_ptr<typename Api::Iterator> it(db_->NewIterator(typename Api::ReadOptions()));
    for (it->Seek(Slice(start_key)); it->Valid() && static_cast<int>(result->size()) < count;
         it->Next()) {
      Record r;
      const auto v = it->value();
      if (!DecodeRecord(std::string_view(v.data(), v.size()), fields, &r)) {
        return Fail("scan", "malformed record");
      }
      result->push_back(std::move(r));
    }
    if (!it->status().ok()) return Fail("scan", it->status().ToString());
    return ReturnCode::kOk;
  }

  ReturnCode Update(std::string_view, std::string_view key, const Record& values) override {
    if (static_cast<int64_t>(values.size()) >= options_->fieldcount) {
      return Put("update", key, values);  // every field replaced: no need to read
    }
    std::string current;
    auto s = db_->Get(typename Api::ReadOptions(), Slice(key), &current);
    if (s.IsNotFound()) return ReturnCode::kNotFound;
    if (!s.ok()) return Fail("update", s.ToString());
    Record record;
    if (!DecodeRecord(current, nullptr, &record)) return Fail("update", "malformed record");
    MergeRecord(values, &record);
    return Put("update", key, record);
  }

  ReturnCode Insert(std::string_view, std::string_view key, const Record& values) override {
    return Put("insert", key, values);
  }

  ReturnCode Delete(std::string_view, std::string_view key) override {
    auto s = db_->Delete(write_options_, Slice(key));
    if (!s.ok()) return Fail("delete", s.ToString());
    return ReturnCode::kOk;
  }

 private:
  static typename Api::Slice Slice(std::string_view s) {
    return typename Api::Slice(s.data(), s.size());
  }

  ReturnCode Put(const char* op, std::string_view key, const Record& record) {
    encoded_.clear();
    EncodeRecord(record, &encoded_);
    auto s = db_->Put(write_options_, Slice(key), Slice(encoded_));
    if (!s.ok()) return Fail(op, s.ToString());
    return ReturnCode::kOk;
  }

  ReturnCode Fail(const char* op, const std::string& message) {
    log_->Report(op, message);
    return ReturnCode::kError;
  }

  typename Api::DB* const db_;
  const EmbeddedOptions* const options_;
  ErrorLog* const log_;
  typename Api::WriteOptions write_options_;
  std::string encoded_;  // reused buffer for Put
};

}  // namespace nova::ycsb
