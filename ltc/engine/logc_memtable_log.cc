#include "ltc/engine/logc_memtable_log.h"

#include <string>

namespace nova::ltc {

Status LogcMemtableLog::Append(uint64_t memtable, std::string_view records, bool* reached) {
  return client_->Append(range_id_, memtable, records, reached);
}

void LogcMemtableLog::Drop(const std::vector<uint64_t>& memtables) {
  client_->Delete(range_id_, memtables);
}

Status LogcMemtableLog::ReadAll(int threads, bool new_range, const ReadFilter& read,
                                std::vector<Recovered>* logs) {
  // Before anything is read: afterwards no older owner can complete an acknowledged append,
  // so every write it acknowledged is in what is read below.
  NOVA_RETURN_NOT_OK(client_->FenceRange(range_id_, owner_epoch_));
  std::vector<logc::LogClient::RecoveredLog> found;
  std::vector<uint64_t> missing;
  // Logs the filter leaves out are listed, not read (the client does not read them at all;
  // docs/durability.md).
  NOVA_RETURN_NOT_OK(client_->ReadAll(range_id_, threads, new_range, read, &found, &missing));
  logs->clear();
  if (!missing.empty()) {
    std::string ids;
    for (uint64_t m : missing) ids += (ids.empty() ? "" : ",") + std::to_string(m);
    return Status::Unavailable("range " + std::to_string(range_id_) + ": the logs of memtables " +
                               ids + " are listed but no replica could be read");
  }
  for (auto& r : found) logs->push_back(Recovered{r.memtable, std::move(r.bytes), r.read});
  return Status::OK();
}

}  // namespace nova::ltc
