// Fault points: named places in daemon code where a test can inject an error, a delay or
// a crash, armed from a spec string (daemons take it from --fault_points).
//
//   Status StocServer::WriteBlock(...) {
//     NOVA_RETURN_NOT_OK(MAYBE_FAULT("stoc.write_block"));
//     ...
//   }
//   MAYBE_FAULT_VOID("ltc.flush.before_manifest");  // where only delay/abort make sense
//
// Spec grammar (entries separated by ','; options by ':'):
//   spec    := entry (',' entry)*          the empty spec arms nothing
//   entry   := name '=' action (':' option)*
//   name    := [A-Za-z0-9_.-]+
//   action  := 'error'                     MAYBE_FAULT returns
//                                          IOError("injected fault at <name>")
//            | 'delay' ':' <N>('ms'|'s')   sleeps that long, then returns OK
//            | 'abort'                     _exit(kFaultExitCode) at once: a crash, with no
//                                          destructors, atexit handlers or buffered output
//   option  := 'once'                      fire at most one time
//            | 'p=' <probability>          fire each eligible hit with probability in [0, 1]
//            | 'after=' <N>                let the first N hits pass, fire from hit N+1 on
// Example: "stoc.storage=delay:200ms,ltc.flush=error:after=3,logc.append=error:once,
//           stoc.crash=abort,stoc.read=error:p=0.1"
//
// Cost when nothing is armed: one relaxed atomic load and a predictable branch, so fault
// points may sit on hot paths of production binaries.
//
// Process-wide state: the armed points (and the "any armed" flag in front of them) are
// the one global mutable state Nova allows. Fault points sit deep inside library code
// (storage, log, flush) that has no path to a per-daemon object, and threading a handle
// through every layer for a test-only facility would touch every signature. The state is
// written only by Arm/Disarm: once at daemon start-up, or by a test.
//
// Probabilistic points draw from a per-point generator seeded from the point's name, so
// a single-threaded sequence of hits fires the same way on every run.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace nova {

// Exit status of a process killed by an 'abort' fault point, so a test harness can tell
// an injected crash from a real one. DO NOT CHANGE: test harnesses match on it.
constexpr int kFaultExitCode = 86;

namespace fault_internal {
// True iff at least one point is armed. Read relaxed: a thread may see a point armed
// concurrently a little late, which tests cannot tell from arming a moment later.
inline constinit std::atomic<bool> g_any_armed{false};
}  // namespace fault_internal

// The process-wide table of armed fault points. Thread-safe: all methods may be called
// concurrently, from any thread.
class FaultPoints {
 public:
  FaultPoints() = delete;

  // Parses `spec` (grammar above) and arms its points, replacing (and resetting the
  // counts of) any point of the same name. Returns OK, or InvalidArgument naming the bad
  // entry and why; then nothing at all is armed from this spec.
  static Status Arm(std::string_view spec);
  // Disarms one point (a no-op if it is not armed) and forgets its counts.
  static void Disarm(std::string_view name);
  static void DisarmAll();

  // How often the armed point `name` was reached since it was armed, whether or not it
  // fired; 0 if it is not armed.
  static uint64_t HitCount(std::string_view name);
  // How often it fired (returned an error, delayed or aborted); 0 if it is not armed.
  static uint64_t FireCount(std::string_view name);

  static bool AnyArmed() { return fault_internal::g_any_armed.load(std::memory_order_relaxed); }

  // Use the macros below, not these. Hit returns what MAYBE_FAULT yields. HitVoid
  // carries out delay and abort; an 'error' action counts as fired but has no effect
  // (logged once per point), since there is nothing to return it to.
  static Status Hit(std::string_view name);
  static void HitVoid(std::string_view name);
};

}  // namespace nova

// An expression of type nova::Status: OK unless the point `name` is armed and fires.
#define MAYBE_FAULT(name) \
  (::nova::FaultPoints::AnyArmed() ? ::nova::FaultPoints::Hit(name) : ::nova::Status::OK())

// A statement for places that cannot return a Status: only delay and abort apply.
#define MAYBE_FAULT_VOID(name)                                               \
  do {                                                                       \
    if (::nova::FaultPoints::AnyArmed()) ::nova::FaultPoints::HitVoid(name); \
  } while (0)
