// NovaClient's administration calls (nova_client.h): approximate sizes and compaction of
// key spans, split by the routing table across ranges and LTCs, and the routed ranges'
// figures.
#include <algorithm>
#include <future>
#include <map>
#include <memory>
#include <thread>

#include "client/nova_client.h"
#include "common/retry_policy.h"

namespace nova::client {
namespace {

using ltc::ClientMsg;

// The smaller of two exclusive ends (nullopt: unbounded).
std::optional<std::string> MinEnd(const std::optional<std::string>& a,
                                  const std::optional<std::string>& b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

// One part of a span: the keys of `span` in one routed range.
struct Part {
  size_t index = 0;  // of the caller's span
  KeyRange keys;
  std::string ltc_address;
};

// Splits `span` (the caller's span `index`) by `t`'s routes into *parts; the pieces no
// route holds go to *unrouted.
void Split(const RoutingTable& t, size_t index, const KeyRange& span, std::vector<Part>* parts,
           std::vector<std::pair<size_t, KeyRange>>* unrouted) {
  std::string pos = span.start;
  for (;;) {
    if (span.end && pos >= *span.end) return;
    const RoutingTable::Route* r = t.Find(pos);
    if (r == nullptr) {
      // A gap: up to the next route's start (or the span's end).
      auto next = std::upper_bound(
          t.routes.begin(), t.routes.end(), pos,
          [](const std::string& k, const RoutingTable::Route& x) { return k < x.range.keys.start; });
      std::optional<std::string> gap_end =
          next == t.routes.end() ? std::nullopt : std::optional<std::string>(next->range.keys.start);
      gap_end = MinEnd(gap_end, span.end);
      unrouted->emplace_back(index, KeyRange{pos, gap_end});
      if (!gap_end) return;
      pos = *gap_end;
      continue;
    }
    const std::optional<std::string> end = MinEnd(r->range.keys.end, span.end);
    parts->push_back(Part{index, KeyRange{pos, end}, r->ltc_address});
    if (!end) return;
    pos = *end;
  }
}

Status Unrouted() {
  return Status::Unavailable("no LTC is known to serve a range of the span (is an LTC down?)");
}

// The outcome of one request.
using Outcome = std::pair<Status, std::string>;

}  // namespace

Result<std::vector<uint64_t>> NovaClient::ApproximateSizes(const std::vector<KeyRange>& spans) {
  const Deadline deadline = Deadline::After(options().timeout);
  std::vector<uint64_t> sizes(spans.size(), 0);
  std::vector<std::pair<size_t, KeyRange>> left;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].Valid()) left.emplace_back(i, spans[i]);
  }
  Backoff backoff(RetryPolicy{options().initial_backoff, options().max_backoff});
  while (!left.empty()) {
    const RoutingTable t = routing();
    std::vector<Part> parts;
    std::vector<std::pair<size_t, KeyRange>> retry;
    for (const auto& [i, span] : left) Split(t, i, span, &parts, &retry);
    Status last = retry.empty() ? Status::OK() : Unrouted();
    // One request per LTC with all its parts.
    std::map<std::string, std::vector<const Part*>> by_ltc;
    for (const Part& p : parts) by_ltc[p.ltc_address].push_back(&p);
    std::vector<std::pair<const std::vector<const Part*>*, std::future<Outcome>>> sent;
    for (const auto& [address, ps] : by_ltc) {
      ltc::ApproximateSizesRequest req{t.epoch, {}};
      for (const Part* p : ps) req.spans.push_back(p->keys);
      auto promise = std::make_shared<std::promise<Outcome>>();
      sent.emplace_back(&ps, promise->get_future());
      CallLtc(address, ClientMsg::kApproximateSizes, ltc::EncodeApproximateSizesRequest(req),
              deadline, [promise](Status s, std::string r) {
                promise->set_value({std::move(s), std::move(r)});
              });
    }
    for (auto& [ps, result] : sent) {
      auto [s, payload] = result.get();
      std::vector<uint64_t> got;
      if (s.ok()) s = ltc::DecodeU64List(payload, &got);
      if (s.ok() && got.size() != ps->size()) {
        s = Status::Corruption("ApproximateSizes: " + std::to_string(got.size()) +
                               " sizes for " + std::to_string(ps->size()) + " spans");
      }
      if (s.ok()) {
        for (size_t j = 0; j < got.size(); ++j) sizes[(*ps)[j]->index] += got[j];
        continue;
      }
      if (!RetryPolicy::Retryable(s)) return s.Prepend("ApproximateSizes");
      last = s;
      for (const Part* p : *ps) retry.emplace_back(p->index, p->keys);
    }
    if (retry.empty()) break;
    if (deadline.Expired()) {
      return last.Prepend("ApproximateSizes gave up at its deadline (" +
                          std::to_string(options().timeout.count()) + " ms)");
    }
    std::this_thread::sleep_until(backoff.NextAttempt(deadline));
    RefreshRouting();
    left = std::move(retry);
  }
  return sizes;
}

Status NovaClient::CompactRange(const KeyRange& span) {
  if (!span.Valid()) return Status::OK();
  const Deadline deadline = Deadline::After(options().compact_range_timeout);
  std::vector<std::pair<size_t, KeyRange>> left{{0, span}};
  Backoff backoff(RetryPolicy{options().initial_backoff, options().max_backoff});
  for (;;) {
    const RoutingTable t = routing();
    std::vector<Part> parts;
    std::vector<std::pair<size_t, KeyRange>> retry;
    for (const auto& [i, s] : left) Split(t, i, s, &parts, &retry);
    Status last = retry.empty() ? Status::OK() : Unrouted();
    // One request per range part, all at once: each LTC compacts them one by one.
    std::vector<std::future<Outcome>> sent;
    for (const Part& p : parts) {
      auto promise = std::make_shared<std::promise<Outcome>>();
      sent.push_back(promise->get_future());
      CallLtc(p.ltc_address, ClientMsg::kCompactRange,
              ltc::EncodeCompactRangeRequest(ltc::CompactRangeRequest{t.epoch, p.keys}), deadline,
              [promise](Status s, std::string r) {
                promise->set_value({std::move(s), std::move(r)});
              });
    }
    for (size_t j = 0; j < sent.size(); ++j) {
      const Status s = sent[j].get().first;
      if (s.ok()) continue;
      if (!RetryPolicy::Retryable(s)) return s.Prepend("CompactRange");
      last = s;
      retry.emplace_back(0, parts[j].keys);
    }
    if (retry.empty()) return Status::OK();
    if (deadline.Expired()) {
      return last.Prepend("CompactRange gave up at its deadline (" +
                          std::to_string(options().compact_range_timeout.count()) + " ms)");
    }
    std::this_thread::sleep_until(backoff.NextAttempt(deadline));
    RefreshRouting();
    left = std::move(retry);
  }
}

Result<NovaClient::ClusterFigures> NovaClient::RangeStats(bool with_tables) {
  const Deadline deadline = Deadline::After(options().timeout);
  const RoutingTable t = routing();
  std::map<std::string, std::vector<const RoutingTable::Route*>> by_ltc;
  for (const auto& r : t.routes) by_ltc[r.ltc_address].push_back(&r);
  std::vector<std::pair<std::string, std::future<Outcome>>> sent;
  for (const auto& [address, routes] : by_ltc) {
    auto promise = std::make_shared<std::promise<Outcome>>();
    sent.emplace_back(address, promise->get_future());
    CallLtc(address, ClientMsg::kRangeStats,
            ltc::EncodeRangeStatsRequest(ltc::RangeStatsRequest{with_tables}), deadline,
            [promise](Status s, std::string r) {
              promise->set_value({std::move(s), std::move(r)});
            });
  }
  ClusterFigures out;
  out.epoch = t.epoch;
  for (auto& [address, result] : sent) {
    auto [s, payload] = result.get();
    ltc::RangeStatsResponse resp;
    if (s.ok()) s = ltc::DecodeRangeStatsResponse(payload, &resp);
    if (!s.ok()) {
      out.errors.push_back(s.Prepend("RangeStats of " + address));
      continue;
    }
    // Only the ranges the routing table gives this LTC: a range on its way elsewhere is
    // counted once, where the client routes it.
    for (ltc::RangeFigures& f : resp.ranges) {
      const auto& routes = by_ltc[address];
      const bool routed = std::any_of(routes.begin(), routes.end(), [&](const auto* r) {
        return r->range.id == f.range.id && r->range.keys == f.range.keys;
      });
      if (routed) out.ranges.push_back(std::move(f));
    }
  }
  if (out.ranges.empty() && !out.errors.empty()) return out.errors.front();
  std::sort(out.ranges.begin(), out.ranges.end(),
            [](const auto& a, const auto& b) { return a.range.keys.start < b.range.keys.start; });
  return out;
}

}  // namespace nova::client
