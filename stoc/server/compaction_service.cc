#include "stoc/server/compaction_service.h"

#include <glog/logging.h>
#include <leveldb/comparator.h>

#include "common/clock.h"
#include "common/lsm/compaction_job.h"
#include "stoc/client/stoc_table_store.h"

namespace nova::stoc {

namespace {

// Read buffer classes: from a small data block up to a large index block; larger reads
// register their destination for the call (stoc::StocTableStore does that by itself).
constexpr uint64_t kReadMinClassBytes = 4 << 10;
constexpr uint64_t kReadMaxClassBytes = 1 << 20;
constexpr uint64_t kReadSlabBytes = 1 << 20;

}  // namespace

StocCompactionService::StocCompactionService(const CompactionServiceOptions& options,
                                             MetricsRegistry* metrics,
                                             std::function<LoadStats()> load)
    : options_(options),
      load_(std::move(load)),
      icmp_(leveldb::BytewiseComparator()),
      endpoint_(rpc::RpcEndpointOptions{options.transport.max_message_bytes}) {
  jobs_ = metrics->GetCounter("stoc_compactions_total", "Offloaded compaction jobs completed");
  errors_ = metrics->GetCounter("stoc_compaction_errors_total", "Offloaded compaction jobs failed");
  output_tables_ =
      metrics->GetCounter("stoc_compaction_output_tables_total", "Tables written by compactions");
  latency_ms_ = metrics->GetHistogram("stoc_compaction_latency_ms", "Time to run one job");
}

StocCompactionService::~StocCompactionService() { Shutdown(); }

Status StocCompactionService::Init() {
  transport::TransportOptions to = options_.transport;
  to.node_name = "stoc-" + std::to_string(options_.stoc_id) + "-compactor";
  to.listen_port = 0;  // the StoC's own port belongs to its server
  auto t = transport::NewTransport(to, &endpoint_);
  if (!t.ok()) return t.status().Prepend("compaction service transport");
  transport_ = std::move(t.value());
  endpoint_.Attach(transport_.get());
  StocClientOptions co;
  co.timeout = options_.stoc_timeout;
  co.inline_reads = to.backend != transport::Backend::kVerbs;  // as the LTC's (range_backend.cc)
  co.local_reads = options_.local_reads;
  client_ = std::make_unique<StocClient>(&endpoint_, co);
  NOVA_RETURN_NOT_OK_PREPEND(transport_->Init(), "compaction service transport");
  NOVA_RETURN_NOT_OK_PREPEND(transport_->Start(), "compaction service transport");
  transport::SlabOptions slab;
  slab.pool_bytes = options_.read_pool_bytes;
  slab.min_class_bytes = kReadMinClassBytes;
  slab.max_class_bytes = kReadMaxClassBytes;
  slab.slab_bytes = kReadSlabBytes;
  read_buffers_ = std::make_unique<transport::SlabAllocator>(transport_.get(), slab);
  NOVA_RETURN_NOT_OK_PREPEND(read_buffers_->Init(), "compaction service read buffers");
  return Status::OK();
}

void StocCompactionService::Shutdown() {
  if (transport_) transport_->Shutdown();
}

std::vector<uint32_t> StocCompactionService::Connect(
    const std::vector<std::pair<uint32_t, std::string>>& stocs) {
  std::vector<uint32_t> reached;
  for (const auto& [id, address] : stocs) {
    {
      MutexLock lock(&mu_);
      auto it = connected_.find(id);
      if (it != connected_.end() && it->second == address) {
        reached.push_back(id);
        continue;
      }
    }
    // Outside mu_: connecting may take the transport's connect timeout.
    Status s = client_->AddStoc(id, address);
    if (!s.ok()) {
      // Inputs have other replicas, and outputs can go elsewhere: the job may still work.
      LOG(WARNING) << "compaction service: cannot reach StoC " << id << " at " << address << ": "
                   << s.ToString();
      continue;
    }
    MutexLock lock(&mu_);
    connected_[id] = address;
    reached.push_back(id);
  }
  return reached;
}

Result<std::string> StocCompactionService::Execute(std::string_view request) {
  lsm::CompactionJob job;
  NOVA_RETURN_NOT_OK(lsm::DecodeCompactionJob(request, &job));
  if (job.comparator != icmp_.user_comparator()->Name()) {
    return Status::NotSupported("compaction service: unknown comparator '" + job.comparator + "'");
  }
  if (client_ == nullptr) return Status::IllegalState("compaction service is not initialized");
  stoc::StocTableStoreOptions so;
  so.range_id = job.range_id;
  so.stocs = Connect(job.stocs);
  so.fragment_replicas = static_cast<int>(job.fragment_replicas);
  so.placement = job.placement;
  so.availability = job.availability;
  so.parity_fragments = static_cast<int>(job.parity_fragments);
  so.no_new_data = job.no_new_data;
  so.read_buffers = read_buffers_.get();
  so.io_threads = options_.io_threads_per_job;
  // The outputs are written (and, when the job fails, deleted) as the sending owner: once a
  // newer owner fenced the range the StoCs refuse them, so a fenced-off LTC's job can
  // neither overwrite nor delete the newer owner's tables of the same numbers. The job never
  // touches the MANIFEST, so the store does not fence the range first.
  so.owner_epoch = job.owner_epoch;
  so.fence_on_init = false;
  stoc::StocTableStore store(client_.get(), so);
  NOVA_RETURN_NOT_OK_PREPEND(store.Init(), "compaction service");
  lsm::CompactionJobResult result;
  NOVA_RETURN_NOT_OK(lsm::RunCompactionJob(job, &icmp_, &store, &result));
  result.executed_by = options_.stoc_id;
  output_tables_->Increment(result.outputs.size());
  return lsm::EncodeCompactionJobResult(result);
}

void StocCompactionService::HandleRequest(transport::PeerId peer, uint16_t type,
                                          std::string payload, rpc::Responder responder) {
  (void)peer;
  if (type != kCompact) {
    responder.ReplyError(Status::NotSupported("compaction service: message type " +
                                              std::to_string(type)));
    return;
  }
  const MonoTime start = MonoNow();
  auto result = Execute(payload);
  latency_ms_->Record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count()));
  if (!result.ok()) {
    errors_->Increment();
    LOG(WARNING) << "compaction job failed: " << result.status().ToString();
    responder.ReplyError(result.status());
    return;
  }
  jobs_->Increment();
  responder.Reply(EncodeWithLoad(load_(), result.value()));
}

}  // namespace nova::stoc
