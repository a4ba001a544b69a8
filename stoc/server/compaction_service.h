// StocCompactionService: runs compaction jobs offloaded by LTCs (paper 4.4.3, DESIGN.md
// section 7). A job (common/lsm/compaction_job.h) names its input tables with their fragment
// locations; the service reads them from any StoC holding a replica (this one included),
// merges them with lsm::RunCompactionMerge, writes the outputs (rho data fragments and a
// meta fragment, R replicas each, placed by power-of-d like the LTC places them) and
// answers with the outputs' metadata. The LTC alone installs the result.
//
// The service is a StoC *client*: it has its own transport (node "stoc-<id>-compactor",
// any free port) and StocClient, and reaches every StoC, itself included, the way an LTC
// does, through the table store the LTC uses too (stoc::StocTableStore: placement,
// replication, file names, read failover), and runs the job with the shared table layer
// (lsm::RunCompactionJob): it depends on common/lsm and stoc/client, never on the LTC.
//
// Requests (stoc::kCompact) arrive on the StoC's endpoint and run on its compaction pool
// (--stoc_compaction_threads). Errors come back as a Status: InvalidArgument for a job
// that does not decode, NotSupported for an unknown comparator, ResourceExhausted if the
// job's reserved table numbers run out, otherwise the storage or merge error. Whatever a
// failed job wrote is deleted before the error is sent.
//
// Lifecycle: constructor cannot fail; Init() starts the client transport; Shutdown()
// stops it (running jobs then fail). Thread safety: thread-safe; jobs run concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/lsm/internal_key.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/transport/slab_allocator.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_client.h"
#include "stoc/client/stoc_protocol.h"

namespace nova::stoc {

struct CompactionServiceOptions {
  uint32_t stoc_id = 0;
  // The daemon's transport options (secret, backend, xchg threads); the service changes
  // the node name and listens on any free port.
  transport::TransportOptions transport;
  // How long one StoC operation of a job may take.
  std::chrono::milliseconds stoc_timeout{30000};
  // Registered memory for reading input blocks, shared by all jobs.
  uint64_t read_pool_bytes = 16ull << 20;
  // Threads per job writing an output's fragment replicas in parallel.
  int io_threads_per_job = 4;
  // Inputs on StoCs of this host are read with pread (StocClientOptions::local_reads; the
  // daemon's --stoc_local_reads).
  bool local_reads = false;
};

class StocCompactionService : public rpc::RpcService {
 public:
  // `metrics` must outlive the service; `load` reports the StoC's LoadStats for replies.
  StocCompactionService(const CompactionServiceOptions& options, MetricsRegistry* metrics,
                        std::function<LoadStats()> load);
  ~StocCompactionService() override;
  StocCompactionService(const StocCompactionService&) = delete;
  StocCompactionService& operator=(const StocCompactionService&) = delete;

  Status Init();
  void Shutdown();

  // Runs one encoded job; returns the encoded lsm::CompactionJobResult or the error (see
  // the file comment). REQUIRES: Init() succeeded.
  Result<std::string> Execute(std::string_view request) EXCLUDES(mu_);

  // rpc::RpcService: kCompact.
  void HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) EXCLUDES(mu_) override;

 private:
  // Connects to each StoC of the job not connected yet (or moved); returns the ids reached.
  // Takes mu_ only around the map: connecting may take the transport's connect timeout.
  std::vector<uint32_t> Connect(const std::vector<std::pair<uint32_t, std::string>>& stocs)
      EXCLUDES(mu_);

  // Constant after construction.
  const CompactionServiceOptions options_;
  const std::function<LoadStats()> load_;
  const lsm::InternalKeyComparator icmp_;

  // Set by Init. Declared in destruction order: the client before the transport before
  // the endpoint.
  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<StocClient> client_;
  std::unique_ptr<transport::SlabAllocator> read_buffers_;

  Mutex mu_;
  std::map<uint32_t, std::string> connected_ GUARDED_BY(mu_);  // StoC id -> address

  // Metrics (owned by the registry).
  Counter* jobs_;
  Counter* errors_;
  Counter* output_tables_;
  Histogram* latency_ms_;
};

}  // namespace nova::stoc
