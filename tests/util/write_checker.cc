#include "tests/util/write_checker.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <utility>

#include "common/clock.h"

namespace nova::test {

namespace {

// Mismatches quoted in a failed Verify(); the rest are only counted.
constexpr int kMaxQuotedMismatches = 10;
// One operation in kOpKinds is a deletion (kDeleteOp), one a batch (kBatchOp).
constexpr uint64_t kOpKinds = 10;
constexpr uint64_t kDeleteOp = 8;
constexpr uint64_t kBatchOp = 9;

// The version a value read back claims ("<version>|..."), or -1 if it names none.
int64_t VersionOf(const std::string& value) {
  const size_t bar = value.find('|');
  if (bar == std::string::npos || bar == 0) return -1;
  return std::atoll(value.substr(0, bar).c_str());
}

}  // namespace

std::string ValueFor(const std::string& key, uint64_t version) {
  std::string v = std::to_string(version) + "|" + key + "|";
  v.append(100 + (version * 7919 + key.size() * 31) % 1000, static_cast<char>('a' + version % 26));
  return v;
}

Workload::Workload(uint64_t seed, int threads, int keys_per_thread)
    : seed_(seed), threads_(threads), keys_(keys_per_thread), history_(threads) {}

Workload::~Workload() { Stop(); }

std::string Workload::Key(int thread, int i) {
  // A first byte below 0x80 goes to range 0, from 0x80 to range 1.
  return std::string(1, i % 2 == 0 ? 'k' : static_cast<char>(0xe0)) + "t" + std::to_string(thread) +
         "-" + std::to_string(i);
}

void Workload::Start(client::NovaClient* client, int round) {
  stop_ = false;
  for (int t = 0; t < threads_; ++t) {
    workers_.emplace_back([this, client, t, round] { Run(client, t, round); });
  }
}

void Workload::Stop() {
  stop_ = true;
  for (auto& w : workers_) w.join();
  workers_.clear();
}

Result<int> Workload::Verify(client::NovaClient* client, const std::string& when) {
  int checked = 0;
  int lost = 0, stale = 0, undeleted = 0, unknown = 0;
  std::string quoted;
  for (int t = 0; t < threads_; ++t) {
    for (auto& [key, h] : history_[t]) {
      auto got = client->Get(key);
      if (!got.ok() && !got.status().IsNotFound()) {
        return got.status().Prepend(when + ": reading " + key);
      }
      ++checked;
      // The state must be one of the versions at or after the floor.
      bool matched = false;
      int64_t version = -1;
      if (got.ok()) {
        version = VersionOf(got.value());
        auto it = h.versions.find(static_cast<uint64_t>(std::max<int64_t>(version, 0)));
        matched = version >= 0 && it != h.versions.end() && it->second == got.value() &&
                  version >= h.floor;
      } else {
        if (h.floor < 0) matched = true;  // nothing acknowledged: absent is fine
        for (auto it = h.versions.lower_bound(static_cast<uint64_t>(std::max<int64_t>(h.floor, 0)));
             it != h.versions.end() && !matched; ++it) {
          if (!it->second.has_value()) {
            matched = true;
            version = static_cast<int64_t>(it->first);
          }
        }
      }
      if (!matched) {
        // Which kind of loss, as the issue reports count them.
        auto floor_it = h.versions.find(static_cast<uint64_t>(std::max<int64_t>(h.floor, 0)));
        const bool floor_deleted = floor_it != h.versions.end() && !floor_it->second.has_value();
        const bool known = got.ok() && version >= 0 &&
                           h.versions.count(static_cast<uint64_t>(version)) != 0 &&
                           h.versions.at(static_cast<uint64_t>(version)) == got.value();
        const char* kind;
        if (!got.ok()) {
          kind = "lost";
          ++lost;
        } else if (!known) {
          kind = "never written";
          ++unknown;
        } else if (floor_deleted) {
          kind = "deleted key back";
          ++undeleted;
        } else {
          kind = "stale";
          ++stale;
        }
        if (lost + stale + undeleted + unknown <= kMaxQuotedMismatches) {
          quoted += "\n  " + std::string(kind) + ": key " + key + " reads " +
                    (got.ok() ? "version " + std::to_string(version) : std::string("NotFound")) +
                    " but the last acknowledged version is " + std::to_string(h.floor) +
                    " (latest attempted " +
                    std::to_string(h.versions.empty() ? 0 : h.versions.rbegin()->first) + ")";
        }
        continue;
      }
      // What was seen after a crash must survive the next ones.
      h.floor = std::max(h.floor, version);
    }
  }
  const int mismatches = lost + stale + undeleted + unknown;
  if (mismatches > 0) {
    return Status::Corruption(when + ": " + std::to_string(mismatches) + " of " +
                              std::to_string(checked) + " keys wrong (" + std::to_string(lost) +
                              " lost, " + std::to_string(stale) + " stale, " +
                              std::to_string(undeleted) + " deleted keys back, " +
                              std::to_string(unknown) + " never written):" + quoted);
  }
  return checked;
}

void Workload::Run(client::NovaClient* client, int t, int round) {
  std::mt19937_64 rng(seed_ * 1000003 + static_cast<uint64_t>(round) * 131 +
                      static_cast<uint64_t>(t));
  auto& keys = history_[t];
  while (!stop_) {
    const uint64_t op = rng() % kOpKinds;
    std::vector<ltc::BatchEntry> batch;
    std::vector<std::pair<std::string, uint64_t>> touched;
    const int n = op == kBatchOp ? 2 + static_cast<int>(rng() % 3) : 1;
    // A batch stays in one range: keys of the same parity.
    const int parity = static_cast<int>(rng() % 2);
    for (int j = 0; j < n; ++j) {
      const int i = static_cast<int>(rng() % static_cast<uint64_t>(keys_ / 2)) * 2 + parity;
      const std::string key = Key(t, i);
      if (std::any_of(touched.begin(), touched.end(),
                      [&](const auto& p) { return p.first == key; })) {
        continue;
      }
      // Recorded before it is sent: a write that fails may still have been applied.
      KeyHistory& h = keys[key];
      const uint64_t version = (h.versions.empty() ? 0 : h.versions.rbegin()->first) + 1;
      ltc::BatchEntry e;
      e.key = key;
      if (op == kDeleteOp) {
        e.op = ltc::BatchOp::kDelete;
        h.versions[version] = std::nullopt;
      } else {
        e.op = ltc::BatchOp::kPut;
        e.value = ValueFor(key, version);
        h.versions[version] = e.value;
      }
      touched.emplace_back(key, version);
      batch.push_back(std::move(e));
    }
    const MonoTime start = MonoNow();
    Status s;
    if (batch.size() > 1) {
      s = client->Write(batch);
    } else if (batch[0].op == ltc::BatchOp::kDelete) {
      s = client->Delete(batch[0].key);
    } else {
      s = client->Put(batch[0].key, batch[0].value);
    }
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count();
    int64_t prev = max_latency_ms_.load();
    while (ms > prev && !max_latency_ms_.compare_exchange_weak(prev, ms)) {
    }
    if (s.ok()) {
      for (const auto& [key, version] : touched) {
        keys[key].floor = std::max<int64_t>(keys[key].floor, static_cast<int64_t>(version));
      }
      acked_.fetch_add(1);
    } else {
      failed_.fetch_add(1);
    }
  }
}

}  // namespace nova::test
