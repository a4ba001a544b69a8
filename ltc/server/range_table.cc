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

}  // namespace

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
      table_(std::make_shared<HostedRanges>()) {}

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
    t->ranges.push_back(HostedRange{r, std::move(slot.value())});
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
  std::map<uint32_t, std::shared_ptr<RangeSlot>> kept;
  for (const HostedRange& h : old->ranges) kept[h.info.id] = h.slot;
  auto t = std::make_shared<HostedRanges>();
  t->epoch = a.epoch;
  t->ltc_id = a.ltc_id;
  for (const RangeInfo& r : a.ranges) {
    auto it = kept.find(r.id);
    if (it != kept.end()) {
      t->ranges.push_back(HostedRange{r, it->second});
      continue;
    }
    auto slot = OpenRange(r, a, OpenMode::kNow);
    if (!slot.ok()) return slot.status().Prepend("opening range " + std::to_string(r.id));
    LOG(INFO) << "epoch " << a.epoch << ": opened range " << r.id;
    t->ranges.push_back(HostedRange{r, std::move(slot.value())});
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
    auto b = factory_(r, a);
    if (!b.ok()) return b.status();
    return RangeSlot::Ready(r.id, std::shared_ptr<RangeBackend>(std::move(b.value())));
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
    auto b = factory_(r, a);
    if (b.ok() && slot->abandoned()) {
      // Closed while it opened: close it again (as a closed range does).
      LOG(INFO) << "range " << r.id << " opened after it left the assignment; closing it";
      return;
    }
    if (b.ok()) {
      slot->Set(std::shared_ptr<RangeBackend>(std::move(b.value())));
      LOG(INFO)
          << "range " << r.id << " open after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count()
          << " ms";
      return;
    }
    slot->SetError(b.status());
    const std::chrono::milliseconds delay = backoff.Next();
    LOG(ERROR) << "opening range " << r.id << " failed (retried in " << delay.count()
               << " ms): " << b.status().ToString();
    MutexLock l(&openers_mu_);
    stop_cv_.WaitUntil(&l, MonoNow() + delay, [&] { return stopping_.load(); });
  }
}

void RangeTable::CloseRange(const HostedRange& h) {
  // Stops a background open still retrying; the backend closes when the old table and the
  // last request using it let go.
  h.slot->Abandon();
}

Result<std::shared_ptr<RangeBackend>> RangeTable::BackendOf(const HostedRange& h) {
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
