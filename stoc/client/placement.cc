#include "stoc/client/placement.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

namespace nova::stoc {

namespace {

// Uniform in [0, n) by rejection, so a seed replays the same on every standard library
// (std::uniform_int_distribution's algorithm is implementation-defined).
// REQUIRES: n > 0.
uint64_t UniformBelow(std::mt19937_64* rng, uint64_t n) {
  // 2^64 mod n: rejecting outputs below it leaves a multiple of n equally likely values.
  const uint64_t threshold = (uint64_t{0} - n) % n;
  while (true) {
    const uint64_t v = (*rng)();
    if (v >= threshold) return v % n;
  }
}

// Moves a uniform sample of k distinct elements of *pool to its front, in sample order
// (a partial Fisher-Yates shuffle). REQUIRES: k <= pool->size().
void SampleToFront(std::vector<uint32_t>* pool, size_t k, std::mt19937_64* rng) {
  for (size_t i = 0; i < k; ++i) {
    const size_t j = i + static_cast<size_t>(UniformBelow(rng, pool->size() - i));
    std::swap((*pool)[i], (*pool)[j]);
  }
}

}  // namespace

void LoadView::Update(uint32_t stoc_id, const StocLoad& load) {
  MutexLock lock(&mu_);
  auto [it, inserted] = loads_.try_emplace(stoc_id, load);
  if (!inserted && it->second.updated <= load.updated) it->second = load;
}

StocLoad LoadView::Get(uint32_t stoc_id) const {
  const MonoTime now = MonoNow();
  MutexLock lock(&mu_);
  auto it = loads_.find(stoc_id);
  if (it == loads_.end() || now - it->second.updated > staleness_) return StocLoad{};
  return it->second;
}

void LoadView::Remove(uint32_t stoc_id) {
  MutexLock lock(&mu_);
  loads_.erase(stoc_id);
}

Status ChooseStocs(lsm::PlacementPolicy policy, const std::vector<uint32_t>& candidates,
                   const LoadView& loads, int rho, int d, std::mt19937_64* rng,
                   std::vector<uint32_t>* out) {
  if (rng == nullptr || out == nullptr) return Status::InvalidArgument("null rng or output");
  if (rho < 1) return Status::InvalidArgument("rho must be at least 1, got " + std::to_string(rho));
  if (d < 0 || (d != 0 && d < rho)) {
    return Status::InvalidArgument("d must be 0 (meaning 2 * rho) or at least rho = " +
                                   std::to_string(rho) + ", got " + std::to_string(d));
  }

  // Distinct candidates, first occurrence kept, so that the sample below is over StoCs
  // rather than list entries.
  std::vector<uint32_t> pool;
  pool.reserve(candidates.size());
  std::unordered_set<uint32_t> seen;
  for (uint32_t id : candidates) {
    if (seen.insert(id).second) pool.push_back(id);
  }
  const size_t want = static_cast<size_t>(rho);
  if (pool.size() < want) {
    return Status::InvalidArgument("need " + std::to_string(rho) + " distinct StoCs, have " +
                                   std::to_string(pool.size()));
  }

  if (policy == lsm::PlacementPolicy::kRandom) {
    SampleToFront(&pool, want, rng);
    out->assign(pool.begin(), pool.begin() + static_cast<ptrdiff_t>(want));
    return Status::OK();
  }

  const size_t effective_d = d == 0 ? 2 * want : static_cast<size_t>(d);
  const size_t sampled = std::min(effective_d, pool.size());
  SampleToFront(&pool, sampled, rng);
  struct Sampled {
    uint32_t id;
    StocLoad load;
  };
  std::vector<Sampled> sample;
  sample.reserve(sampled);
  for (size_t i = 0; i < sampled; ++i) sample.push_back({pool[i], loads.Get(pool[i])});
  // Stable: equal loads keep sample order, which is itself uniformly random.
  std::stable_sort(sample.begin(), sample.end(), [](const Sampled& a, const Sampled& b) {
    if (a.load.queue_depth != b.load.queue_depth) return a.load.queue_depth < b.load.queue_depth;
    return a.load.pending_bytes < b.load.pending_bytes;
  });
  out->clear();
  for (size_t i = 0; i < want; ++i) out->push_back(sample[i].id);
  return Status::OK();
}

}  // namespace nova::stoc
