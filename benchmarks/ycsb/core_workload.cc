#include "benchmarks/ycsb/core_workload.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace nova::ycsb {

namespace {

using Clock = std::chrono::steady_clock;

// YCSB's prefix of every key.
constexpr std::string_view kKeyPrefix = "user";
// CoreWorkload's zipfian key space leaves room for the inserts the run will make, "2 is
// fudge factor" in YCSB, so that inserted keys can become popular without the modulus
// (and thus which keys are hot) changing.
constexpr double kExpectedInsertFudge = 2.0;
// YCSB spreads insertion retries by +/-20% so that clients retrying together do not retry
// in lockstep.
constexpr double kRetryJitter = 0.2;

Status Invalid(const std::string& what) { return Status::InvalidArgument(what); }

template <typename T>
Status Load(const Result<T>& r, T* out) {
  if (!r.ok()) return r.status();
  *out = r.value();
  return Status::OK();
}

Status ParseLengthDistribution(const Properties& p, const std::string& name,
                               const std::string& def, bool allow_constant,
                               LengthDistribution* out) {
  const std::string v = p.Get(name, def);
  if (v == "uniform") {
    *out = LengthDistribution::kUniform;
  } else if (v == "zipfian") {
    *out = LengthDistribution::kZipfian;
  } else if (v == "constant" && allow_constant) {
    *out = LengthDistribution::kConstant;
  } else {
    return Invalid("property " + name + "=" + v + ": expected " +
                   (allow_constant ? "constant, uniform or zipfian" : "uniform or zipfian"));
  }
  return Status::OK();
}

std::unique_ptr<NumberGenerator> LengthGenerator(LengthDistribution d, int64_t min,
                                                 int64_t max, double zipfianconstant) {
  switch (d) {
    case LengthDistribution::kConstant:
      return std::make_unique<ConstantGenerator>(static_cast<uint64_t>(max));
    case LengthDistribution::kUniform:
      return std::make_unique<UniformGenerator>(static_cast<uint64_t>(min),
                                                static_cast<uint64_t>(max));
    case LengthDistribution::kZipfian:
      return std::make_unique<YcsbZipfianGenerator>(static_cast<uint64_t>(min),
                                                    static_cast<uint64_t>(max), zipfianconstant);
  }
  return nullptr;
}

// Printable random bytes, as YCSB's RandomByteIterator makes them (' ' + 5 random bits).
std::string RandomValue(size_t len, Rng* rng) {
  std::string s(len, ' ');
  constexpr int kBitsPerChar = 5;
  constexpr int kCharsPerDraw = 64 / kBitsPerChar;
  for (size_t i = 0; i < len;) {
    uint64_t bits = (*rng)();
    for (int j = 0; j < kCharsPerDraw && i < len; ++j, ++i, bits >>= kBitsPerChar) {
      s[i] = static_cast<char>(' ' + (bits & 31));
    }
  }
  return s;
}

uint64_t MicrosSince(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
}

}  // namespace

// -----------------------------------------------------------------------------------------
// Options

Result<CoreWorkloadOptions> CoreWorkloadOptions::FromProperties(const Properties& p) {
  CoreWorkloadOptions o;
  const std::string workload = p.Get("workload", "site.ycsb.workloads.CoreWorkload");
  if (workload.size() < 12 || workload.compare(workload.size() - 12, 12, "CoreWorkload") != 0) {
    return Invalid("property workload=" + workload + ": only CoreWorkload is implemented");
  }
  o.table = p.Get("table", o.table);
  NOVA_RETURN_NOT_OK(Load(p.GetInt("recordcount", o.recordcount), &o.recordcount));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("operationcount", o.operationcount), &o.operationcount));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("fieldcount", o.fieldcount), &o.fieldcount));
  o.fieldnameprefix = p.Get("fieldnameprefix", o.fieldnameprefix);
  NOVA_RETURN_NOT_OK(Load(p.GetInt("fieldlength", o.fieldlength), &o.fieldlength));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("minfieldlength", o.minfieldlength), &o.minfieldlength));
  NOVA_RETURN_NOT_OK(ParseLengthDistribution(p, "fieldlengthdistribution", "constant", true,
                                             &o.fieldlengthdistribution));
  NOVA_RETURN_NOT_OK(Load(p.GetBool("readallfields", o.readallfields), &o.readallfields));
  NOVA_RETURN_NOT_OK(Load(p.GetBool("writeallfields", o.writeallfields), &o.writeallfields));
  NOVA_RETURN_NOT_OK(Load(p.GetBool("dataintegrity", o.dataintegrity), &o.dataintegrity));
  NOVA_RETURN_NOT_OK(Load(p.GetDouble("readproportion", o.readproportion), &o.readproportion));
  NOVA_RETURN_NOT_OK(
      Load(p.GetDouble("updateproportion", o.updateproportion), &o.updateproportion));
  NOVA_RETURN_NOT_OK(
      Load(p.GetDouble("insertproportion", o.insertproportion), &o.insertproportion));
  NOVA_RETURN_NOT_OK(Load(p.GetDouble("scanproportion", o.scanproportion), &o.scanproportion));
  NOVA_RETURN_NOT_OK(Load(p.GetDouble("readmodifywriteproportion", o.readmodifywriteproportion),
                          &o.readmodifywriteproportion));
  const std::string dist = p.Get("requestdistribution", "uniform");
  if (dist == "uniform") {
    o.requestdistribution = KeyDistribution::kUniform;
  } else if (dist == "zipfian") {
    o.requestdistribution = KeyDistribution::kZipfian;
  } else if (dist == "orderedzipfian") {
    o.requestdistribution = KeyDistribution::kOrderedZipfian;
  } else if (dist == "latest") {
    o.requestdistribution = KeyDistribution::kLatest;
  } else if (dist == "hotspot") {
    o.requestdistribution = KeyDistribution::kHotspot;
  } else {
    return Invalid("property requestdistribution=" + dist +
                   ": expected uniform, zipfian, orderedzipfian, latest or hotspot");
  }
  NOVA_RETURN_NOT_OK(
      Load(p.GetDouble("zipfianconstant", o.zipfianconstant), &o.zipfianconstant));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("minscanlength", o.minscanlength), &o.minscanlength));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("maxscanlength", o.maxscanlength), &o.maxscanlength));
  NOVA_RETURN_NOT_OK(ParseLengthDistribution(p, "scanlengthdistribution", "uniform", false,
                                             &o.scanlengthdistribution));
  const std::string order = p.Get("insertorder", "hashed");
  if (order != "hashed" && order != "ordered") {
    return Invalid("property insertorder=" + order + ": expected hashed or ordered");
  }
  o.orderedinserts = order == "ordered";
  NOVA_RETURN_NOT_OK(Load(p.GetInt("insertstart", o.insertstart), &o.insertstart));
  o.insertcount = o.recordcount - o.insertstart;
  NOVA_RETURN_NOT_OK(Load(p.GetInt("insertcount", o.insertcount), &o.insertcount));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("zeropadding", o.zeropadding), &o.zeropadding));
  NOVA_RETURN_NOT_OK(
      Load(p.GetDouble("hotspotdatafraction", o.hotspotdatafraction), &o.hotspotdatafraction));
  NOVA_RETURN_NOT_OK(
      Load(p.GetDouble("hotspotopnfraction", o.hotspotopnfraction), &o.hotspotopnfraction));
  NOVA_RETURN_NOT_OK(Load(p.GetInt("core_workload_insertion_retry_limit", o.insertionretrylimit),
                          &o.insertionretrylimit));
  NOVA_RETURN_NOT_OK(
      Load(p.GetInt("core_workload_insertion_retry_interval", o.insertionretryinterval),
           &o.insertionretryinterval));

  // Validation: one clear message per contradiction.
  if (o.recordcount < 1) return Invalid("property recordcount must be > 0");
  if (o.operationcount < 0) return Invalid("property operationcount must be >= 0");
  if (o.fieldcount < 1) return Invalid("property fieldcount must be > 0");
  if (o.fieldlength < 1) return Invalid("property fieldlength must be > 0");
  if (o.minfieldlength < 1 || o.minfieldlength > o.fieldlength) {
    return Invalid("property minfieldlength must be in [1, fieldlength]");
  }
  for (auto [name, v] : {std::pair{"readproportion", o.readproportion},
                         {"updateproportion", o.updateproportion},
                         {"insertproportion", o.insertproportion},
                         {"scanproportion", o.scanproportion},
                         {"readmodifywriteproportion", o.readmodifywriteproportion}}) {
    if (v < 0 || v > 1) return Invalid(std::string("property ") + name + " must be in [0, 1]");
  }
  if (o.readproportion + o.updateproportion + o.insertproportion + o.scanproportion +
          o.readmodifywriteproportion <= 0) {
    return Invalid("every operation proportion is 0: nothing to run");
  }
  if (o.minscanlength < 1 || o.minscanlength > o.maxscanlength) {
    return Invalid("properties minscanlength/maxscanlength: need 1 <= min <= max");
  }
  if (o.insertstart < 0) return Invalid("property insertstart must be >= 0");
  if (o.insertcount < 1) return Invalid("property insertcount must be > 0");
  if (o.insertstart + o.insertcount > o.recordcount) {
    return Invalid("insertstart + insertcount > recordcount (invalid combination)");
  }
  if (o.zeropadding < 1) return Invalid("property zeropadding must be > 0");
  if (o.hotspotdatafraction < 0 || o.hotspotdatafraction > 1 || o.hotspotopnfraction < 0 ||
      o.hotspotopnfraction > 1) {
    return Invalid("properties hotspotdatafraction/hotspotopnfraction must be in [0, 1]");
  }
  if (o.dataintegrity && o.fieldlengthdistribution != LengthDistribution::kConstant) {
    return Invalid("dataintegrity=true needs fieldlengthdistribution=constant "
                   "(values are derived from the key and must have a known length)");
  }
  if (!ValidZipfianConstant(o.zipfianconstant)) {
    return Invalid("property zipfianconstant=" + p.Get("zipfianconstant") +
                   ": must be a finite number > 0 and != 1 (the zipfian's zeta math divides "
                   "by 1 - constant)");
  }
  if (o.requestdistribution == KeyDistribution::kLatest && o.recordcount < 2) {
    return Invalid("requestdistribution=latest needs recordcount >= 2");
  }
  if (o.insertionretrylimit < 0 || o.insertionretryinterval < 0) {
    return Invalid("core_workload_insertion_retry_limit/_interval must be >= 0");
  }
  return o;
}

const std::vector<std::string>& KnownPropertyNames() {
  static const std::vector<std::string> kNames = {
      // CoreWorkload
      "workload", "table", "recordcount", "operationcount", "fieldcount", "fieldnameprefix",
      "fieldlength", "minfieldlength", "fieldlengthdistribution", "readallfields",
      "writeallfields", "dataintegrity", "readproportion", "updateproportion",
      "insertproportion", "scanproportion", "readmodifywriteproportion",
      "requestdistribution", "zipfianconstant", "minscanlength", "maxscanlength",
      "scanlengthdistribution", "insertorder", "insertstart", "insertcount", "zeropadding", "hotspotdatafraction",
      "hotspotopnfraction", "core_workload_insertion_retry_limit",
      "core_workload_insertion_retry_interval",
      // client
      "db", "threadcount", "target", "dotransactions", "maxexecutiontime", "status",
      "status.interval", "timeseries", "exportfile", "seed", "label"};
  return kNames;
}

// -----------------------------------------------------------------------------------------
// CoreWorkload

CoreWorkload::CoreWorkload(const CoreWorkloadOptions& options, Measurements* measurements)
    : options_(options),
      measurements_(measurements),
      field_length_(LengthGenerator(options.fieldlengthdistribution, options.minfieldlength,
                                    options.fieldlength, options.zipfianconstant)),
      scan_length_(LengthGenerator(options.scanlengthdistribution, options.minscanlength,
                                   options.maxscanlength, options.zipfianconstant)),
      field_chooser_(0, static_cast<uint64_t>(options.fieldcount - 1)),
      load_keys_(static_cast<uint64_t>(options.insertstart)),
      // Run-phase inserts continue after the loaded records, as in YCSB.
      transaction_insert_keys_(static_cast<uint64_t>(options.recordcount)) {
  for (int64_t i = 0; i < options.fieldcount; ++i) {
    field_names_.push_back(options.fieldnameprefix + std::to_string(i));
  }
  const auto start = static_cast<uint64_t>(options.insertstart);
  const auto count = static_cast<uint64_t>(options.insertcount);
  // The zipfian key choosers' room for the run's inserts (YCSB's expectednewkeys).
  const auto expected_new_keys =
      static_cast<uint64_t>(static_cast<double>(options.operationcount) *
                            options.insertproportion * kExpectedInsertFudge);
  switch (options.requestdistribution) {
    case KeyDistribution::kUniform:
      key_chooser_ = std::make_unique<UniformGenerator>(start, start + count - 1);
      break;
    case KeyDistribution::kZipfian:
      key_chooser_ = std::make_unique<ScrambledZipfianGenerator>(
          start, start + count + expected_new_keys, options.zipfianconstant);
      break;
    case KeyDistribution::kOrderedZipfian:
      // The same key space as kZipfian (room for the run's inserts; draws above the last
      // acknowledged insert are redrawn by NextKeynum), without the scattering: key number
      // `start` is the hottest. New keys land at the cold end.
      key_chooser_ = std::make_unique<YcsbZipfianGenerator>(
          start, start + count + expected_new_keys, options.zipfianconstant);
      break;
    case KeyDistribution::kLatest:
      key_chooser_ = std::make_unique<SkewedLatestGenerator>(&transaction_insert_keys_,
                                                             options.zipfianconstant);
      break;
    case KeyDistribution::kHotspot:
      key_chooser_ = std::make_unique<HotspotGenerator>(
          start, start + count - 1, options.hotspotdatafraction, options.hotspotopnfraction);
      break;
  }
  operation_chooser_.Add(options.readproportion, Operation::kRead);
  operation_chooser_.Add(options.updateproportion, Operation::kUpdate);
  operation_chooser_.Add(options.insertproportion, Operation::kInsert);
  operation_chooser_.Add(options.scanproportion, Operation::kScan);
  operation_chooser_.Add(options.readmodifywriteproportion, Operation::kReadModifyWrite);
}

template <typename Fn>
ReturnCode CoreWorkload::Measured(OpType type, Fn&& op) {
  const Clock::time_point start = Clock::now();
  const ReturnCode rc = op();
  measurements_->Measure(type, rc, MicrosSince(start));
  return rc;
}

std::string CoreWorkload::BuildKeyName(uint64_t keynum) const {
  if (!options_.orderedinserts) keynum = YcsbHash(keynum);
  const std::string digits = std::to_string(keynum);
  std::string key(kKeyPrefix);
  if (static_cast<int64_t>(digits.size()) < options_.zeropadding) {
    key.append(static_cast<size_t>(options_.zeropadding) - digits.size(), '0');
  }
  return key + digits;
}

int32_t CoreWorkload::JavaHashCode(std::string_view s) {
  uint32_t h = 0;  // unsigned: Java's int arithmetic wraps, C++'s signed would be UB
  for (char c : s) h = 31 * h + static_cast<uint8_t>(c);
  return static_cast<int32_t>(h);
}

std::string CoreWorkload::BuildDeterministicValue(std::string_view key, std::string_view field,
                                                  size_t size) {
  std::string s;
  s.reserve(size + 16);
  s.append(key).append(":").append(field);
  while (s.size() < size) {
    const int32_t h = JavaHashCode(s);
    s.append(":").append(std::to_string(h));
  }
  s.resize(size);
  return s;
}

size_t CoreWorkload::NextFieldLength(Rng* rng) {
  return static_cast<size_t>(field_length_->Next(rng));
}

Record CoreWorkload::BuildValues(std::string_view key, Rng* rng) {
  Record values;
  values.reserve(field_names_.size());
  for (const std::string& field : field_names_) {
    const size_t len = NextFieldLength(rng);
    values.emplace_back(field, options_.dataintegrity ? BuildDeterministicValue(key, field, len)
                                                      : RandomValue(len, rng));
  }
  return values;
}

Record CoreWorkload::BuildSingleValue(std::string_view key, Rng* rng) {
  const std::string& field = field_names_[field_chooser_.Next(rng)];
  const size_t len = NextFieldLength(rng);
  return Record{{field, options_.dataintegrity ? BuildDeterministicValue(key, field, len)
                                               : RandomValue(len, rng)}};
}

ReturnCode CoreWorkload::VerifyRow(std::string_view key, const Record& cells) {
  const Clock::time_point start = Clock::now();
  ReturnCode rc = ReturnCode::kOk;
  if (cells.empty()) {
    rc = ReturnCode::kError;  // YCSB: "this assumes that null data is never valid"
  } else {
    for (const auto& [field, value] : cells) {
      if (value != BuildDeterministicValue(key, field, static_cast<size_t>(options_.fieldlength))) {
        rc = ReturnCode::kUnexpectedState;
        break;
      }
    }
  }
  measurements_->Measure(OpType::kVerify, rc, MicrosSince(start));
  return rc;
}

uint64_t CoreWorkload::NextKeynum(Rng* rng) {
  // Never a key whose insert has not been acknowledged (YCSB loops the same way).
  const uint64_t last = transaction_insert_keys_.Last();
  uint64_t keynum;
  do {
    keynum = key_chooser_->Next(rng);
  } while (keynum > last);
  return keynum;
}

const std::vector<std::string>* CoreWorkload::ReadFields(Rng* rng, std::vector<std::string>* one) {
  if (options_.readallfields) return nullptr;
  one->assign(1, field_names_[field_chooser_.Next(rng)]);
  return one;
}

bool CoreWorkload::DoInsert(DB* db, Rng* rng) {
  const uint64_t keynum = load_keys_.Next();
  const std::string key = BuildKeyName(keynum);
  const Record values = BuildValues(key, rng);
  for (int64_t attempt = 0;; ++attempt) {
    const ReturnCode rc =
        Measured(OpType::kInsert, [&] { return db->Insert(options_.table, key, values); });
    if (rc == ReturnCode::kOk) return true;
    if (attempt >= options_.insertionretrylimit) {
      std::fprintf(stderr, "Error inserting %s, not retrying any more (%lld retries)\n",
                   key.c_str(), static_cast<long long>(attempt));
      return false;
    }
    const double jitter = 1.0 - kRetryJitter + 2 * kRetryJitter * UniformDouble(rng);
    std::this_thread::sleep_for(std::chrono::duration<double>(
        static_cast<double>(options_.insertionretryinterval) * jitter));
  }
}

bool CoreWorkload::DoTransaction(DB* db, Rng* rng) {
  switch (NextOperation(rng)) {
    case Operation::kRead:
      DoTransactionRead(db, rng);
      break;
    case Operation::kUpdate:
      DoTransactionUpdate(db, rng);
      break;
    case Operation::kInsert:
      DoTransactionInsert(db, rng);
      break;
    case Operation::kScan:
      DoTransactionScan(db, rng);
      break;
    case Operation::kReadModifyWrite:
      DoTransactionReadModifyWrite(db, rng);
      break;
  }
  return true;
}

void CoreWorkload::DoTransactionRead(DB* db, Rng* rng) {
  const std::string key = BuildKeyName(NextKeynum(rng));
  std::vector<std::string> one;
  const std::vector<std::string>* fields = ReadFields(rng, &one);
  Record cells;
  Measured(OpType::kRead, [&] { return db->Read(options_.table, key, fields, &cells); });
  if (options_.dataintegrity) VerifyRow(key, cells);
}

void CoreWorkload::DoTransactionUpdate(DB* db, Rng* rng) {
  const std::string key = BuildKeyName(NextKeynum(rng));
  const Record values = options_.writeallfields ? BuildValues(key, rng) : BuildSingleValue(key, rng);
  Measured(OpType::kUpdate, [&] { return db->Update(options_.table, key, values); });
}

void CoreWorkload::DoTransactionInsert(DB* db, Rng* rng) {
  const uint64_t keynum = transaction_insert_keys_.Next();
  const std::string key = BuildKeyName(keynum);
  const Record values = BuildValues(key, rng);
  Measured(OpType::kInsert, [&] { return db->Insert(options_.table, key, values); });
  // Acknowledged whatever the outcome, as YCSB does in a finally block: a failed insert
  // must not stall every later key.
  transaction_insert_keys_.Acknowledge(keynum);
}

void CoreWorkload::DoTransactionScan(DB* db, Rng* rng) {
  const std::string start = BuildKeyName(NextKeynum(rng));
  const int len = static_cast<int>(scan_length_->Next(rng));
  std::vector<std::string> one;
  const std::vector<std::string>* fields = ReadFields(rng, &one);
  std::vector<Record> result;
  Measured(OpType::kScan, [&] { return db->Scan(options_.table, start, len, fields, &result); });
}

void CoreWorkload::DoTransactionReadModifyWrite(DB* db, Rng* rng) {
  const std::string key = BuildKeyName(NextKeynum(rng));
  std::vector<std::string> one;
  const std::vector<std::string>* fields = ReadFields(rng, &one);
  const Record values = options_.writeallfields ? BuildValues(key, rng) : BuildSingleValue(key, rng);
  Record cells;
  // Each half is also measured as a READ and an UPDATE, as YCSB's DBWrapper does.
  const Clock::time_point start = Clock::now();
  const ReturnCode read =
      Measured(OpType::kRead, [&] { return db->Read(options_.table, key, fields, &cells); });
  const ReturnCode update =
      Measured(OpType::kUpdate, [&] { return db->Update(options_.table, key, values); });
  const uint64_t us = MicrosSince(start);
  if (options_.dataintegrity) VerifyRow(key, cells);
  const ReturnCode rc = read != ReturnCode::kOk ? read : update;
  measurements_->Measure(OpType::kReadModifyWrite, rc, us);
}

}  // namespace nova::ycsb
