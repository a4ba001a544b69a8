// DrangeReorganizer: when and how a range's Drange layout changes (paper 4.4.1, docs/ltc.md
// "Dranges"). Every `every_writes` writes it measures the load of the current layout's
// window: a layout with fewer Dranges than theta, or whose imbalance exceeds
// imbalance_threshold / theta, gets a major reorganization (theta new Dranges from a sample
// of the keys in memory, every version counting, so hot keys weigh more); otherwise a minor
// one may move boundary Tranges to a lighter neighbour. Installing the new layout (new
// memtables, the MANIFEST record) is the engine's.
//
// Thread safety: thread-safe. One check runs at a time: TryBegin() refuses while another
// runs.
#pragma once

#include <leveldb/comparator.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "ltc/engine/drange.h"
#include "ltc/engine/memtable.h"

namespace nova::ltc {

struct DrangeReorganizerOptions {
  const leveldb::Comparator* comparator = nullptr;  // of user keys; must outlive this
  int dranges = 1;                                  // theta; 1: never reorganize
  int tranges_per_drange = 8;                       // gamma
  double imbalance_threshold = 0.5;
  uint64_t every_writes = 100000;  // writes between load checks
  // Keys sampled at most for a major reorganization (every n-th entry in memory).
  uint64_t max_samples = 100000;
};

class DrangeReorganizer {
 public:
  explicit DrangeReorganizer(const DrangeReorganizerOptions& options) : options_(options) {}

  // Counts `n` writes; true when a load check is due.
  bool CountWrites(uint64_t n) {
    return writes_since_.fetch_add(n, std::memory_order_relaxed) + n >= options_.every_writes;
  }

  // Starts a check: false if one runs already or the range has a single Drange. The
  // write count starts over. REQUIRES: End() after a true.
  bool TryBegin();
  void End() { running_.store(false); }

  // The layout to install instead of `current`, or null to keep it (its window's counters
  // then start over). *major: a major reorganization (new boundaries from `mems`' keys),
  // else a minor one. REQUIRES: between TryBegin() and End().
  std::unique_ptr<DrangeLayout> Plan(const DrangeLayout& current,
                                     const std::vector<std::shared_ptr<MemTable>>& mems,
                                     bool* major);

  // The imbalance the last check measured (NaN: none yet, or no writes in any window).
  double last_window_imbalance() const {
    return last_window_imbalance_.load(std::memory_order_relaxed);
  }

 private:
  const DrangeReorganizerOptions options_;
  std::atomic<uint64_t> writes_since_{0};
  std::atomic<bool> running_{false};
  std::atomic<double> last_window_imbalance_{std::numeric_limits<double>::quiet_NaN()};
};

}  // namespace nova::ltc
