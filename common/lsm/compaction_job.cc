#include "common/lsm/compaction_job.h"

#include <leveldb/filter_policy.h>
#include <leveldb/options.h>

#include <memory>

#include "common/lsm/merging_iterator.h"
#include "common/lsm/scan_table.h"
#include "common/lsm/table_sink.h"
#include "common/wire/message.h"

namespace nova::lsm {

namespace {

// DO NOT CHANGE: on the wire. Bumped when a field is added.
constexpr uint8_t kJobVersion = 2;
// Version 3 adds owner_epoch; sent only for a job with one (see the header).
constexpr uint8_t kJobVersionWithEpoch = 3;
// Adds the outputs' availability (parity or hybrid) and parity fragments.
constexpr uint8_t kJobVersionWithParity = 4;
constexpr uint32_t kMaxJobParityFragments = 16;
// Requests of version 1 carry no placement byte (their executors placed by power-of-d).
constexpr uint8_t kJobVersionWithoutPlacement = 1;
// DO NOT CHANGE: on the wire (the placement byte of a version 2 request).
constexpr uint8_t kWirePlacementRandom = 0;
constexpr uint8_t kWirePlacementPowerOfD = 1;
constexpr uint8_t kResultVersion = 1;

std::string MetaBytes(const TableMeta& t) {
  std::string s;
  EncodeTableMeta(&s, t);
  return s;
}

bool GetMeta(wire::PayloadReader* r, std::string_view field, TableMeta* t) {
  std::string_view bytes;
  if (!r->GetBytes(field, &bytes)) return false;
  // The whole field must be one TableMeta.
  return DecodeTableMeta(&bytes, t) && bytes.empty();
}

// A count read from the wire, bounded before anything is allocated for it.
bool GetCount(wire::PayloadReader* r, std::string_view field, uint32_t max, uint32_t* n) {
  return r->GetVarint32(field, n) && *n <= max;
}

// Wraps TableSink: refuses to start an output once the reserved numbers are used up, so
// every finished output has a number the LTC reserved (FinishOutput takes the next one).
class ReservedNumberSink final : public CompactionOutputSink {
 public:
  ReservedNumberSink(TableSink* sink, size_t numbers) : sink_(sink), numbers_(numbers) {}
  Status StartOutput() override {
    if (started_ >= numbers_) {
      return Status::ResourceExhausted("the job's " + std::to_string(numbers_) +
                                       " reserved table numbers are used up");
    }
    ++started_;
    return sink_->StartOutput();
  }
  Status Add(const leveldb::Slice& ikey, const leveldb::Slice& value) override {
    return sink_->Add(ikey, value);
  }
  uint64_t CurrentBytes() const override { return sink_->CurrentBytes(); }
  Status FinishOutput() override { return sink_->FinishOutput(); }

 private:
  TableSink* const sink_;  // must outlive this
  const size_t numbers_;
  size_t started_ = 0;
};

}  // namespace

std::string EncodeCompactionJob(const CompactionJob& job) {
  wire::PayloadWriter w;
  const bool parity = job.availability == TableAvailability::kParity ||
                      job.availability == TableAvailability::kHybrid ||
                      !job.no_new_data.empty();
  w.PutU8(parity ? kJobVersionWithParity
                 : (job.owner_epoch != 0 ? kJobVersionWithEpoch : kJobVersion));
  w.PutVarint32(job.range_id);
  w.PutVarint32(job.drange);
  w.PutU8(static_cast<uint8_t>(job.output_level));
  w.PutBytes(job.comparator);
  w.PutVarint32(static_cast<uint32_t>(job.inputs.size()));
  for (const CompactionJobInput& in : job.inputs) {
    w.PutU8(static_cast<uint8_t>(in.level));
    w.PutBytes(MetaBytes(in.table));
  }
  w.PutVarint32(static_cast<uint32_t>(job.snapshots.size()));
  for (SequenceNumber s : job.snapshots) w.PutVarint64(s);
  w.PutVarint64(job.smallest_snapshot);
  w.PutU8(job.bottommost ? 1 : 0);
  w.PutVarint64(job.max_output_bytes);
  w.PutVarint32(static_cast<uint32_t>(job.split_user_keys.size()));
  for (const std::string& k : job.split_user_keys) w.PutBytes(k);
  w.PutVarint32(job.block_bytes);
  w.PutVarint32(job.scatter_width);
  w.PutVarint32(job.bloom_bits_per_key);
  w.PutVarint32(job.availability == TableAvailability::kNone ? 1 : job.fragment_replicas);
  w.PutVarint32(static_cast<uint32_t>(job.output_numbers.size()));
  for (uint64_t n : job.output_numbers) w.PutVarint64(n);
  w.PutVarint32(static_cast<uint32_t>(job.stocs.size()));
  for (const auto& [id, address] : job.stocs) {
    w.PutVarint32(id);
    w.PutBytes(address);
  }
  w.PutU8(job.placement == PlacementPolicy::kRandom ? kWirePlacementRandom
                                                          : kWirePlacementPowerOfD);
  if (parity) {
    w.PutVarint64(job.owner_epoch);
    w.PutU8(static_cast<uint8_t>(job.availability));
    w.PutVarint32(job.parity_fragments);
    w.PutVarint32(static_cast<uint32_t>(job.no_new_data.size()));
    for (uint32_t id : job.no_new_data) w.PutVarint32(id);
  } else if (job.owner_epoch != 0) {
    w.PutVarint64(job.owner_epoch);
  }
  return w.Finish();
}

Status DecodeCompactionJob(std::string_view in, CompactionJob* out) {
  wire::PayloadReader r(in);
  CompactionJob job;
  auto bad = [&](const std::string& what) {
    Status s = r.status();
    return Status::InvalidArgument("compaction job: " +
                                   (s.ok() ? what : what + " (" + s.message() + ")"));
  };
  uint8_t version = 0, level = 0, bottommost = 0;
  uint32_t n = 0;
  if (!r.GetU8("version", &version)) return bad("truncated");
  if (version != kJobVersion && version != kJobVersionWithoutPlacement &&
      version != kJobVersionWithEpoch && version != kJobVersionWithParity) {
    return bad("unknown version " + std::to_string(version));
  }
  if (!r.GetVarint32("range_id", &job.range_id) || !r.GetVarint32("drange", &job.drange) ||
      !r.GetU8("output_level", &level) || !r.GetString("comparator", &job.comparator)) {
    return bad("malformed header");
  }
  if (level < 1 || level >= kNumLevels) return bad("output level " + std::to_string(level));
  job.output_level = level;
  if (!GetCount(&r, "inputs", kMaxJobInputs, &n)) return bad("malformed input count");
  if (n == 0) return bad("no inputs");
  job.inputs.resize(n);
  for (CompactionJobInput& input : job.inputs) {
    uint8_t l = 0;
    if (!r.GetU8("input level", &l) || l >= kNumLevels ||
        !GetMeta(&r, "input table", &input.table)) {
      return bad("malformed input table");
    }
    input.level = l;
  }
  if (!GetCount(&r, "snapshots", kMaxJobSnapshots, &n)) return bad("malformed snapshot count");
  job.snapshots.resize(n);
  for (auto& s : job.snapshots) {
    if (!r.GetVarint64("snapshot", &s)) return bad("malformed snapshot");
  }
  if (!r.GetVarint64("smallest_snapshot", &job.smallest_snapshot) ||
      !r.GetU8("bottommost", &bottommost) || bottommost > 1 ||
      !r.GetVarint64("max_output_bytes", &job.max_output_bytes)) {
    return bad("malformed merge options");
  }
  job.bottommost = bottommost == 1;
  if (job.max_output_bytes == 0) return bad("max output bytes is 0");
  if (!GetCount(&r, "split_keys", kMaxJobSplitKeys, &n)) return bad("malformed split key count");
  job.split_user_keys.resize(n);
  for (auto& k : job.split_user_keys) {
    if (!r.GetString("split key", &k)) return bad("malformed split key");
  }
  if (!r.GetVarint32("block_bytes", &job.block_bytes) ||
      !r.GetVarint32("scatter_width", &job.scatter_width) ||
      !r.GetVarint32("bloom_bits", &job.bloom_bits_per_key) ||
      !r.GetVarint32("fragment_replicas", &job.fragment_replicas)) {
    return bad("malformed table options");
  }
  if (job.block_bytes == 0) return bad("block size is 0");
  if (job.scatter_width < 1 || job.scatter_width > kMaxDataFragments) {
    return bad("scatter width " + std::to_string(job.scatter_width));
  }
  if (job.bloom_bits_per_key > kMaxJobBloomBits) {
    return bad("bloom bits per key " + std::to_string(job.bloom_bits_per_key));
  }
  if (!GetCount(&r, "numbers", kMaxJobOutputNumbers, &n)) return bad("malformed number count");
  if (n == 0) return bad("no output numbers");
  job.output_numbers.resize(n);
  for (auto& num : job.output_numbers) {
    if (!r.GetVarint64("output number", &num)) return bad("malformed output number");
  }
  if (!GetCount(&r, "stocs", kMaxJobStocs, &n)) return bad("malformed StoC count");
  if (n == 0) return bad("no StoCs");
  job.stocs.resize(n);
  for (auto& [id, address] : job.stocs) {
    if (!r.GetVarint32("stoc id", &id) || !r.GetString("stoc address", &address)) {
      return bad("malformed StoC");
    }
  }
  if (job.fragment_replicas < 1 || job.fragment_replicas > job.stocs.size()) {
    return bad("fragment replicas " + std::to_string(job.fragment_replicas));
  }
  if (version >= kJobVersion) {
    uint8_t placement = 0;
    if (!r.GetU8("placement", &placement)) return bad("malformed placement");
    if (placement == kWirePlacementRandom) {
      job.placement = PlacementPolicy::kRandom;
    } else if (placement == kWirePlacementPowerOfD) {
      job.placement = PlacementPolicy::kPowerOfD;
    } else {
      return bad("unknown placement " + std::to_string(placement));
    }
  }
  if (version == kJobVersionWithEpoch &&
      (!r.GetVarint64("owner_epoch", &job.owner_epoch) || job.owner_epoch == 0)) {
    return bad("malformed owner epoch");
  }
  if (version == kJobVersionWithParity) {
    uint8_t availability = 0;
    if (!r.GetVarint64("owner_epoch", &job.owner_epoch)) return bad("malformed owner epoch");
    if (!r.GetU8("availability", &availability) ||
        availability > static_cast<uint8_t>(TableAvailability::kHybrid)) {
      return bad("malformed availability");
    }
    job.availability = static_cast<TableAvailability>(availability);
    if (!r.GetVarint32("parity_fragments", &job.parity_fragments) || job.parity_fragments < 1 ||
        job.parity_fragments > kMaxJobParityFragments) {
      return bad("parity fragments");
    }
    if (!GetCount(&r, "no_new_data", kMaxJobStocs, &n)) return bad("malformed StoC list");
    job.no_new_data.resize(n);
    for (uint32_t& id : job.no_new_data) {
      if (!r.GetVarint32("no_new_data id", &id)) return bad("malformed StoC list");
    }
  }
  Status s = r.Finish();
  if (!s.ok()) return Status::InvalidArgument("compaction job: " + s.message());
  *out = std::move(job);
  return Status::OK();
}

std::string EncodeCompactionJobResult(const CompactionJobResult& result) {
  wire::PayloadWriter w;
  w.PutU8(kResultVersion);
  w.PutVarint32(result.executed_by);
  w.PutVarint32(static_cast<uint32_t>(result.outputs.size()));
  for (const TableMeta& t : result.outputs) w.PutBytes(MetaBytes(t));
  w.PutVarint64(result.stats.input_entries);
  w.PutVarint64(result.stats.output_entries);
  w.PutVarint64(result.stats.dropped_entries);
  w.PutVarint64(result.stats.dropped_deletions);
  return w.Finish();
}

Status DecodeCompactionJobResult(std::string_view in, CompactionJobResult* out) {
  wire::PayloadReader r(in);
  CompactionJobResult result;
  uint8_t version = 0;
  uint32_t n = 0;
  if (!r.GetU8("version", &version) || version != kResultVersion ||
      !r.GetVarint32("executed_by", &result.executed_by) ||
      !GetCount(&r, "outputs", kMaxJobOutputNumbers, &n)) {
    return Status::Corruption("compaction result: malformed header");
  }
  result.outputs.resize(n);
  for (TableMeta& t : result.outputs) {
    if (!GetMeta(&r, "output table", &t)) {
      return Status::Corruption("compaction result: bad output");
    }
  }
  if (!r.GetVarint64("input_entries", &result.stats.input_entries) ||
      !r.GetVarint64("output_entries", &result.stats.output_entries) ||
      !r.GetVarint64("dropped_entries", &result.stats.dropped_entries) ||
      !r.GetVarint64("dropped_deletions", &result.stats.dropped_deletions)) {
    return Status::Corruption("compaction result: malformed stats");
  }
  NOVA_RETURN_NOT_OK_PREPEND(r.Finish(), "compaction result");
  result.stats.outputs = result.outputs.size();
  *out = std::move(result);
  return Status::OK();
}

Status RunCompactionJob(const CompactionJob& job, const InternalKeyComparator* icmp,
                        TableStore* store, CompactionJobResult* result) {
  const std::string what = "compaction job of range " + std::to_string(job.range_id);
  if (job.inputs.empty()) return Status::InvalidArgument(what + ": no inputs");
  if (job.output_numbers.empty()) return Status::InvalidArgument(what + ": no output numbers");
  CompactionMergeOptions mo;
  mo.icmp = icmp;
  mo.snapshots = job.snapshots;
  mo.smallest_snapshot_or_max = job.smallest_snapshot;
  mo.bottommost = job.bottommost;
  mo.max_output_bytes = job.max_output_bytes;
  mo.split_user_keys = job.split_user_keys;

  // Inputs: each table read through the store (any replica) in read-ahead windows
  // (ScanTable). Tables are declared before the merged iterator so they outlive it.
  std::vector<std::unique_ptr<ScanTable>> tables;
  std::vector<leveldb::Iterator*> children;
  for (const CompactionJobInput& input : job.inputs) {
    auto t = ScanTable::Open(store, input.table, icmp);
    if (!t.ok()) {
      for (auto* c : children) delete c;
      return t.status().Prepend(what + ": opening input table " +
                                std::to_string(input.table.number));
    }
    tables.push_back(std::move(t.value()));
    children.push_back(tables.back()->NewIterator().release());
  }
  std::unique_ptr<leveldb::Iterator> merged(NewMergingIterator(icmp, std::move(children)));

  std::unique_ptr<const leveldb::FilterPolicy> filter(
      leveldb::NewBloomFilterPolicy(static_cast<int>(job.bloom_bits_per_key)));
  TableBuildOptions opts;
  opts.block_size = job.block_bytes;
  opts.num_data_fragments = job.scatter_width;
  opts.filter_policy = filter.get();
  size_t next = 0;
  // ReservedNumberSink guarantees FinishOutput runs at most output_numbers.size() times.
  TableSink sink(icmp, opts, store, [&] { return job.output_numbers[next++]; }, job.drange);
  ReservedNumberSink limited(&sink, job.output_numbers.size());
  CompactionStats stats;
  Status s = RunCompactionMerge(merged.get(), mo, &limited, &stats);
  merged.reset();
  if (!s.ok()) {
    sink.Discard();
    return s.Prepend(what);
  }
  result->outputs = std::move(sink.outputs());
  result->stats = stats;
  return Status::OK();
}

}  // namespace nova::lsm
