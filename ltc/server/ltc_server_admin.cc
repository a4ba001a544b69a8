// LtcServer's administration handlers (docs/protocol.md): approximate sizes of key spans,
// compaction of a key span, and the hosted ranges' figures (LevelDB's properties).
#include <string>
#include <vector>

#include "ltc/server/ltc_server.h"

namespace nova::ltc {

Result<const HostedRange*> LtcServer::RouteSpan(const HostedRanges& t, uint64_t epoch,
                                                const KeyRange& span) const {
  if (!span.Valid()) {
    return Status::InvalidArgument("span " + span.ToString() + " holds no key");
  }
  auto h = Route(t, epoch, span.start);
  if (!h.ok()) return h.status();
  const KeyRange& keys = h.value()->info.keys;
  if (!keys.unbounded() && (span.unbounded() || *span.end > *keys.end)) {
    return FormatWrongRange(t.epoch, "span " + span.ToString() + " goes past the end of range " +
                                         std::to_string(h.value()->info.id));
  }
  return h;
}

Result<std::string> LtcServer::HandleApproximateSizes(const HostedRanges& t,
                                                      const ClientRequest& r) {
  std::vector<uint64_t> sizes;
  sizes.reserve(r.sizes.spans.size());
  for (const KeyRange& span : r.sizes.spans) {
    auto h = RouteSpan(t, r.sizes.epoch, span);
    if (!h.ok()) return h.status();
    auto b = ranges_.BackendOf(*h.value());
    if (!b.ok()) return b.status();
    Result<uint64_t> size = b.value()->ApproximateSize(span);
    if (!size.ok()) return size.status();
    sizes.push_back(size.value());
  }
  return EncodeU64List(sizes);
}

Result<std::string> LtcServer::HandleCompactRange(const HostedRanges& t, const ClientRequest& r) {
  // (Queued requests still run while the server shuts down: they end here at once, and a
  // running one at its next step.)
  if (stopping_) return Status::Unavailable("LTC shutting down");
  auto h = RouteSpan(t, r.compact.epoch, r.compact.span);
  if (!h.ok()) return h.status();
  auto b = ranges_.BackendOf(*h.value());
  if (!b.ok()) return b.status();
  Status s = b.value()->CompactRange(r.compact.span, &stopping_);
  if (!s.ok()) {
    if (stopping_) return Status::Unavailable("LTC shutting down: " + s.ToString());
    return s.Prepend("range " + std::to_string(h.value()->info.id));
  }
  return std::string();
}

Result<std::string> LtcServer::HandleRangeStats(const HostedRanges& t, const ClientRequest& r) {
  RangeStatsResponse resp;
  resp.epoch = t.epoch;
  resp.ltc_id = t.ltc_id;
  for (const HostedRange& h : t.ranges) {
    RangeFigures f;
    f.range = h.info;
    // A range still being opened (or fenced, or handed off) reports no figures.
    std::shared_ptr<RangeBackend> b = h.slot->TryGet();
    if (b != nullptr && !h.slot->fenced() && !h.slot->handed_off()) {
      f.open = true;
      b->GetFigures(r.stats.with_tables, &f);
    }
    resp.ranges.push_back(std::move(f));
  }
  return EncodeRangeStatsResponse(resp);
}

}  // namespace nova::ltc
