#include "ltc/server/range_table.h"

#include <algorithm>
#include <map>

#include <glog/logging.h>

#include "common/clock.h"
#include "common/retry_policy.h"

namespace nova::ltc {
namespace {

// A background open that fails is retried after 100 ms, doubling up to 5 s: a StoC or
// LogC that is briefly down is retried soon, one that stays down is not hammered.
constexpr RetryPolicy kOpenRetry{std::chrono::milliseconds(100), std::chrono::seconds(5)};
// How long an open waits for the range's previous backend to finish closing (requests
// holding it end within their deadline; its closing flush is bounded by the StoC timeout).
constexpr std::chrono::seconds kCloseWait{60};

}  // namespace

class RangeTable::BackendTracker {
 public:
  // Owns `b` until its last holder lets go; counted as alive until its destructor returns.
  std::shared_ptr<RangeBackend> Track(uint32_t range, std::unique_ptr<RangeBackend> b,
                                      const std::shared_ptr<BackendTracker>& self)
      EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      ++alive_[range];
    }
    return std::shared_ptr<RangeBackend>(b.release(), [self, range](RangeBackend* p) {
      delete p;
      MutexLock l(&self->mu_);
      if (--self->alive_[range] == 0) self->alive_.erase(range);
      self->closed_cv_.NotifyAll();
    });
  }
  // OK once no backend of `range` is alive; Unavailable after `wait`.
  Status WaitClosed(uint32_t range, std::chrono::milliseconds wait) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    const bool closed = closed_cv_.WaitUntil(&l, MonoNow() + wait, [&]() REQUIRES(mu_) {
      return alive_.count(range) == 0;
    });
    if (closed) return Status::OK();
    return Status::Unavailable("range " + std::to_string(range) +
                               ": its previous backend is still closing (requests hold it, or "
                               "its flush is slow)");
  }

 private:
  Mutex mu_;
  CondVar closed_cv_;
  std::map<uint32_t, int> alive_ GUARDED_BY(mu_);
};

const HostedRange* HostedRanges::Find(std::string_view key) const {
  // The last range starting at or before key; it holds key if key is below its end.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), key,
                             [](std::string_view k, const HostedRange& h) {
                               return k < h.info.keys.start;
                             });
  if (it == ranges.begin()) return nullptr;
  --it;
  return it->info.Contains(key) ? &*it : nullptr;
}

RangeTable::RangeTable(BackendFactory factory, RangeTableOptions options)
    : factory_(std::move(factory)), options_(options),
      table_(std::make_shared<HostedRanges>()), tracker_(std::make_shared<BackendTracker>()) {}

Result<std::shared_ptr<RangeBackend>> RangeTable::MakeBackend(const RangeInfo& r,
                                                             const LtcAssignment& a) {
  NOVA_RETURN_NOT_OK(tracker_->WaitClosed(r.id, kCloseWait));
  auto b = factory_(r, a);
  if (!b.ok()) return b.status();
  return tracker_->Track(r.id, std::move(b.value()), tracker_);
}

RangeTable::~RangeTable() {
  StopOpening();
  Clear();
}

Status RangeTable::Init(const LtcAssignment& a) {
  NOVA_RETURN_NOT_OK(a.Validate());
  MutexLock l(&apply_mu_);
  auto t = std::make_shared<HostedRanges>();
  t->epoch = a.epoch;
  t->ltc_id = a.ltc_id;
  for (const RangeInfo& r : a.ranges) {
    auto slot = OpenRange(r, a, OpenMode::kInBackground);
    if (!slot.ok()) return slot.status();
    t->ranges.push_back(HostedRange{r, std::move(slot.value()), a.OwnerEpochOf(r.id)});
  }
  Publish(std::move(t));
  return Status::OK();
}

Status RangeTable::Apply(const LtcAssignment& a) {
  NOVA_RETURN_NOT_OK(a.Validate());
  MutexLock l(&apply_mu_);
  std::shared_ptr<const HostedRanges> old = Current();
  if (a.epoch <= old->epoch) {
    return Status::InvalidArgument("assignment epoch " + std::to_string(a.epoch) +
                                   " is not newer than " + std::to_string(old->epoch));
  }
  std::map<uint32_t, const HostedRange*> kept;
  for (const HostedRange& h : old->ranges) kept[h.info.id] = &h;
  auto t = std::make_shared<HostedRanges>();
  t->epoch = a.epoch;
  t->ltc_id = a.ltc_id;
  // The ranges to open, opened in parallel below (a failover hands over many at once, and
  // each one's recovery reads its logs).
  std::map<uint32_t, Result<std::shared_ptr<RangeSlot>>> opened;
  for (const RangeInfo& r : a.ranges) {
    const uint64_t owner_epoch = a.OwnerEpochOf(r.id);
    if (FencedLocked(r.id, owner_epoch)) continue;
    auto it = kept.find(r.id);
    if (it != kept.end() && it->second->owner_epoch == owner_epoch &&
        !it->second->slot->fenced()) {
      continue;
    }
    if (it != kept.end()) {
      // The range had another owner since this LTC opened it: what that owner wrote is in
      // the MANIFEST and logs, not in this backend. The old backend is taken out of its slot
      // now; it closes (flushing what it holds unless it was fenced) once the requests
      // holding it end, and the reopen waits for that (MakeBackend).
      LOG(INFO) << "epoch " << a.epoch << ": range " << r.id << " comes back at owner epoch "
                << owner_epoch << " (was " << it->second->owner_epoch << "); reopening it";
      it->second->slot->Take();
    }
    opened.emplace(r.id, Status::Unavailable("not opened"));
  }
  {
    std::vector<std::thread> threads;
    for (auto& [id, result] : opened) {
      const RangeInfo* r = nullptr;
      for (const RangeInfo& x : a.ranges) r = x.id == id ? &x : r;
      threads.emplace_back([this, r, &a, result = &result] {
        auto b = MakeBackend(*r, a);
        if (!b.ok()) {
          *result = b.status();
          return;
        }
        auto slot = std::make_shared<RangeSlot>(r->id);
        Install(slot, a.OwnerEpochOf(r->id), std::move(b.value()));
        *result = std::move(slot);
      });
    }
    for (auto& th : threads) th.join();
  }
  for (const RangeInfo& r : a.ranges) {
    const uint64_t owner_epoch = a.OwnerEpochOf(r.id);
    if (FencedLocked(r.id, owner_epoch)) {
      // A newer owner has it, whatever this (older) assignment says: answer WrongRange.
      LOG(WARNING) << "epoch " << a.epoch << ": range " << r.id << " at owner epoch "
                   << owner_epoch << " was fenced by a newer owner; not serving it";
      continue;
    }
    auto open = opened.find(r.id);
    if (open == opened.end()) {
      t->ranges.push_back(HostedRange{r, kept.at(r.id)->slot, owner_epoch});
      continue;
    }
    auto& slot = open->second;
    if (!slot.ok() && slot.status().IsFenced()) {
      // Someone newer fenced the range before this assignment reached us.
      fenced_[r.id] = std::max(fenced_[r.id], owner_epoch);
      LOG(WARNING) << "epoch " << a.epoch << ": range " << r.id
                   << " not opened: " << slot.status().ToString();
      continue;
    }
    if (!slot.ok()) return slot.status().Prepend("opening range " + std::to_string(r.id));
    LOG(INFO) << "epoch " << a.epoch << ": opened range " << r.id << " at owner epoch "
              << owner_epoch;
    t->ranges.push_back(HostedRange{r, std::move(slot.value()), owner_epoch});
  }
  Publish(t);
  for (const HostedRange& h : old->ranges) {
    const bool kept_now = std::any_of(t->ranges.begin(), t->ranges.end(),
                                      [&](const HostedRange& n) { return n.slot == h.slot; });
    if (!kept_now) CloseRange(h);
  }
  LOG(INFO) << "installed assignment epoch " << a.epoch << " with " << a.ranges.size()
            << " ranges";
  return Status::OK();
}

Result<std::shared_ptr<RangeSlot>> RangeTable::OpenRange(const RangeInfo& r,
                                                         const LtcAssignment& a, OpenMode mode) {
  if (mode == OpenMode::kNow) {
    auto b = MakeBackend(r, a);
    if (!b.ok()) return b.status();
    auto slot = std::make_shared<RangeSlot>(r.id);
    Install(slot, a.OwnerEpochOf(r.id), std::move(b.value()));
    return slot;
  }
  auto slot = std::make_shared<RangeSlot>(r.id);
  MutexLock l(&openers_mu_);
  openers_.emplace_back([this, r, a, slot] { OpenUntilDone(r, a, slot); });
  return slot;
}

void RangeTable::OpenUntilDone(const RangeInfo& r, const LtcAssignment& a,
                               const std::shared_ptr<RangeSlot>& slot) {
  Backoff backoff(kOpenRetry);
  const MonoTime start = MonoNow();
  while (!stopping_ && !slot->abandoned()) {
    auto b = MakeBackend(r, a);
    if (b.ok() && slot->abandoned()) {
      // Closed while it opened: close it again (as a closed range does).
      LOG(INFO) << "range " << r.id << " opened after it left the assignment; closing it";
      return;
    }
    if (b.ok()) {
      Install(slot, a.OwnerEpochOf(r.id), std::move(b.value()));
      LOG(INFO)
          << "range " << r.id << " open after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count()
          << " ms";
      return;
    }
    slot->SetError(b.status());
    if (b.status().IsFenced()) {
      // A newer owner has the range: stop trying, refuse its requests, and let the table's
      // owner drop it.
      LOG(WARNING) << "range " << r.id << " not opened: " << b.status().ToString();
      slot->MarkFenced();
      if (options_.on_fenced) options_.on_fenced(r.id, a.OwnerEpochOf(r.id));
      return;
    }
    const std::chrono::milliseconds delay = backoff.Next();
    LOG(ERROR) << "opening range " << r.id << " failed (retried in " << delay.count()
               << " ms): " << b.status().ToString();
    MutexLock l(&openers_mu_);
    stop_cv_.WaitUntil(&l, MonoNow() + delay, [&] { return stopping_.load(); });
  }
}

void RangeTable::Install(const std::shared_ptr<RangeSlot>& slot, uint64_t owner_epoch,
                         std::shared_ptr<RangeBackend> backend) {
  // The listener holds the slot's flag, never the slot: it runs on the backend's engine
  // thread, which must not end up destroying the backend.
  std::shared_ptr<std::atomic<bool>> fenced = slot->fenced_flag();
  auto on_fenced = options_.on_fenced;
  const uint32_t range = slot->range_id();
  backend->SetFenceListener([fenced, on_fenced, range, owner_epoch] {
    fenced->store(true);
    if (on_fenced) on_fenced(range, owner_epoch);
  });
  slot->Set(std::move(backend));
}

bool RangeTable::FencedLocked(uint32_t range, uint64_t owner_epoch) const {
  auto it = fenced_.find(range);
  return it != fenced_.end() && owner_epoch <= it->second;
}

void RangeTable::Fence(uint32_t range, uint64_t owner_epoch) {
  MutexLock l(&apply_mu_);
  fenced_[range] = std::max(fenced_[range], owner_epoch);
  std::shared_ptr<const HostedRanges> old = Current();
  auto t = std::make_shared<HostedRanges>();
  t->epoch = old->epoch;
  t->ltc_id = old->ltc_id;
  const HostedRange* dropped = nullptr;
  for (const HostedRange& h : old->ranges) {
    if (h.info.id == range && h.owner_epoch <= owner_epoch) {
      dropped = &h;
    } else {
      t->ranges.push_back(h);
    }
  }
  if (dropped == nullptr) return;
  dropped->slot->MarkFenced();
  Publish(t);
  CloseRange(*dropped);
  LOG(WARNING) << "range " << range << " (owner epoch " << owner_epoch
               << ") was fenced by a newer owner: closed, requests answered WrongRange";
}

std::optional<uint64_t> RangeTable::FencedAt(uint32_t range) const {
  MutexLock l(&apply_mu_);
  auto it = fenced_.find(range);
  if (it == fenced_.end()) return std::nullopt;
  return it->second;
}

void RangeTable::CloseRange(const HostedRange& h) {
  // Stops a background open still retrying; the backend closes when the old table and the
  // last request using it let go.
  h.slot->Abandon();
}

Result<std::shared_ptr<RangeBackend>> RangeTable::BackendOf(const HostedRange& h) {
  if (h.slot->fenced()) {
    return Status::Fenced("range " + std::to_string(h.info.id) +
                          " was taken over by a newer owner");
  }
  if (h.slot->handed_off()) {
    return Status::Fenced("range " + std::to_string(h.info.id) +
                          " was handed off to another LTC (live migration)");
  }
  if (auto b = h.slot->TryGet()) return b;
  // Wait for the range only while most workers stay free for other ranges.
  const int waiting = waiting_for_recovery_.fetch_add(1) + 1;
  const bool may_wait = waiting <= options_.max_waiting_for_recovery;
  auto b = h.slot->Wait(may_wait ? options_.recovery_wait : std::chrono::milliseconds(0));
  waiting_for_recovery_.fetch_sub(1);
  return b;
}

std::shared_ptr<const HostedRanges> RangeTable::Current() const {
  MutexLock l(&table_mu_);
  return table_;
}

void RangeTable::Publish(std::shared_ptr<const HostedRanges> t) {
  MutexLock l(&table_mu_);
  table_ = std::move(t);
}

void RangeTable::BeginStopOpening() {
  MutexLock l(&openers_mu_);
  stopping_ = true;
  stop_cv_.NotifyAll();
}

void RangeTable::StopOpening() {
  std::vector<std::thread> openers;
  {
    MutexLock l(&openers_mu_);
    stopping_ = true;
    stop_cv_.NotifyAll();
    openers.swap(openers_);
  }
  for (auto& t : openers) t.join();  // an open in progress finishes first
}

void RangeTable::Clear() {
  // Swapped out under the lock, released outside it: closing a range may take a while.
  std::shared_ptr<const HostedRanges> old;
  {
    MutexLock l(&table_mu_);
    old = std::move(table_);
    table_ = std::make_shared<HostedRanges>();
  }
}

}  // namespace nova::ltc
