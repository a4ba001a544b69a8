#include "ltc/engine/memtable_log.h"

namespace nova::ltc {

Status InMemoryMemtableLog::Append(uint64_t memtable, std::string_view records, bool* reached) {
  MutexLock lock(&mu_);
  *reached = true;
  if (fail_) {
    *reached = fail_reached_;
    return Status::IOError("log append failed (test fault)");
  }
  logs_[memtable].append(records);
  ++appends_;
  return Status::OK();
}

void InMemoryMemtableLog::Drop(const std::vector<uint64_t>& memtables) {
  MutexLock lock(&mu_);
  for (uint64_t m : memtables) logs_.erase(m);
}

Status InMemoryMemtableLog::ReadAll(int threads, bool new_range, const ReadFilter& read,
                                    std::vector<Recovered>* logs) {
  (void)new_range;
  (void)threads;
  MutexLock lock(&mu_);
  logs->clear();
  for (const auto& [m, bytes] : logs_) {
    if (read && !read(m)) {
      logs->push_back(Recovered{m, std::string(), /*read=*/false});
    } else {
      logs->push_back(Recovered{m, bytes});
      bytes_read_ += bytes.size();
    }
  }
  return Status::OK();
}

void InMemoryMemtableLog::SetFailAppends(bool fail, bool reached) {
  MutexLock lock(&mu_);
  fail_ = fail;
  fail_reached_ = reached;
}

bool InMemoryMemtableLog::TearTail(uint64_t memtable, size_t bytes) {
  MutexLock lock(&mu_);
  auto it = logs_.find(memtable);
  if (it == logs_.end()) return false;
  it->second.resize(it->second.size() > bytes ? it->second.size() - bytes : 0);
  return true;
}

bool InMemoryMemtableLog::Corrupt(uint64_t memtable, size_t offset) {
  MutexLock lock(&mu_);
  auto it = logs_.find(memtable);
  if (it == logs_.end() || offset >= it->second.size()) return false;
  it->second[offset] = static_cast<char>(it->second[offset] ^ 0x10);
  return true;
}

std::map<uint64_t, std::string> InMemoryMemtableLog::Snapshot() const {
  MutexLock lock(&mu_);
  return logs_;
}

uint64_t InMemoryMemtableLog::bytes_read() const {
  MutexLock lock(&mu_);
  return bytes_read_;
}

uint64_t InMemoryMemtableLog::appends() const {
  MutexLock lock(&mu_);
  return appends_;
}

}  // namespace nova::ltc
