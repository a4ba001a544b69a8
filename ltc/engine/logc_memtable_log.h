// LogcMemtableLog: a range's MemtableLog over LogCs (logc::LogClient): what nova_ltc gives
// each range's engine when the cluster's log mode is not `none` (docs/durability.md).
//
// Thread safety: thread-safe (LogClient is).
#pragma once

#include <cstdint>
#include <vector>

#include "logc/client/log_client.h"
#include "ltc/engine/memtable_log.h"

namespace nova::ltc {

class LogcMemtableLog final : public MemtableLog {
 public:
  // `client` must outlive this. `owner_epoch` (0: not fenced) is the range's owner epoch:
  // ReadAll fences the range at the LogCs with it first (docs/logc.md, "Fencing").
  LogcMemtableLog(logc::LogClient* client, uint32_t range_id, uint64_t owner_epoch = 0)
      : client_(client), range_id_(range_id), owner_epoch_(owner_epoch) {}
  // The range closes here: the client stops vouching for it (LogClient::ForgetRange).
  ~LogcMemtableLog() override { client_->ForgetRange(range_id_); }

  using MemtableLog::Append;
  Status Append(uint64_t memtable, std::string_view records, bool* reached) override;
  void Drop(const std::vector<uint64_t>& memtables) override;
  // Unavailable if a log is listed by a LogC but could be read from no replica, or if too
  // many LogCs cannot vouch for their listing (LogClient::ReadAll): recovery must not go
  // on without a log that may exist (the range's open is retried). With an owner epoch,
  // the range is fenced at the LogCs first (LogClient::FenceRange): Unavailable if too few
  // LogCs confirmed, Fenced if a newer owner has it.
  // `read`: see MemtableLog::ReadAll. LogClient::ReadAll cannot list a log without
  // reading it yet, so logs not to read are read and their bytes discarded (correct, but
  // the time a migration saves is not saved over LogCs until it can).
  using MemtableLog::ReadAll;
  Status ReadAll(int threads, bool new_range, const ReadFilter& read,
                 std::vector<Recovered>* logs) override;

 private:
  logc::LogClient* const client_;
  const uint32_t range_id_;
  const uint64_t owner_epoch_;
};

}  // namespace nova::ltc
