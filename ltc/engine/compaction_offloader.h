// CompactionOffloader: where an LTC sends a compaction job to run elsewhere (paper 4.4.3:
// "the coordinator thread offloads each compaction job to a StoC based on a policy").
//
// The engine (RangeEngine::RunCompaction) builds a lsm::CompactionJob and calls Run(); any error
// makes it run the job itself, so an offloader only has to be right when it says OK.
//
// StocCompactionOffloader sends the job to one StoC's compaction service (stoc::kCompact)
// chosen by policy:
//  - round-robin (the paper's): StoCs in turn;
//  - least-loaded: the StoC with the fewest jobs this offloader has running there, then the
//    shortest storage queue in the client's load view (piggybacked on StoC replies), then
//    the fewest bytes pending; ties go round-robin. Jobs in flight count first because a
//    StoC's reported queue covers appends and reads, not the compactions it is running.
// One attempt per job: a failed or timed-out job is not retried at another StoC (the
// local fallback is cheaper than a second remote attempt, and always available).
//
// Thread safety: thread-safe (compactions of different Dranges offload concurrently).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsm/compaction_job.h"
#include "common/mutex.h"
#include "common/status.h"
#include "stoc/client/stoc_client.h"

namespace nova::ltc {

enum class OffloadPolicy {
  kNone,         // run every compaction at the LTC
  kRoundRobin,
  kLeastLoaded,
};

// Parses --ltc_compaction_offload: "none", "round-robin" or "least-loaded".
// InvalidArgument otherwise.
Status ParseOffloadPolicy(std::string_view name, OffloadPolicy* policy);
const char* OffloadPolicyName(OffloadPolicy policy);

class CompactionOffloader {
 public:
  virtual ~CompactionOffloader() = default;
  // Runs `job` somewhere other than here. The offloader fills job.stocs,
  // job.fragment_replicas and job.placement itself. Returns OK
  // with the outputs (written, durable, not yet in any MANIFEST), or an error after which
  // the caller runs the job locally; outputs of a failed job were deleted by the executor,
  // except when the executor died or the reply was lost (then they are orphans, named by
  // range and table number for a later sweep).
  virtual Status Run(lsm::CompactionJob job, lsm::CompactionJobResult* result) = 0;
};

struct StocCompactionOffloaderOptions {
  OffloadPolicy policy = OffloadPolicy::kRoundRobin;
  // StoCs jobs may go to: id -> transport address. Every one must be known to the client.
  std::map<uint32_t, std::string> stocs;
  // StoCs the executor may read inputs from and place outputs on (id -> address); empty:
  // the same as `stocs`. The LTC's table store must use the same set.
  std::map<uint32_t, std::string> storage_stocs;
  // R of the outputs: the LTC's table store's fragment_replicas (--ltc_fragment_replicas).
  uint32_t fragment_replicas = 1;
  // How the executor places the outputs' fragments: the LTC's table store's placement
  // (--ltc_placement).
  lsm::PlacementPolicy placement = lsm::PlacementPolicy::kPowerOfD;
  // How the outputs survive StoC losses: the LTC's table store's (--ltc_table_availability,
  // --ltc_parity_fragments).
  lsm::TableAvailability availability = lsm::TableAvailability::kReplicas;
  uint32_t parity_fragments = 1;
  // How long one job may take at a StoC before the LTC gives up and runs it itself.
  std::chrono::milliseconds timeout{120000};
};

struct StocCompactionOffloaderStats {
  uint64_t jobs_sent = 0;
  uint64_t jobs_succeeded = 0;
  uint64_t jobs_failed = 0;
  std::map<uint32_t, uint64_t> succeeded_by_stoc;
};

class StocCompactionOffloader final : public CompactionOffloader {
 public:
  // `client` must outlive the offloader.
  StocCompactionOffloader(stoc::StocClient* client, StocCompactionOffloaderOptions options);

  // InvalidArgument if the policy is kNone or there are no StoCs.
  Status Init();

  Status Run(lsm::CompactionJob job, lsm::CompactionJobResult* result) override;

  // The StoC the next job goes to (advances round-robin). Exposed for tests.
  uint32_t ChooseStoc() EXCLUDES(mu_);
  // Sends `job` to `stoc_id` (filling job.stocs). Exposed for tests.
  Status RunAt(uint32_t stoc_id, lsm::CompactionJob job, lsm::CompactionJobResult* result)
      EXCLUDES(mu_);

  StocCompactionOffloaderStats GetStats() const EXCLUDES(mu_);

  // Replaces the StoCs jobs go to and the storage StoCs (as in the options; the client must
  // know every one), and names storage StoCs that take no outputs (being drained): the
  // cluster's StoCs changed. Jobs already sent keep theirs. An empty `stocs` is ignored
  // (there must always be somewhere to send a job).
  void SetStocs(std::map<uint32_t, std::string> stocs,
                std::map<uint32_t, std::string> storage_stocs,
                std::vector<uint32_t> no_new_data) EXCLUDES(mu_);

 private:
  stoc::StocClient* const client_;  // must outlive this
  const StocCompactionOffloaderOptions options_;  // stocs/storage_stocs: see below

  mutable Mutex mu_;
  std::vector<uint32_t> ids_ GUARDED_BY(mu_);  // the StoCs jobs go to, ascending
  std::map<uint32_t, std::string> storage_ GUARDED_BY(mu_);  // storage StoCs of a job
  std::vector<uint32_t> no_new_data_ GUARDED_BY(mu_);        // of storage_: no outputs
  size_t next_ GUARDED_BY(mu_) = 0;                    // round-robin position in ids_
  std::map<uint32_t, int> in_flight_ GUARDED_BY(mu_);  // jobs running per StoC
  StocCompactionOffloaderStats stats_ GUARDED_BY(mu_);
};

}  // namespace nova::ltc
