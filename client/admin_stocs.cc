#include "client/admin_stocs.h"

#include <cstdio>
#include <set>
#include <thread>

#include "common/clock.h"
#include "coordinator/ltc_status.h"

namespace nova::client {

namespace co = coordinator;

namespace {

// How often WaitStocDrained re-reads the status documents, and prints progress: the LTCs
// publish when a figure changes, and a drain takes seconds to hours.
constexpr auto kDrainPollInterval = std::chrono::milliseconds(500);
constexpr auto kDrainProgressInterval = std::chrono::seconds(5);

}  // namespace

Result<StocDrainProgress> ReadStocDrainProgress(co::ConfigStore* store,
                                                const co::ClusterConfig& config,
                                                const std::string& stoc, uint64_t epoch) {
  auto statuses = store->ReadStatuses(co::MemberKind::kLtc);
  if (!statuses.ok()) return statuses.status();
  std::set<std::string> owners;
  for (const co::RangeAssignment& r : config.ranges) {
    if (!r.ltc.empty()) owners.insert(r.ltc);
  }
  StocDrainProgress progress;
  for (const std::string& ltc : owners) {
    auto text = statuses->find(ltc);
    Result<co::LtcStatus> st = Status::NotFound("no status");
    if (text != statuses->end()) st = co::LtcStatus::FromJson(text->second);
    if (!st.ok() || st->config_epoch < epoch) {
      progress.behind.push_back(ltc);
      continue;
    }
    progress.copies_left += st->CopiesToMove(stoc);
  }
  return progress;
}

Status WaitStocDrained(co::ConfigStore* store, const std::string& what, const std::string& stoc,
                       uint64_t epoch, std::chrono::seconds timeout) {
  const MonoTime start = MonoNow();
  const MonoTime deadline = start + timeout;
  MonoTime next_report = start;
  while (true) {
    auto config = store->ReadConfig();
    if (!config.ok()) return config.status();
    if (config->draining_stocs.count(stoc) == 0) {
      return Status::IllegalState(what + ": StoC " + stoc + " is no longer draining " +
                                  "(undrain-stoc ran meanwhile?)");
    }
    auto progress = ReadStocDrainProgress(store, config.value(), stoc, epoch);
    if (!progress.ok()) return progress.status();
    const long long s =
        std::chrono::duration_cast<std::chrono::seconds>(MonoNow() - start).count();
    if (progress->done()) {
      std::printf("%s: StoC %s holds no table copy of any range (after %lld s)\n", what.c_str(),
                  stoc.c_str(), s);
      std::fflush(stdout);
      return Status::OK();
    }
    std::string behind;
    for (const std::string& ltc : progress->behind) behind += (behind.empty() ? "" : ",") + ltc;
    const std::string left =
        std::to_string(progress->copies_left) + " table copies left to move" +
        (behind.empty() ? "" : "; LTCs not reporting at epoch >= " + std::to_string(epoch) +
                                   " yet: " + behind);
    if (MonoNow() >= deadline) {
      return Status::TimedOut(what + ": StoC " + stoc + " not drained after " +
                              std::to_string(timeout.count()) + " s: " + left +
                              " (the drain goes on; re-run to wait again)");
    }
    if (MonoNow() >= next_report) {
      std::printf("%s: StoC %s: %s (after %lld s)\n", what.c_str(), stoc.c_str(), left.c_str(), s);
      std::fflush(stdout);
      next_report = MonoNow() + kDrainProgressInterval;
    }
    std::this_thread::sleep_for(kDrainPollInterval);
  }
}

Status PrintLtcStatuses(co::ConfigStore* store, const co::ClusterConfig& config) {
  auto statuses = store->ReadStatuses(co::MemberKind::kLtc);
  if (!statuses.ok()) return statuses.status();
  if (!statuses->empty()) {
    std::printf("LTC status (table copies at risk: on dead or removed StoCs, not rebuilt yet; "
                "to move: off draining or removed StoCs):\n");
  }
  for (const auto& [ltc, text] : statuses.value()) {
    auto st = co::LtcStatus::FromJson(text);
    if (!st.ok()) {
      std::printf("  LTC %s: unreadable status: %s\n", ltc.c_str(), st.status().ToString().c_str());
      continue;
    }
    std::string to_move;
    for (const auto& [stoc, n] : st->copies_to_move) {
      to_move += (to_move.empty() ? "" : ", ") + std::string("StoC ") + stoc + ": " +
                 std::to_string(n);
    }
    std::printf("  LTC %s: at epoch %llu%s: %llu copies at risk; to move: %s; relocated %llu "
                "tables, %llu bytes, %llu failed attempts\n",
                ltc.c_str(), static_cast<unsigned long long>(st->config_epoch),
                st->config_epoch < config.epoch ? " (behind)" : "",
                static_cast<unsigned long long>(st->copies_at_risk),
                to_move.empty() ? "none" : to_move.c_str(),
                static_cast<unsigned long long>(st->tables_relocated),
                static_cast<unsigned long long>(st->bytes_relocated),
                static_cast<unsigned long long>(st->relocation_failures));
  }
  return Status::OK();
}

}  // namespace nova::client
