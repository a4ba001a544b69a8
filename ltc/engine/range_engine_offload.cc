// RangeEngine: turning a picked compaction into a lsm::CompactionJob for the offloader
// (paper 4.4.3). RunCompaction (range_engine_compaction.cc) decides what to do with the
// outcome; this file only builds the job and checks the answer.
#include <set>

#include "common/lsm/compaction_job.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {

// Table numbers reserved beyond the estimate below: the last output of a run and outputs
// cut at split keys may be small, and numbers are cheap (an unused one is a gap).
constexpr uint64_t kSpareOutputNumbers = 4;

}  // namespace

Status RangeEngine::OffloadCompaction(int level, const std::vector<TableRef>& inputs,
                                      const std::vector<TableRef>& next,
                                      const lsm::CompactionMergeOptions& mo,
                                      std::vector<lsm::TableMeta>* outputs) {
  lsm::CompactionJob job;
  job.range_id = options_.range_id;
  job.owner_epoch = options_.owner_epoch;
  job.drange = inputs.front()->meta().drange;
  job.output_level = level + 1;
  job.comparator = options_.comparator->Name();
  uint64_t input_bytes = 0;
  for (const TableRef& t : inputs) {
    job.inputs.push_back(lsm::CompactionJobInput{level, t->meta()});
    input_bytes += t->meta().layout.file_size;
  }
  for (const TableRef& t : next) {
    job.inputs.push_back(lsm::CompactionJobInput{level + 1, t->meta()});
    input_bytes += t->meta().layout.file_size;
  }
  job.snapshots = mo.snapshots;
  job.smallest_snapshot = mo.smallest_snapshot_or_max;
  job.bottommost = mo.bottommost;
  job.max_output_bytes = mo.max_output_bytes;
  job.split_user_keys = mo.split_user_keys;
  job.block_bytes = options_.block_bytes;
  job.scatter_width = options_.scatter_width;
  job.bloom_bits_per_key = static_cast<uint32_t>(std::max(0, options_.bloom_bits_per_key));

  // Outputs are cut once they reach max_output_bytes, so their number is bounded by the
  // input bytes over that size (outputs hold no more than the inputs; doubled for block
  // and index overheads), plus one per split key, plus spares.
  const uint64_t estimate = 2 * (input_bytes / mo.max_output_bytes) + mo.split_user_keys.size() +
                            kSpareOutputNumbers;
  if (estimate > lsm::kMaxJobOutputNumbers) {
    return Status::NotSupported("job needs up to " + std::to_string(estimate) +
                                " output numbers, more than a job may carry");
  }
  for (uint64_t i = 0; i < estimate; ++i) job.output_numbers.push_back(NewFileNumber());
  const std::set<uint64_t> reserved(job.output_numbers.begin(), job.output_numbers.end());

  lsm::CompactionJobResult result;
  NOVA_RETURN_NOT_OK(options_.compaction_offloader->Run(std::move(job), &result));
  // The outputs go into the MANIFEST as they are: refuse ones this range did not reserve.
  std::set<uint64_t> seen;
  for (const lsm::TableMeta& m : result.outputs) {
    if (reserved.count(m.number) == 0 || !seen.insert(m.number).second) {
      return Status::Corruption("offloaded compaction returned table number " +
                                std::to_string(m.number) + ", not one reserved for it");
    }
  }
  *outputs = std::move(result.outputs);
  return Status::OK();
}

}  // namespace nova::ltc
