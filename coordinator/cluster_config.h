// The cluster configuration document: what the coordinator publishes in ZooKeeper under
// /nova/<cluster>/config and every component and client routes by (DESIGN.md section 8).
//
// It holds an epoch (bumped by every change), the ranges that tile the byte-string key space
// with the LTC owning each, the LTC/LogC/StoC member sets, and free-form cluster settings.
// Its serialized form is human-readable JSON (format in docs/coordinator.md); range bounds
// are hex-encoded there so that keys with any bytes survive.
//
// Thread safety: a ClusterConfig is a value; distinct objects may be used concurrently,
// and const methods may be called concurrently on one object.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/key_range.h"
#include "common/status.h"

namespace nova::coordinator {

// Kinds of registered components. The names are ZooKeeper node names.
// DO NOT CHANGE the names: persisted in ZooKeeper.
enum class MemberKind { kLtc, kLogc, kStoc, kCoordinator };
inline constexpr MemberKind kAllMemberKinds[] = {MemberKind::kLtc, MemberKind::kLogc,
                                                 MemberKind::kStoc, MemberKind::kCoordinator};
// "ltc", "logc", "stoc" or "coordinator".
const char* MemberKindName(MemberKind kind);
// Parses a MemberKindName(); returns false for anything else.
bool ParseMemberKind(std::string_view name, MemberKind* kind);

// Returns OK if `id` can name a member (and thus a ZooKeeper node): 1 to 64 characters of
// [A-Za-z0-9._-], not "." or "..". InvalidArgument otherwise.
Status ValidateMemberId(std::string_view id);

// One range of the key space and its owner: keys k with keys.start <= k < keys.end
// (bytewise); only the last range is unbounded.
struct RangeAssignment {
  uint32_t id = 0;
  KeyRange keys;    // the first range starts at ""
  std::string ltc;  // id of the owning LTC; empty = not assigned yet
  // Bumped by SetOwner whenever `ltc` changes (docs/coordinator.md, "Owner fencing"). The
  // owner stamps it into the range's files; StoCs and LogCs refuse writes from an older
  // one. 0: a range from a document written before owner epochs (not fenced).
  uint64_t owner_epoch = 0;

  // A new incarnation of the same owner (the LTC restarted): its files must be told apart
  // from the previous process's, which may still run (paused) and must be fenced off.
  void BumpOwnerEpoch() { owner_epoch++; }
  // Gives the range to `owner` (may be ""), bumping owner_epoch if the owner changes.
  void SetOwner(const std::string& owner) {
    if (owner == ltc) return;
    ltc = owner;
    owner_epoch++;
  }

  bool Contains(std::string_view key) const { return keys.Contains(key); }
  bool operator==(const RangeAssignment& o) const = default;
};

// A live migration of one range (docs/coordinator.md, "Live migration"): nova_admin queues
// it, the leading coordinator starts at most --coordinator_max_concurrent_migrations at once
// (and drops those that went stale or ran too long), and the destination LTC copies the
// range from the source and then, in one compare-and-set, makes itself the owner (owner
// epoch bumped) and removes the entry.
struct RangeMigration {
  uint32_t range = 0;
  std::string from;          // the owner when queued
  std::string to;            // the destination LTC
  uint64_t from_epoch = 0;   // the range's owner epoch when queued: stale once it changes
  bool running = false;      // started by the leader (else queued)
  uint64_t started_ms = 0;   // wall-clock time (ms since the Unix epoch) it was started
  bool operator==(const RangeMigration& o) const = default;
};

struct ClusterConfig {
  // Version of the JSON layout. DO NOT CHANGE the meaning of a version: persisted.
  static constexpr uint32_t kFormatVersion = 1;

  uint64_t epoch = 0;                   // strictly increases with every published change
  std::string cluster;                  // cluster name, as in --cluster
  std::vector<RangeAssignment> ranges;  // in key order, tiling ["", +inf)
  // Members that are part of the configuration: id -> address (host:port) they serve on.
  std::map<std::string, std::string> ltcs;
  std::map<std::string, std::string> logcs;
  std::map<std::string, std::string> stocs;
  // Cluster-wide settings (e.g. "log_mode" -> "memory"); later issues add keys here.
  std::map<std::string, std::string> settings;
  // LTCs being drained or removed (nova_admin drain-ltc / remove-ltc): no range is given to
  // them (assignment, failover, rebalance). An id leaves the set when it leaves `ltcs`, or
  // by nova_admin undrain-ltc. JSON "draining" (an array; absent in older documents).
  std::set<std::string> draining;
  // StoCs being drained or removed (nova_admin drain-stoc / remove-stoc): LTCs place no new
  // table copy on them and move the copies they hold elsewhere (docs/coordinator.md,
  // "StoCs coming and going"). Unlike `draining`, an id may stay here after it left `stocs`:
  // remove-stoc keeps it, so that the same process, should it still run or restart, joins
  // again (rule 1) but is never used for new data. An id leaves the set only by nova_admin
  // undrain-stoc. JSON "draining_stocs" (an array; absent in older documents).
  std::set<std::string> draining_stocs;
  // The process incarnation of each LTC (a random id each nova_ltc publishes when it
  // registers): a new one bumps the owner epochs of that LTC's ranges, and an LTC serves no
  // range until the configuration names its incarnation (docs/coordinator.md). JSON
  // "ltc_incarnations" (absent in older documents: nothing is gated).
  std::map<std::string, std::string> ltc_incarnations;
  // Live migrations queued or running, in the order queued; at most one per range. JSON
  // "migrations" (absent in older documents).
  std::vector<RangeMigration> migrations;

  // The migration of `range`, or null.
  const RangeMigration* MigrationOf(uint32_t range) const;
  RangeMigration* MigrationOf(uint32_t range);
  // The range with id `id`, or null.
  RangeAssignment* Range(uint32_t id);
  const RangeAssignment* Range(uint32_t id) const;

  // Returns OK if the document is consistent: a cluster name; at least one range; ids
  // unique; ranges[0].keys.start == ""; each range's end equals the next one's start and is
  // greater than its start; only the last range is unbounded; every range owner is a key
  // of `ltcs`; member ids valid (also those in `draining` and `draining_stocs`). Otherwise
  // InvalidArgument naming the first problem.
  Status Validate() const;

  // Pretty-printed JSON (2-space indent, trailing newline). REQUIRES: nothing; an invalid
  // document serializes too (so it can be shown), but FromJson() will reject it.
  std::string ToJson() const;

  // Parses and validates a document. Returns Corruption for malformed JSON, wrong types,
  // bad hex or an unknown format_version, and Validate()'s InvalidArgument for an
  // inconsistent one. Never throws or aborts, whatever the input.
  static Result<ClusterConfig> FromJson(std::string_view json);

  // The range containing `key`, or nullptr if none does (only for an invalid document).
  // The pointer lives as long as this object is not modified. O(log ranges).
  const RangeAssignment* RangeForKey(std::string_view key) const;

  // Ids of the ranges owned by `ltc`, in key order.
  std::vector<uint32_t> RangesOf(std::string_view ltc) const;

  // The member map of `kind`; nullptr for kCoordinator (coordinators are not in the
  // document).
  std::map<std::string, std::string>* Members(MemberKind kind);
  const std::map<std::string, std::string>* Members(MemberKind kind) const;

  bool operator==(const ClusterConfig& o) const = default;
};


// `n - 1` split points spreading n ranges evenly over the first key byte: point i is the
// single byte floor(256 * i / n). Returns InvalidArgument unless 1 <= n <= 256.
Result<std::vector<std::string>> EvenSplitPoints(int n);

// Parses a split-points file: one hex-encoded key per line; blank lines and lines starting
// with '#' are ignored, surrounding whitespace is trimmed. Returns InvalidArgument naming
// the line of a bad entry, of an empty key ("" is the implicit first bound), or of a key not
// greater than the previous one.
Result<std::vector<std::string>> ParseSplitPoints(std::string_view text);

// The configuration nova_admin create-cluster publishes: epoch 1, ranges
// ["", p0), [p0, p1), ..., [p_last, +inf) with ids 0.. and no owner, no members.
// Returns InvalidArgument for an empty cluster name or unsorted/duplicate split points.
Result<ClusterConfig> MakeInitialConfig(const std::string& cluster,
                                        const std::vector<std::string>& split_points,
                                        const std::map<std::string, std::string>& settings);

}  // namespace nova::coordinator
