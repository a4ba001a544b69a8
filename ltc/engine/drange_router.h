// DrangeRouter: which Drange of a range a write goes to, and the state of each Drange (its
// lock and active memtable); it also installs a new layout when the Dranges are reorganized
// (paper 4.4.1, docs/ltc.md "Dranges and Tranges").
//
// The routing is one immutable snapshot: a DrangeLayout and one DrangeState per Drange of it.
// A writer takes the current snapshot under the router's lock, a leaf held only to copy a
// pointer, routes its keys by the layout and locks their Dranges (LockForWrite). An install
// (a reorganization, or the first layout when the range opens) locks every Drange of the
// snapshot it replaces, marks them retired and publishes the new snapshot before it lets
// them go (Install). So:
//   1. A writer that holds the lock of a Drange that is not retired routed by the current
//      snapshot, and no install can replace it until the writer lets go.
//   2. A writer that routed by an old snapshot finds its Dranges retired once it gets their
//      locks, and routes again (LockForWrite returns false).
//   3. A retired Drange never becomes live again; its state lives on as long as somebody
//      holds it (its memtables flush in order, ltc/engine/flush_job.h).
// Who may change a DrangeState's active memtable, and under which other lock, is the
// owner's (RangeEngine: under the Drange's lock and its own mu_).
//
//   DrangeRouter router;
//   {
//     DrangeRouter::Install install(&router);                // the first layout
//     install.Publish(layout, {std::make_shared<DrangeState>(memtable)});
//   }
//   DrangeRouter::WriteRoute route;
//   while (!router.LockForWrite({key}, &route)) {}          // Drange locked
//   DrangeState* ds = route.state(route.drange_of(0));
//
// Thread safety: thread-safe. Lock order: Drange locks in index order (of one snapshot),
// then the owner's locks, then the router's mu_ (a leaf).
#pragma once

#include <leveldb/slice.h>

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "ltc/engine/drange.h"
#include "ltc/engine/memtable.h"

namespace nova::ltc {

// One Drange's live state.
struct DrangeState {
  explicit DrangeState(std::shared_ptr<MemTable> memtable) : active(std::move(memtable)) {}
  DrangeState(const DrangeState&) = delete;
  DrangeState& operator=(const DrangeState&) = delete;

  Mutex mu;
  // The memtable the Drange's writes go to.
  std::shared_ptr<MemTable> active GUARDED_BY(mu);
  // Replaced by an install: writes route again, and it never takes writes again.
  bool retired GUARDED_BY(mu) = false;
};

// A layout and the state of each of its Dranges (states[d] is Drange d's). Immutable.
struct DrangeRouting {
  std::shared_ptr<const DrangeLayout> layout;
  std::vector<std::shared_ptr<DrangeState>> states;
};

class DrangeRouter {
 public:
  class WriteRoute;
  class Install;

  DrangeRouter() = default;
  DrangeRouter(const DrangeRouter&) = delete;
  DrangeRouter& operator=(const DrangeRouter&) = delete;

  // The current routing; null before the first install.
  std::shared_ptr<const DrangeRouting> Current() const EXCLUDES(mu_);

  // Routes each of `keys` by the current routing (counting the write in its Trange,
  // DrangeLayout::Route) and locks their Dranges in index order, so writers never deadlock.
  // True: `route` holds the locks (invariant 1 above). False: a Drange turned out retired
  // once locked (an install replaced the routing meanwhile); nothing is held, and the caller
  // routes again (after re-checking what the install may have changed, e.g. whether writes
  // stopped). REQUIRES: keys not empty; an install has run; `route` holds no lock; the
  // caller holds no Drange lock.
  [[nodiscard]] bool LockForWrite(const std::vector<leveldb::Slice>& keys, WriteRoute* route)
      EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::shared_ptr<const DrangeRouting> current_ GUARDED_BY(mu_);
};

// The Dranges a write's keys go to, locked (DrangeRouter::LockForWrite). Reused across
// LockForWrite calls, it keeps its buffers; a single key needs none.
// Thread safety: one thread at a time.
class DrangeRouter::WriteRoute {
 public:
  WriteRoute() = default;
  ~WriteRoute() { Unlock(); }
  WriteRoute(const WriteRoute&) = delete;
  WriteRoute& operator=(const WriteRoute&) = delete;

  // The routing the keys were routed by.
  const DrangeRouting& routing() const { return *routing_; }
  // The Drange of keys[i].
  uint32_t drange_of(size_t i) const { return batch_ ? route_[i] : single_; }
  // The Dranges locked, ascending, each once.
  std::span<const uint32_t> dranges() const {
    return batch_ ? std::span<const uint32_t>(order_) : std::span<const uint32_t>(&single_, 1);
  }
  // The state of Drange d, one of dranges(); its mu is held (the analysis cannot see it:
  // callers say ds->mu.AssertHeld()).
  DrangeState* state(uint32_t d) const { return routing_->states[d].get(); }
  // Lets go of the Dranges (also on destruction); the routing stays readable.
  void Unlock() NO_THREAD_SAFETY_ANALYSIS;

 private:
  friend class DrangeRouter;
  // Locks dranges() in order; false (nothing held) if one is retired. (The locks are a set
  // whose size the analysis cannot follow: LockAll and Unlock take and release them
  // unchecked, and callers of state() assert them.)
  bool LockAll() NO_THREAD_SAFETY_ANALYSIS;

  std::shared_ptr<const DrangeRouting> routing_;
  bool batch_ = false;           // more than one key: route_ and order_ are used
  uint32_t single_ = 0;          // the one key's Drange
  std::vector<uint32_t> route_;  // per key
  std::vector<uint32_t> order_;  // distinct Dranges of route_, ascending
  size_t locked_ = 0;            // dranges()[0, locked_) are held
};

// Replaces the current routing. Its constructor locks every Drange of the current routing in
// index order (waiting for the writes in them to take their memtables and sequence numbers);
// if another install replaced that routing meanwhile, it starts over with the new one, so
// installs may overlap and each replaces the routing it locked. The locks are held until
// destruction: no write enters the old Dranges while the owner moves their memtables away.
// REQUIRES: the constructing thread holds no Drange lock.
// Thread safety: one thread at a time.
class DrangeRouter::Install {
 public:
  // `router` must outlive this. (Holds a set of locks the analysis cannot follow, like
  // WriteRoute.)
  explicit Install(DrangeRouter* router) NO_THREAD_SAFETY_ANALYSIS;
  ~Install() NO_THREAD_SAFETY_ANALYSIS;  // lets go of the old Dranges
  Install(const Install&) = delete;
  Install& operator=(const Install&) = delete;

  // The Dranges of the routing being replaced, index order (none at the first install); all
  // locked by this.
  const std::vector<std::shared_ptr<DrangeState>>& old_states() const {
    static const std::vector<std::shared_ptr<DrangeState>> kNone;
    return locked_ != nullptr ? locked_->states : kNone;
  }
  // Marks every old Drange retired (invariant 2) and returns their active memtables, index
  // order.
  std::vector<std::shared_ptr<MemTable>> RetireOld();
  // Makes `layout`, with states[d] for its Drange d, the routing writers see.
  // REQUIRES: states.size() == layout->size() > 0; RetireOld() was called if old_states()
  // is not empty; called once.
  void Publish(std::shared_ptr<const DrangeLayout> layout,
               std::vector<std::shared_ptr<DrangeState>> states) EXCLUDES(router_->mu_);

 private:
  DrangeRouter* const router_;
  // The routing being replaced (null at the first install); its Dranges are locked from
  // construction to destruction.
  std::shared_ptr<const DrangeRouting> locked_;
};

}  // namespace nova::ltc
