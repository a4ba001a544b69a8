// RangeSlot: one hosted range's backend, or the state of its opening. The server publishes
// a range as soon as it is assigned and opens it in the background (reopening rebuilds its
// memtables from the logs, which may take a while), so requests for other ranges are served
// meanwhile; requests for this one wait on its slot.
//
// Lifecycle: made empty (opening); Set() once the backend is open; Abandon() when
// the range leaves the assignment (a background open then stops trying). The backend closes
// when the last holder of it (the slot, a request, a snapshot's weak reference promoted)
// lets go.
//
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "ltc/server/range_backend.h"

namespace nova::ltc {

class RangeSlot {
 public:
  // An empty slot: the range is being opened.
  explicit RangeSlot(uint32_t range_id) : range_id_(range_id), since_(MonoNow()) {}
  RangeSlot(const RangeSlot&) = delete;
  RangeSlot& operator=(const RangeSlot&) = delete;

  // The range is open: wakes every Wait.
  void Set(std::shared_ptr<RangeBackend> backend) EXCLUDES(mu_);
  // The last attempt to open failed (another follows); Wait's error names it.
  void SetError(const Status& error) EXCLUDES(mu_);
  // The backend, waiting up to `timeout` for it; else Unavailable saying for how long the
  // range has been recovering and why the last attempt failed.
  Result<std::shared_ptr<RangeBackend>> Wait(std::chrono::milliseconds timeout) const
      EXCLUDES(mu_);
  // Abandons the slot and takes its backend out of it (null if none): requests see the
  // range as being recovered from now on.
  std::shared_ptr<RangeBackend> Take() EXCLUDES(mu_);
  // The backend if open, else null.
  std::shared_ptr<RangeBackend> TryGet() const EXCLUDES(mu_);
  // The backend's stats, or "range N is being recovered (for T ms)..." (for nova_cli stats).
  std::string StateText() const EXCLUDES(mu_);
  // The range left this LTC's assignment: a background open stops trying.
  void Abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_.load() || fenced_->load(); }
  // A newer owner fenced the range: requests are refused (RangeTable::BackendOf) from now
  // on, before the table drops the range. A background open stops trying too.
  void MarkFenced() { fenced_->store(true); }
  bool fenced() const { return fenced_->load(); }
  // Live migration (range_migrator.h): the range was handed off to another LTC, so requests
  // are refused (as if fenced: clients get WrongRange and retry at the new owner), until the
  // migration is undone (false again).
  void SetHandedOff(bool handed_off) { handed_off_.store(handed_off); }
  bool handed_off() const { return handed_off_.load(); }
  // The flag MarkFenced sets, for a fence listener: it must not hold the slot itself (the
  // slot may be the last holder of the backend whose engine thread runs the listener).
  std::shared_ptr<std::atomic<bool>> fenced_flag() const { return fenced_; }
  uint32_t range_id() const { return range_id_; }

 private:
  // Constant after construction.
  const uint32_t range_id_;
  const MonoTime since_;  // when opening began

  mutable Mutex mu_;
  mutable CondVar opened_cv_;  // signalled by Set
  std::shared_ptr<RangeBackend> backend_ GUARDED_BY(mu_);
  Status last_error_ GUARDED_BY(mu_);

  std::atomic<bool> abandoned_{false};
  std::atomic<bool> handed_off_{false};
  const std::shared_ptr<std::atomic<bool>> fenced_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace nova::ltc
