#include "ltc/server/ltc_assignment.h"

#include <charconv>
#include <set>

#include "common/hex.h"
#include "common/split.h"

namespace nova::ltc {
namespace {

constexpr int kKeyBytes = 256;  // values of a key's first byte

bool ParseU32(std::string_view s, uint32_t* v) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

Status LtcAssignment::Validate() const {
  std::set<uint32_t> ids;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const RangeInfo& r = ranges[i];
    if (!ids.insert(r.id).second) {
      return Status::InvalidArgument("range id " + std::to_string(r.id) + " appears twice");
    }
    if (!r.keys.Valid()) {
      return Status::InvalidArgument("range " + std::to_string(r.id) + " is empty: start >= end");
    }
    if (i > 0) {
      const RangeInfo& p = ranges[i - 1];
      if (p.keys.unbounded() || *p.keys.end > r.keys.start) {
        return Status::InvalidArgument("ranges " + std::to_string(p.id) + " and " +
                                       std::to_string(r.id) + " overlap or are out of order");
      }
    }
  }
  return Status::OK();
}

Result<LtcAssignment> StaticAssignmentSource::Current() {
  MutexLock l(&mu_);
  return current_;
}

void StaticAssignmentSource::Watch(AssignmentListener listener) {
  MutexLock l(&mu_);
  listener_ = std::move(listener);
}

void StaticAssignmentSource::Unwatch() {
  MutexLock l(&mu_);
  listener_ = nullptr;
}

Status StaticAssignmentSource::Update(LtcAssignment a) {
  NOVA_RETURN_NOT_OK(a.Validate());
  MutexLock l(&mu_);
  if (a.epoch <= current_.epoch) {
    return Status::InvalidArgument("assignment epoch " + std::to_string(a.epoch) +
                                   " is not newer than " + std::to_string(current_.epoch));
  }
  current_ = std::move(a);
  if (listener_) listener_(current_);
  return Status::OK();
}

Result<std::vector<RangeInfo>> EqualRanges(int n) {
  if (n < 1 || n > kKeyBytes) {
    return Status::InvalidArgument("--ranges must be in [1, 256], got " + std::to_string(n));
  }
  std::vector<RangeInfo> out;
  for (int i = 0; i < n; ++i) {
    RangeInfo r;
    r.id = static_cast<uint32_t>(i);
    if (i > 0) r.keys.start = std::string(1, static_cast<char>(kKeyBytes * i / n));
    if (i + 1 < n) r.keys.end = std::string(1, static_cast<char>(kKeyBytes * (i + 1) / n));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<RangeInfo>> RangesFromBounds(const std::string& hex_list) {
  std::vector<std::string> bounds;
  for (const std::string& h : SplitNonEmpty(hex_list, ',')) {
    auto b = HexDecode(h);
    if (!b.ok()) return b.status().Prepend("--range_bounds");
    if (b.value().empty()) return Status::InvalidArgument("--range_bounds: empty split point");
    if (!bounds.empty() && bounds.back() >= b.value()) {
      return Status::InvalidArgument("--range_bounds: split points must ascend strictly");
    }
    bounds.push_back(std::move(b.value()));
  }
  std::vector<RangeInfo> out;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    RangeInfo r;
    r.id = static_cast<uint32_t>(i);
    if (i > 0) r.keys.start = bounds[i - 1];
    if (i < bounds.size()) r.keys.end = bounds[i];
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<uint32_t>> ParseRangeIds(const std::string& ids) {
  std::vector<uint32_t> out;
  for (const std::string& s : SplitNonEmpty(ids, ',')) {
    uint32_t id = 0;
    if (!ParseU32(s, &id)) return Status::InvalidArgument("bad range id '" + s + "'");
    out.push_back(id);
  }
  return out;
}

Result<std::vector<RangeInfo>> SelectRanges(const std::vector<RangeInfo>& all,
                                            const std::string& ids) {
  if (ids.empty() || ids == "all") return all;
  std::vector<RangeInfo> out;
  auto parsed = ParseRangeIds(ids);
  if (!parsed.ok()) return parsed.status();
  std::set<uint32_t> want(parsed.value().begin(), parsed.value().end());
  for (const RangeInfo& r : all) {
    if (want.erase(r.id) > 0) out.push_back(r);
  }
  if (!want.empty()) {
    return Status::InvalidArgument("no range with id " + std::to_string(*want.begin()));
  }
  return out;
}

Result<std::map<uint32_t, std::string>> ParseStocList(const std::string& list) {
  std::map<uint32_t, std::string> out;
  for (const std::string& item : SplitNonEmpty(list, ',')) {
    const size_t at = item.find('@');
    uint32_t id = 0;
    if (at == std::string::npos || !ParseU32(std::string_view(item).substr(0, at), &id) ||
        item.find(':', at) == std::string::npos) {
      return Status::InvalidArgument("--stoc: expected id@host:port, got '" + item + "'");
    }
    if (!out.emplace(id, item.substr(at + 1)).second) {
      return Status::InvalidArgument("--stoc: StoC id " + std::to_string(id) + " appears twice");
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseMemberList(const std::string& list) {
  std::map<std::string, std::string> out;
  for (const std::string& item : SplitNonEmpty(list, ',')) {
    const size_t at = item.find('@');
    if (at == std::string::npos || at == 0 || item.find(':', at) == std::string::npos) {
      return Status::InvalidArgument("expected id@host:port, got '" + item + "'");
    }
    if (!out.emplace(item.substr(0, at), item.substr(at + 1)).second) {
      return Status::InvalidArgument("id " + item.substr(0, at) + " appears twice");
    }
  }
  return out;
}

}  // namespace nova::ltc
