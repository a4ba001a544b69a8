// RangeTable: the ranges this LTC hosts at its current assignment, and each one's backend.
//
// The table is published as an immutable HostedRanges (epoch, ranges ascending by start,
// each with its RangeSlot): requests take the current one (Current()) and route on it
// without holding a lock; a new assignment publishes a new one.
//
// Every range enters and leaves this LTC through one of two places, so that a range moving
// between LTCs (live migration, failover, owner epochs: issue 15) has one place to hook in:
//   1. OpenRange: the range's backend is made by the BackendFactory (recovering what the
//      range held), either now (Apply: the new table is published only once every added
//      range is open, so requests never see a half-open range) or on its own thread in the
//      background (Init: the range is published at once, its requests wait for it), retried
//      with backoff until it opens, the range is closed, or StopOpening().
//   2. CloseRange: a range that left the assignment is abandoned (a background open stops)
//      and its backend closes, flushing its memtables, once the last request or table
//      holding it lets go.
// A range whose id stays in a new assignment keeps its slot and backend, with the new bounds,
// unless its owner epoch changed (the range was elsewhere meanwhile: it is closed and opened
// again, recovering what the other owner wrote).
//
// Owner fencing (docs/coordinator.md): a backend told by a StoC or LogC that a newer owner
// has its range marks its slot fenced (requests are refused at once) and calls
// options.on_fenced; the owner of the table then calls Fence(), which drops the range
// without flushing anything. A fenced range is not opened again (Init, Apply) until an
// assignment gives it with a newer owner epoch than the one it was fenced at.
//
// Lifecycle: constructor cannot fail; Init() once; Apply() any number of times; then
// StopOpening() and Clear() (the destructor does both).
// Thread safety: thread-safe. Lock order: apply_mu_, then table_mu_ or openers_mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "ltc/protocol/client_protocol.h"
#include "ltc/server/ltc_assignment.h"
#include "ltc/server/range_backend.h"
#include "ltc/server/range_slot.h"

namespace nova::ltc {

// One range this LTC hosts: its bounds at the table's epoch and its backend's slot.
struct HostedRange {
  RangeInfo info;
  std::shared_ptr<RangeSlot> slot;
  uint64_t owner_epoch = 0;  // the assignment's owner epoch the range was opened at
};

// The ranges hosted at one epoch. Immutable once published.
struct HostedRanges {
  uint64_t epoch = 0;
  uint32_t ltc_id = 0;
  std::vector<HostedRange> ranges;  // ascending by start, disjoint
  // The hosted range holding `key`, or null.
  const HostedRange* Find(std::string_view key) const;
};

struct RangeTableOptions {
  // A request for a range still being opened waits up to this long for it (BackendOf).
  std::chrono::milliseconds recovery_wait{100};
  // At most this many requests wait for recovering ranges at once; others are answered at
  // once, so most workers stay free for the ranges that are open.
  int max_waiting_for_recovery = 2;
  // A hosted range was fenced by a newer owner (see above): called on any thread, possibly
  // under a backend's locks; must not block. Null: Fence() is never called for it, and the
  // range stays in the table refusing requests until the next assignment drops it.
  std::function<void(uint32_t range, uint64_t owner_epoch)> on_fenced;
};

class RangeTable {
 public:
  // `factory` opens ranges; it is called on the thread of Apply and on background threads.
  RangeTable(BackendFactory factory, RangeTableOptions options);
  ~RangeTable();  // StopOpening(), Clear()
  RangeTable(const RangeTable&) = delete;
  RangeTable& operator=(const RangeTable&) = delete;

  // Publishes `a`'s ranges at once and opens each in the background. `a` may carry any
  // epoch (a static assignment's is 0). InvalidArgument if `a` is invalid.
  // REQUIRES: called before any Apply.
  Status Init(const LtcAssignment& a) EXCLUDES(apply_mu_);
  // Installs a newer assignment: opens the added ranges, publishes the new table, closes
  // the removed ranges. InvalidArgument if `a` is invalid or not newer than the current
  // table; the error of a range that fails to open (the current table stays in force, and
  // the ranges this call opened are closed again).
  Status Apply(const LtcAssignment& a) EXCLUDES(apply_mu_);

  // Drops range `range` opened at `owner_epoch` from the published table (if it is still
  // there at that owner epoch) and closes it; its backend flushes nothing (it stopped when
  // fenced). Remembers the fence: later assignments do not reopen the range unless they give
  // it with a newer owner epoch. Call from a thread that holds no backend (not from
  // on_fenced).
  void Fence(uint32_t range, uint64_t owner_epoch) EXCLUDES(apply_mu_);
  // The owner epoch range `range` was last fenced at, or nullopt.
  std::optional<uint64_t> FencedAt(uint32_t range) const EXCLUDES(apply_mu_);

  // The published table (never null; empty with epoch 0 before Init).
  std::shared_ptr<const HostedRanges> Current() const EXCLUDES(table_mu_);
  uint64_t epoch() const { return Current()->epoch; }

  // `h`'s backend once it is open: at once if it is, else after waiting up to
  // recovery_wait (if fewer than max_waiting_for_recovery requests wait already), else
  // Unavailable saying the range is being recovered. Fenced if a newer owner fenced it.
  Result<std::shared_ptr<RangeBackend>> BackendOf(const HostedRange& h);

  // Tells the background opens to stop (one waiting to retry quits at once; an open in
  // progress finishes first) without waiting for them. Idempotent.
  void BeginStopOpening() EXCLUDES(openers_mu_);
  // Stops the background opens and joins them (an open in progress finishes first; a
  // backend it made then stays in its slot). Idempotent.
  void StopOpening() EXCLUDES(openers_mu_);
  // Publishes an empty table: every range closes once no request holds it any more.
  void Clear() EXCLUDES(table_mu_);

 private:
  enum class OpenMode { kNow, kInBackground };
  // The one place a range enters: a slot for `r` (assigned by `a`), open (kNow: or the
  // factory's error) or being opened on its own thread (kInBackground).
  Result<std::shared_ptr<RangeSlot>> OpenRange(const RangeInfo& r, const LtcAssignment& a,
                                               OpenMode mode) REQUIRES(apply_mu_);
  // The body of a background open: tries until the range opens, is abandoned or fenced,
  // or we stop.
  void OpenUntilDone(const RangeInfo& r, const LtcAssignment& a,
                     const std::shared_ptr<RangeSlot>& slot) EXCLUDES(openers_mu_);
  // Hands `backend` to `slot`, with a fence listener marking the slot and calling
  // options_.on_fenced.
  void Install(const std::shared_ptr<RangeSlot>& slot, uint64_t owner_epoch,
               std::shared_ptr<RangeBackend> backend);
  // Fenced by a newer owner (recorded with Fence) at or after `owner_epoch`.
  bool FencedLocked(uint32_t range, uint64_t owner_epoch) const REQUIRES(apply_mu_);
  // The one place a range leaves: `h` is no longer in the published table.
  void CloseRange(const HostedRange& h) REQUIRES(apply_mu_);
  // The factory's backend for `r`, once every earlier backend of `r` has been destroyed
  // (BackendTracker): two backends of one range never run at once, so a closing flush
  // never races the next open. Unavailable if an old one lives on for kCloseWait.
  Result<std::shared_ptr<RangeBackend>> MakeBackend(const RangeInfo& r, const LtcAssignment& a);
  void Publish(std::shared_ptr<const HostedRanges> t) EXCLUDES(table_mu_);

  // Constant after construction.
  const BackendFactory factory_;
  const RangeTableOptions options_;

  // One assignment change at a time.
  mutable Mutex apply_mu_ ACQUIRED_BEFORE(table_mu_, openers_mu_);
  std::map<uint32_t, uint64_t> fenced_ GUARDED_BY(apply_mu_);  // range -> owner epoch fenced

  mutable Mutex table_mu_;
  std::shared_ptr<const HostedRanges> table_ GUARDED_BY(table_mu_);

  Mutex openers_mu_;
  CondVar stop_cv_;                                     // signalled by StopOpening
  std::vector<std::thread> openers_ GUARDED_BY(openers_mu_);  // joined by StopOpening
  std::atomic<bool> stopping_{false};

  std::atomic<int> waiting_for_recovery_{0};  // requests in BackendOf's wait

  // Backends alive per range (counted until their destructor returns). Shared with the
  // backends' deleters, which may run after the table is gone.
  class BackendTracker;
  const std::shared_ptr<BackendTracker> tracker_;
};

}  // namespace nova::ltc
