// CoreWorkload: YCSB's core workload (site.ycsb.workloads.CoreWorkload) — how keys,
// values and operations are chosen, in the load phase (inserts of key numbers insertstart,
// insertstart+1, ...) and the run phase (a mix of read/update/insert/scan/
// read-modify-write by proportions).
//
// Keys are "user" + the key number, FNV-hashed unless insertorder=ordered, zero-padded to
// zeropadding digits. With dataintegrity=true every value is derived from its key and
// field name (BuildDeterministicValue) and every read is verified ([VERIFY] counts).
//
// Thread safety: one CoreWorkload is shared by all client threads; DoInsert/DoTransaction
// are thread-safe, each thread passing its own Rng.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/generators.h"
#include "benchmarks/ycsb/measurements.h"
#include "benchmarks/ycsb/properties.h"
#include "common/status.h"

namespace nova::ycsb {

// kZipfian: YCSB's scrambled zipfian (hot keys scattered over the key space);
// kOrderedZipfian: the zipfian itself, key number insertstart the hottest, then its
// neighbours (the Nova-LSM paper's access pattern).
enum class KeyDistribution { kUniform, kZipfian, kOrderedZipfian, kLatest, kHotspot };
enum class LengthDistribution { kConstant, kUniform, kZipfian };
enum class Operation { kRead, kUpdate, kInsert, kScan, kReadModifyWrite };

// The workload's properties, parsed and validated. Defaults are YCSB's.
struct CoreWorkloadOptions {
  std::string table = "usertable";
  int64_t recordcount = 0;
  int64_t operationcount = 0;
  int64_t fieldcount = 10;
  std::string fieldnameprefix = "field";
  int64_t fieldlength = 100;
  int64_t minfieldlength = 1;
  LengthDistribution fieldlengthdistribution = LengthDistribution::kConstant;
  bool readallfields = true;
  bool writeallfields = false;
  bool dataintegrity = false;
  double readproportion = 0.95;
  double updateproportion = 0.05;
  double insertproportion = 0;
  double scanproportion = 0;
  double readmodifywriteproportion = 0;
  KeyDistribution requestdistribution = KeyDistribution::kUniform;
  // The constant (theta) of every zipfian draw: request distributions zipfian,
  // orderedzipfian and latest, zipfian scan and field lengths. > 0 and != 1.
  double zipfianconstant = kZipfianConstant;
  int64_t minscanlength = 1;
  int64_t maxscanlength = 1000;
  LengthDistribution scanlengthdistribution = LengthDistribution::kUniform;
  bool orderedinserts = false;  // insertorder=ordered
  int64_t insertstart = 0;
  int64_t insertcount = 0;  // default recordcount - insertstart
  int64_t zeropadding = 1;
  double hotspotdatafraction = 0.2;
  double hotspotopnfraction = 0.8;
  int64_t insertionretrylimit = 0;     // core_workload_insertion_retry_limit
  int64_t insertionretryinterval = 3;  // core_workload_insertion_retry_interval, seconds

  // Parses and validates. InvalidArgument naming the property for malformed values,
  // unknown distribution names, out-of-range numbers and contradictions (e.g.
  // dataintegrity with a non-constant field length).
  static Result<CoreWorkloadOptions> FromProperties(const Properties& props);
};

// The property names CoreWorkload and the client read (for warning about typos).
const std::vector<std::string>& KnownPropertyNames();

class CoreWorkload {
 public:
  // `measurements` must outlive the workload. REQUIRES: options came from FromProperties.
  CoreWorkload(const CoreWorkloadOptions& options, Measurements* measurements);

  // Load phase: inserts the next key of the load sequence (retrying per
  // core_workload_insertion_retry_limit). Returns false if the insert failed for good,
  // which ends the calling thread's load, as in YCSB.
  bool DoInsert(DB* db, Rng* rng);
  // Run phase: one operation chosen by the proportions. Returns true (YCSB's contract
  // allows a workload to stop a thread; the core workload never does).
  bool DoTransaction(DB* db, Rng* rng);

  // --- the pieces, public for tests ---
  std::string BuildKeyName(uint64_t keynum) const;
  // YCSB's buildDeterministicValue: "key:field" extended with ":" + Java hashCode of the
  // text so far until `size` characters, then cut to `size`.
  static std::string BuildDeterministicValue(std::string_view key, std::string_view field,
                                             size_t size);
  // Java's String.hashCode of ASCII text.
  static int32_t JavaHashCode(std::string_view s);
  Record BuildValues(std::string_view key, Rng* rng);
  Record BuildSingleValue(std::string_view key, Rng* rng);
  // YCSB's verifyRow: OK if every field equals its deterministic value, UNEXPECTED_STATE
  // if one differs, ERROR if the record is empty. Also records it under [VERIFY].
  ReturnCode VerifyRow(std::string_view key, const Record& cells);
  // A key number for a run-phase read/update/scan: from requestdistribution, never above
  // the last acknowledged insert.
  uint64_t NextKeynum(Rng* rng);
  Operation NextOperation(Rng* rng) const { return operation_chooser_.Next(rng); }
  uint64_t LastInsertedKeynum() const { return transaction_insert_keys_.Last(); }
  const CoreWorkloadOptions& options() const { return options_; }

 private:
  // Runs `op` against the DB, timing it into measurements_ as `type` (DBWrapper's job in
  // YCSB).
  template <typename Fn>
  ReturnCode Measured(OpType type, Fn&& op);
  size_t NextFieldLength(Rng* rng);
  const std::vector<std::string>* ReadFields(Rng* rng, std::vector<std::string>* one);

  void DoTransactionRead(DB* db, Rng* rng);
  void DoTransactionUpdate(DB* db, Rng* rng);
  void DoTransactionInsert(DB* db, Rng* rng);
  void DoTransactionScan(DB* db, Rng* rng);
  void DoTransactionReadModifyWrite(DB* db, Rng* rng);

  const CoreWorkloadOptions options_;
  Measurements* const measurements_;
  std::vector<std::string> field_names_;
  std::unique_ptr<NumberGenerator> field_length_;
  std::unique_ptr<NumberGenerator> scan_length_;
  UniformGenerator field_chooser_;
  CounterGenerator load_keys_;
  AcknowledgedCounterGenerator transaction_insert_keys_;
  std::unique_ptr<NumberGenerator> key_chooser_;  // after transaction_insert_keys_ (latest)
  DiscreteGenerator<Operation> operation_chooser_;
};

}  // namespace nova::ycsb
