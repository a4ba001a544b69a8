#include "logc/client/log_fencer.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>

#include "common/rpc/rpc_endpoint.h"
#include "logc/client/log_client.h"
#include "logc/client/log_registry.h"
#include "logc/client/logc_replica_set.h"

namespace nova::logc {

LogFencer::LogFencer(const internal::LogParts& parts) : parts_(parts) {}

Status LogFencer::FenceRange(uint32_t range, uint64_t owner_epoch) {
  if (owner_epoch == 0) return Status::OK();  // legacy: unfenced, nothing to do
  parts_.registry->SetEpoch(range, owner_epoch);
  if (parts_.settings->mode.load() == LogMode::kNone) return Status::OK();  // no logs
  const std::vector<std::string> ids = parts_.logcs->ConfiguredIds();
  const std::string payload = Encode(FenceLogsRequest{range, owner_epoch});
  // In parallel: a fence may wait for a LogC's disk (the drain), and each LogC up to the
  // timeout.
  std::vector<Status> results(ids.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] {
      auto peer = parts_.logcs->PeerFor(ids[i]);
      if (!peer.ok()) {
        results[i] = peer.status();
        return;
      }
      auto reply =
          parts_.endpoint->CallSync(peer.value(), kFenceLogs, payload, parts_.options->timeout);
      FenceLogsResponse resp;
      results[i] = reply.ok() ? Decode(reply.value(), &resp) : reply.status();
      if (!reply.ok() && !reply.status().IsFenced()) parts_.logcs->MarkFailed(ids[i]);
    });
  }
  for (auto& t : threads) t.join();

  const int n = static_cast<int>(ids.size());
  const int need = std::max(1, n - parts_.settings->InsyncTarget() + 1);
  int confirmed = 0;
  std::string missing;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (results[i].IsFenced()) {
      // A newer owner fenced the range: this client is the stale one.
      parts_.registry->MarkFenced(range, results[i]);
      return parts_.registry->FencedError(range);
    }
    if (results[i].ok()) {
      ++confirmed;
    } else {
      missing += (missing.empty() ? "" : ", ") + ids[i] + " (" + results[i].ToString() + ")";
    }
  }
  const std::string summary = "range " + std::to_string(range) + " fenced at owner epoch " +
                              std::to_string(owner_epoch) + " by " + std::to_string(confirmed) +
                              " of " + std::to_string(n) + " LogC(s)";
  if (confirmed < need) {
    return Status::Unavailable(summary + "; " + std::to_string(need) +
                               " must confirm (a write is acknowledged on " +
                               std::to_string(parts_.settings->InsyncTarget()) +
                               "); not confirmed: " + (missing.empty() ? "none" : missing));
  }
  if (!missing.empty()) LOG(WARNING) << summary << "; not confirmed: " << missing;
  return Status::OK();
}

}  // namespace nova::logc
