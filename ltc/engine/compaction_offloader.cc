#include "ltc/engine/compaction_offloader.h"

#include <tuple>

#include "stoc/client/stoc_protocol.h"

namespace nova::ltc {

namespace {

std::vector<uint32_t> IdsOf(const std::map<uint32_t, std::string>& stocs) {
  std::vector<uint32_t> ids;
  for (const auto& [id, address] : stocs) ids.push_back(id);
  return ids;
}

}  // namespace

Status ParseOffloadPolicy(std::string_view name, OffloadPolicy* policy) {
  if (name == "none") {
    *policy = OffloadPolicy::kNone;
  } else if (name == "round-robin") {
    *policy = OffloadPolicy::kRoundRobin;
  } else if (name == "least-loaded") {
    *policy = OffloadPolicy::kLeastLoaded;
  } else {
    return Status::InvalidArgument("compaction offload policy must be none, round-robin or "
                                   "least-loaded, not '" + std::string(name) + "'");
  }
  return Status::OK();
}

const char* OffloadPolicyName(OffloadPolicy policy) {
  switch (policy) {
    case OffloadPolicy::kNone: return "none";
    case OffloadPolicy::kRoundRobin: return "round-robin";
    case OffloadPolicy::kLeastLoaded: return "least-loaded";
  }
  return "unknown";
}

StocCompactionOffloader::StocCompactionOffloader(stoc::StocClient* client,
                                                 StocCompactionOffloaderOptions options)
    : client_(client),
      options_(std::move(options)),
      ids_(IdsOf(options_.stocs)),
      storage_(options_.storage_stocs.empty() ? options_.stocs : options_.storage_stocs) {}

void StocCompactionOffloader::SetStocs(std::map<uint32_t, std::string> stocs,
                                       std::map<uint32_t, std::string> storage_stocs,
                                       std::vector<uint32_t> no_new_data) {
  if (stocs.empty()) return;
  MutexLock lock(&mu_);
  ids_ = IdsOf(stocs);
  storage_ = storage_stocs.empty() ? std::move(stocs) : std::move(storage_stocs);
  no_new_data_ = std::move(no_new_data);
}

Status StocCompactionOffloader::Init() {
  if (options_.policy == OffloadPolicy::kNone) {
    return Status::InvalidArgument("a compaction offloader needs a policy other than none");
  }
  MutexLock lock(&mu_);
  if (ids_.empty()) return Status::InvalidArgument("no StoCs to offload compactions to");
  return Status::OK();
}

uint32_t StocCompactionOffloader::ChooseStoc() {
  MutexLock lock(&mu_);
  const size_t start = next_++ % ids_.size();
  if (options_.policy != OffloadPolicy::kLeastLoaded) return ids_[start];
  // Scan from the round-robin position so ties rotate.
  size_t best = start;
  std::tuple<int, uint32_t, uint64_t> best_key;
  for (size_t k = 0; k < ids_.size(); ++k) {
    const size_t i = (start + k) % ids_.size();
    const stoc::StocLoad load = client_->load_view().Get(ids_[i]);
    auto it = in_flight_.find(ids_[i]);
    const std::tuple<int, uint32_t, uint64_t> key{it == in_flight_.end() ? 0 : it->second,
                                                  load.queue_depth, load.pending_bytes};
    if (k == 0 || key < best_key) {
      best = i;
      best_key = key;
    }
  }
  return ids_[best];
}

Status StocCompactionOffloader::RunAt(uint32_t stoc_id, lsm::CompactionJob job,
                                      lsm::CompactionJobResult* result) {
  job.fragment_replicas = options_.fragment_replicas;
  job.placement = options_.placement;
  job.availability = options_.availability;
  job.parity_fragments = options_.parity_fragments;
  {
    MutexLock lock(&mu_);
    job.stocs.assign(storage_.begin(), storage_.end());
    job.no_new_data = no_new_data_;
  }
  const std::string request = lsm::EncodeCompactionJob(job);
  {
    MutexLock lock(&mu_);
    ++in_flight_[stoc_id];
    ++stats_.jobs_sent;
  }
  auto reply = client_->Call(stoc_id, stoc::kCompact, request, options_.timeout);
  Status s = reply.status();
  lsm::CompactionJobResult r;
  if (s.ok()) s = lsm::DecodeCompactionJobResult(reply.value(), &r);
  if (s.ok() && r.outputs.size() > job.output_numbers.size()) {
    s = Status::Corruption("more outputs than reserved numbers");
  }
  {
    MutexLock lock(&mu_);
    --in_flight_[stoc_id];
    if (s.ok()) {
      ++stats_.jobs_succeeded;
      ++stats_.succeeded_by_stoc[stoc_id];
    } else {
      ++stats_.jobs_failed;
    }
  }
  if (!s.ok()) return s.Prepend("compaction job offloaded to StoC " + std::to_string(stoc_id));
  *result = std::move(r);
  return Status::OK();
}

Status StocCompactionOffloader::Run(lsm::CompactionJob job, lsm::CompactionJobResult* result) {
  return RunAt(ChooseStoc(), std::move(job), result);
}

StocCompactionOffloaderStats StocCompactionOffloader::GetStats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace nova::ltc
