// LtcAssignment: which ranges an LTC serves, at which configuration epoch, and where the
// cluster's StoCs are. AssignmentSource: where assignments come from.
//
// The LTC server depends only on AssignmentSource. Today the source is static
// (StaticAssignmentSource, built from --ranges / --range_bounds / --stoc / --ltc_id by the
// daemon); the ZooKeeper-backed source (coordinator/) implements the same interface by
// watching the cluster's config document and calling the listener with this LTC's part of
// every new epoch.
//
// Thread safety: LtcAssignment is a plain value. StaticAssignmentSource is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "ltc/protocol/client_protocol.h"

namespace nova::ltc {

struct LtcAssignment {
  // Configuration epoch: grows with every change of the cluster's configuration.
  uint64_t epoch = 0;
  uint32_t ltc_id = 0;
  // The ranges this LTC owns, [start, end) each, disjoint, ascending by start.
  std::vector<RangeInfo> ranges;
  // Owner epoch of each range above (coordinator's RangeAssignment::owner_epoch); a range
  // missing here is at 0 (not fenced: static assignments, older configurations).
  std::map<uint32_t, uint64_t> owner_epochs;
  // Every StoC of the cluster: id -> exchange-transport address.
  std::map<uint32_t, std::string> stocs;
  // StoCs of `stocs` being drained (nova_admin drain-stoc): read, never given new data;
  // ranges move their copies off them.
  std::set<uint32_t> draining_stocs;
  // Every LogC of the cluster: id -> exchange-transport address (docs/durability.md).
  std::map<std::string, std::string> logcs;
  // Cluster-wide settings of the configuration (e.g. "log_mode"); empty when static.
  std::map<std::string, std::string> settings;

  // InvalidArgument if ranges overlap, are out of order, have start >= end, or repeat an id.
  Status Validate() const;
  // owner_epochs[range], or 0.
  uint64_t OwnerEpochOf(uint32_t range) const {
    auto it = owner_epochs.find(range);
    return it == owner_epochs.end() ? 0 : it->second;
  }
};

// Called with each new assignment. May block (the server opens engines in it).
using AssignmentListener = std::function<void(const LtcAssignment&)>;

class AssignmentSource {
 public:
  virtual ~AssignmentSource() = default;
  // The assignment as of now (the server opens these ranges in Init). Unavailable if the
  // source cannot say yet.
  virtual Result<LtcAssignment> Current() = 0;
  // Calls `listener` with every assignment newer than the one Current() last returned,
  // until Unwatch(). `listener` must stay valid until Unwatch() returns.
  virtual void Watch(AssignmentListener listener) = 0;
  // After it returns the listener is not running and will not be called again.
  virtual void Unwatch() = 0;
};

// A fixed assignment, replaceable by Update() (tests, or a future admin hook).
class StaticAssignmentSource final : public AssignmentSource {
 public:
  explicit StaticAssignmentSource(LtcAssignment assignment) : current_(std::move(assignment)) {}

  Result<LtcAssignment> Current() override EXCLUDES(mu_);
  void Watch(AssignmentListener listener) override EXCLUDES(mu_);
  void Unwatch() override EXCLUDES(mu_);
  // Replaces the assignment and calls the listener (if any) on this thread, under mu_.
  // InvalidArgument if `a` is invalid or its epoch is not newer.
  Status Update(LtcAssignment a) EXCLUDES(mu_);

 private:
  Mutex mu_;  // held while the listener runs, so Unwatch waits for it
  LtcAssignment current_ GUARDED_BY(mu_);
  AssignmentListener listener_ GUARDED_BY(mu_);
};

// Helpers for the daemon's flags.

// `n` ranges splitting the byte-string key space evenly by first byte: range i (id i)
// starts at byte floor(256 * i / n) (range 0 at "", the last has no end).
// InvalidArgument unless 1 <= n <= 256.
Result<std::vector<RangeInfo>> EqualRanges(int n);
// Ranges from a comma-separated list of hex split points, e.g. "40,80,c0" -> 4 ranges
// ["",@) [@,0x80) [0x80,0xc0) [0xc0,-), ids 0..3. Split points must ascend strictly.
Result<std::vector<RangeInfo>> RangesFromBounds(const std::string& hex_list);
// Range ids from a comma-separated list ("3,5"; empty pieces ignored). InvalidArgument
// naming the first piece that is not a number.
Result<std::vector<uint32_t>> ParseRangeIds(const std::string& ids);
// Selects from `all` the ranges whose ids appear in the comma-separated `ids` list ("" or
// "all": every range). InvalidArgument for an unknown id.
Result<std::vector<RangeInfo>> SelectRanges(const std::vector<RangeInfo>& all,
                                            const std::string& ids);
// Parses "id@host:port,id@host:port".
Result<std::map<uint32_t, std::string>> ParseStocList(const std::string& list);
// Parses "id@host:port,..." where ids are member ids (e.g. LogC "1" or "logc-a").
Result<std::map<std::string, std::string>> ParseMemberList(const std::string& list);


}  // namespace nova::ltc
