// MemtableLog: where a range's engine logs its writes, one log per memtable (paper 4.4.5,
// DESIGN.md section 6, docs/durability.md).
//
// The engine appends each write's log record (ltc/engine/log_record.h) to the log of every
// memtable the write goes to before adding it there, and acknowledges the write only when
// Append returns OK (the log mode's guarantee holds). Once a memtable's contents are in a
// table recorded in the MANIFEST (or were re-logged into another memtable's log), the engine
// drops its log. At Open it reads every log the range still has and rebuilds the memtables.
//
// nova_ltc implements it over LogCs (ltc/engine/logc_memtable_log.h); InMemoryMemtableLog below
// keeps the logs in this process (tests: an engine destroyed without flushing and reopened
// over the same log and table store is a crash of the LTC).
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace nova::ltc {

class MemtableLog {
 public:
  virtual ~MemtableLog() = default;
  // Appends `records` (whole encoded log records) to memtable `memtable`'s log, creating
  // the log on first use. Returns once the bytes are as safe as the log mode promises; an
  // error means they may or may not be in the log, except that *reached (not null) is set
  // false when none of the bytes reached any replica: then they are in no log.
  virtual Status Append(uint64_t memtable, std::string_view records, bool* reached) = 0;
  Status Append(uint64_t memtable, std::string_view records) {
    bool reached;
    return Append(memtable, records, &reached);
  }
  // The logs of these memtables are no longer needed. Asynchronous and best effort: a log
  // that survives is recognized as obsolete by the MANIFEST at the next Open.
  virtual void Drop(const std::vector<uint64_t>& memtables) = 0;
  // Every log the range has, read whole (trailing zero bytes allowed). A log that exists
  // but cannot be read from any replica is an error, and so is not knowing whether one
  // exists (docs/durability.md "Recovery"): recovery must not go on without it.
  // `new_range`: the range's MANIFEST was just created, so it never had a log to miss.
  // A log for whose memtable `read` (if not null) returns false is listed but not read
  // (a live migration copied its memtable, range_migration.h; or the MANIFEST marks it
  // obsolete): it comes back with read false and no bytes, so the engine still knows and
  // later drops it, and whether it could be read does not matter. `read` is called on the
  // calling thread.
  using ReadFilter = std::function<bool(uint64_t memtable)>;
  struct Recovered {
    uint64_t memtable = 0;
    std::string bytes;
    bool read = true;  // false: listed only (`read` said so); `bytes` is empty
  };
  virtual Status ReadAll(int threads, bool new_range, const ReadFilter& read,
                         std::vector<Recovered>* logs) = 0;
  Status ReadAll(int threads, bool new_range, std::vector<Recovered>* logs) {
    return ReadAll(threads, new_range, nullptr, logs);
  }
};

// Logs kept in this process, for tests. Fault hooks simulate failing appends and a crash
// that tears the last WRITE of a log.
class InMemoryMemtableLog final : public MemtableLog {
 public:
  using MemtableLog::Append;
  Status Append(uint64_t memtable, std::string_view records, bool* reached) override;
  void Drop(const std::vector<uint64_t>& memtables) override;
  using MemtableLog::ReadAll;
  Status ReadAll(int threads, bool new_range, const ReadFilter& read,
                 std::vector<Recovered>* logs) override;

  // Appends fail with IOError while set; `reached` says whether they report that the
  // bytes may have reached a replica (the default) or surely did not.
  void SetFailAppends(bool fail, bool reached = true);
  // Cuts the last `bytes` bytes off memtable `memtable`'s log (a torn WRITE); returns false
  // if there is no such log.
  bool TearTail(uint64_t memtable, size_t bytes);
  // Flips one bit of the log at `offset`; false if out of range.
  bool Corrupt(uint64_t memtable, size_t offset);
  std::map<uint64_t, std::string> Snapshot() const;
  uint64_t appends() const;
  // Log bytes ReadAll has handed out (listed-only logs count nothing).
  uint64_t bytes_read() const;

 private:
  mutable Mutex mu_;
  std::map<uint64_t, std::string> logs_ GUARDED_BY(mu_);
  bool fail_ GUARDED_BY(mu_) = false;
  bool fail_reached_ GUARDED_BY(mu_) = true;
  uint64_t appends_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_read_ GUARDED_BY(mu_) = 0;
};

}  // namespace nova::ltc
