// The options the embedded bindings (leveldb, rocksdb) share, read from
// <prefix>.* properties with validation.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "benchmarks/ycsb/properties.h"
#include "common/status.h"

namespace nova::ycsb {

struct EmbeddedOptions {
  std::string dir;
  int64_t write_buffer_size_mb = 64;
  int64_t cache_size_mb = 128;
  int64_t bloom_bits = 10;
  bool compression = true;  // snappy
  bool sync = false;
  bool destroy = false;
  // The workload's fieldcount: an update carrying this many fields overwrites blindly.
  int64_t fieldcount = 10;
};

// Reads <prefix>.dir etc. InvalidArgument naming the property on bad input. Creates dir
// (and its parents) when missing; with <prefix>.destroy=true removes it first.
Result<EmbeddedOptions> ParseEmbeddedOptions(const Properties& props, const std::string& prefix);

// Prints the first few errors of a binding to stderr (then only counts them), so a
// failing store explains itself without flooding the output. Thread-safe.
class ErrorLog {
 public:
  explicit ErrorLog(std::string binding) : binding_(std::move(binding)) {}
  void Report(const std::string& op, const std::string& message);

 private:
  static constexpr uint64_t kMaxPrinted = 10;
  const std::string binding_;
  std::atomic<uint64_t> count_{0};
};

}  // namespace nova::ycsb
