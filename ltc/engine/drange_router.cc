#include "ltc/engine/drange_router.h"

#include <glog/logging.h>

#include <algorithm>

namespace nova::ltc {

std::shared_ptr<const DrangeRouting> DrangeRouter::Current() const {
  MutexLock lock(&mu_);
  return current_;
}

bool DrangeRouter::LockForWrite(const std::vector<leveldb::Slice>& keys, WriteRoute* route) {
  DCHECK(!keys.empty());
  DCHECK_EQ(route->locked_, 0u);
  route->routing_ = Current();
  DCHECK(route->routing_ != nullptr);
  const DrangeLayout& layout = *route->routing_->layout;
  route->batch_ = keys.size() > 1;
  if (!route->batch_) {
    // The common case, a single key, without a buffer.
    route->single_ = static_cast<uint32_t>(layout.Route(keys[0]));
  } else {
    route->route_.clear();
    for (const leveldb::Slice& k : keys) {
      route->route_.push_back(static_cast<uint32_t>(layout.Route(k)));
    }
    route->order_.assign(route->route_.begin(), route->route_.end());
    std::sort(route->order_.begin(), route->order_.end());
    route->order_.erase(std::unique(route->order_.begin(), route->order_.end()),
                        route->order_.end());
  }
  return route->LockAll();
}

bool DrangeRouter::WriteRoute::LockAll() {
  for (uint32_t d : dranges()) {
    DrangeState* ds = state(d);
    ds->mu.Lock();
    ++locked_;
    if (ds->retired) {
      // Every Drange of a snapshot is retired together, under all their locks: the routing
      // was replaced.
      Unlock();
      return false;
    }
  }
  return true;
}

void DrangeRouter::WriteRoute::Unlock() {
  const std::span<const uint32_t> held = dranges().first(locked_);
  for (auto it = held.rbegin(); it != held.rend(); ++it) state(*it)->mu.Unlock();
  locked_ = 0;
}

DrangeRouter::Install::Install(DrangeRouter* router) : router_(router) {
  while (true) {
    locked_ = router_->Current();
    if (locked_ == nullptr) return;  // the first install: nothing to lock
    // In index order, as writers lock (and as an overlapping install does).
    for (const auto& ds : locked_->states) ds->mu.Lock();
    // All or none of a snapshot's Dranges are retired (by an install holding all of them).
    if (!locked_->states.front()->retired) break;
    for (auto it = locked_->states.rbegin(); it != locked_->states.rend(); ++it) {
      (*it)->mu.Unlock();
    }
  }
}

DrangeRouter::Install::~Install() {
  if (locked_ == nullptr) return;
  for (auto it = locked_->states.rbegin(); it != locked_->states.rend(); ++it) {
    (*it)->mu.Unlock();
  }
}

std::vector<std::shared_ptr<MemTable>> DrangeRouter::Install::RetireOld() {
  std::vector<std::shared_ptr<MemTable>> actives;
  for (const auto& ds : old_states()) {
    ds->mu.AssertHeld();  // locked by the constructor
    ds->retired = true;
    actives.push_back(ds->active);
  }
  return actives;
}

void DrangeRouter::Install::Publish(std::shared_ptr<const DrangeLayout> layout,
                                    std::vector<std::shared_ptr<DrangeState>> states) {
  CHECK(layout != nullptr && layout->size() > 0 &&
        states.size() == static_cast<size_t>(layout->size()))
      << "a routing needs one Drange state per Drange of its layout";
  auto next = std::make_shared<DrangeRouting>();
  next->layout = std::move(layout);
  next->states = std::move(states);
  MutexLock lock(&router_->mu_);
  // Nobody else can have replaced the routing this install locked (invariant 1); the first
  // install must not overlap another (there is nothing to lock).
  DCHECK(router_->current_ == locked_) << "overlapping installs of a range's first layout";
  router_->current_ = std::move(next);
}

}  // namespace nova::ltc
