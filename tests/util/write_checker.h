// A write workload that remembers what it was told, and a checker of what a cluster holds
// afterwards (in the spirit of Kudu's TestWorkload and LinkedListVerifier): writer threads
// put, overwrite and delete keys through a NovaClient and record, per key, every version
// they attempted and the newest one the cluster acknowledged. After crashes, Verify() reads
// every key back and checks it against that history.
//
// What Verify() accepts for a key (its "floor" is the newest version acknowledged, or seen
// by an earlier Verify, so what a check saw must survive later crashes too):
//   1. a value: it must be exactly the value of an attempted version at or above the floor
//      (a write that failed has an unknown outcome: it may or may not have been applied);
//   2. NotFound: nothing was acknowledged yet, or a deletion was attempted at or above the
//      floor.
// Anything else is a lost write (NotFound after an acknowledged put), a stale value (an
// older version than the floor), a deleted key back (an older value after an acknowledged
// deletion) or a value never written.
//
// Typical use:
//
//   test::Workload w(seed, /*threads=*/4, /*keys_per_thread=*/400);
//   w.Start(client, /*round=*/0);
//   ... kill and restart daemons ...
//   w.Stop();
//   auto checked = w.Verify(client, "after kill 1");
//   ASSERT_TRUE(checked.ok()) << checked.status().ToString();
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/nova_client.h"
#include "common/status.h"

namespace nova::test {

// What one key went through: every version attempted (its value, or nullopt for a
// deletion), and the newest version acknowledged (or observed by a Verify).
struct KeyHistory {
  std::map<uint64_t, std::optional<std::string>> versions;
  int64_t floor = -1;  // the key may not read older than this version; -1: none yet
};

// The value written as `version` of `key`: "<version>|<key>|" then 100 to 1,099 bytes of
// filler, so a value read back says which version it claims to be.
std::string ValueFor(const std::string& key, uint64_t version);

// Writer threads, each with its own keys, half of them in each of the two ranges of a
// cluster started with --ranges=2 (first byte below 0x80 and from 0x80). One write in ten
// is a deletion, one in ten a batch of 2 to 4 keys of one range, the rest single puts.
//
// Thread safety: Start(), Stop() and Verify() are called by one thread (the test's); the
// counters may be read from any thread.
class Workload {
 public:
  // `seed` fixes the sequence of operations (with the round passed to Start()).
  Workload(uint64_t seed, int threads, int keys_per_thread);
  ~Workload();  // stops the writers if they run
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  // Key `i` of writer `thread`: even i in range 0, odd i in range 1.
  static std::string Key(int thread, int i);

  // Starts the writers, which run until Stop(). `round` varies the random sequence, so
  // each start after a crash writes differently. `client` must outlive the writers (until
  // Stop() returns). REQUIRES: the writers are stopped.
  void Start(client::NovaClient* client, int round);
  // Stops the writers and joins them; a write in flight finishes first (or fails after
  // the client's timeout). No-op when they are not running.
  void Stop();

  // Reads every key written so far through `client` and checks it against its history
  // (the rules in the file comment), then raises each key's floor to what it read.
  // Returns the number of keys read; Corruption listing the first mismatches (and how
  // many of each kind there were) when some key holds what no history allows; or the
  // error of a read that failed other than with NotFound, prefixed with the key. `when`
  // starts every message (e.g. "after kill 3"). REQUIRES: the writers are stopped.
  Result<int> Verify(client::NovaClient* client, const std::string& when);

  // Writes acknowledged / failed so far (a batch counts once).
  uint64_t acknowledged() const { return acked_.load(); }
  uint64_t failed() const { return failed_.load(); }
  // Longest time one write took (the client's retries included), in ms.
  int64_t max_latency_ms() const { return max_latency_ms_.load(); }
  void ResetLatency() { max_latency_ms_ = 0; }

 private:
  // One writer's loop: draws operations, records them in history_[t] before sending,
  // and raises the floors of the keys of an acknowledged write.
  void Run(client::NovaClient* client, int t, int round);

  // Constant after construction.
  const uint64_t seed_;
  const int threads_;
  const int keys_;

  // history_[t] belongs to writer t while the writers run, to Verify() otherwise.
  std::vector<std::map<std::string, KeyHistory>> history_;
  std::vector<std::thread> workers_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<int64_t> max_latency_ms_{0};
};

}  // namespace nova::test
