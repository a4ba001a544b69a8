#include "coordinator/cluster_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "common/hex.h"

namespace nova::coordinator {

namespace {

using nlohmann::json;

// A member id becomes a ZooKeeper node name and a log/table token; keep it short and plain.
constexpr size_t kMaxMemberIdLength = 64;
// Single-byte split points can express at most this many ranges.
constexpr int kMaxEvenRanges = 256;

// JSON field names. DO NOT CHANGE: persisted in ZooKeeper.
constexpr char kFormatVersionField[] = "format_version";
constexpr char kClusterField[] = "cluster";
constexpr char kEpochField[] = "epoch";
constexpr char kRangesField[] = "ranges";
constexpr char kIdField[] = "id";
constexpr char kStartField[] = "start";
constexpr char kEndField[] = "end";
constexpr char kLtcField[] = "ltc";
constexpr char kOwnerEpochField[] = "owner_epoch";  // absent in older documents: 0
constexpr char kLtcsField[] = "ltcs";
constexpr char kLogcsField[] = "logcs";
constexpr char kStocsField[] = "stocs";
constexpr char kSettingsField[] = "settings";
constexpr char kDrainingField[] = "draining";
constexpr char kDrainingStocsField[] = "draining_stocs";  // absent in older documents
constexpr char kLtcIncarnationsField[] = "ltc_incarnations";
constexpr char kMigrationsField[] = "migrations";

// Reads an object of string -> string. Absent fields are empty maps (so older documents
// without a later-added section still parse).
Status ReadStringMap(const json& doc, const char* field, std::map<std::string, std::string>* out) {
  auto it = doc.find(field);
  if (it == doc.end()) return Status::OK();
  if (!it->is_object()) return Status::Corruption(std::string(field) + ": want an object");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return Status::Corruption(std::string(field) + "." + k + ": want a string");
    }
    (*out)[k] = v.get<std::string>();
  }
  return Status::OK();
}

Status ReadMigration(const json& m, size_t index, RangeMigration* out) {
  const std::string where = "migrations[" + std::to_string(index) + "]";
  if (!m.is_object()) return Status::Corruption(where + ": want an object");
  auto range = m.find("range");
  if (range == m.end() || !range->is_number_unsigned() || range->get<uint64_t>() > UINT32_MAX) {
    return Status::Corruption(where + ".range: want an unsigned 32-bit integer");
  }
  out->range = static_cast<uint32_t>(range->get<uint64_t>());
  for (auto [field, target] : {std::pair{"from", &out->from}, std::pair{"to", &out->to}}) {
    auto f = m.find(field);
    if (f == m.end() || !f->is_string()) {
      return Status::Corruption(where + "." + field + ": want a string");
    }
    *target = f->get<std::string>();
  }
  for (auto [field, target] :
       {std::pair{"from_epoch", &out->from_epoch}, std::pair{"started_ms", &out->started_ms}}) {
    auto f = m.find(field);
    if (f == m.end()) continue;
    if (!f->is_number_unsigned()) {
      return Status::Corruption(where + "." + field + ": want an unsigned integer");
    }
    *target = f->get<uint64_t>();
  }
  if (auto f = m.find("running"); f != m.end()) {
    if (!f->is_boolean()) return Status::Corruption(where + ".running: want a boolean");
    out->running = f->get<bool>();
  }
  return Status::OK();
}

Status ReadRange(const json& r, size_t index, RangeAssignment* out) {
  const std::string where = "ranges[" + std::to_string(index) + "]";
  if (!r.is_object()) return Status::Corruption(where + ": want an object");
  auto id = r.find(kIdField);
  if (id == r.end() || !id->is_number_unsigned() || id->get<uint64_t>() > UINT32_MAX) {
    return Status::Corruption(where + ".id: want an unsigned 32-bit integer");
  }
  out->id = static_cast<uint32_t>(id->get<uint64_t>());
  auto start = r.find(kStartField);
  Result<std::string> start_bytes = Status::Corruption("missing");
  if (start != r.end() && start->is_string()) {
    start_bytes = HexDecode(start->get_ref<const std::string&>());
  }
  if (!start_bytes.ok()) return Status::Corruption(where + ".start: want a hex string");
  out->keys.start = std::move(start_bytes.value());
  auto end = r.find(kEndField);
  if (end == r.end()) return Status::Corruption(where + ".end: missing (null = unbounded)");
  if (end->is_null()) {
    out->keys.end.reset();
  } else {
    Result<std::string> bytes = Status::Corruption("not a string");
    if (end->is_string()) bytes = HexDecode(end->get_ref<const std::string&>());
    if (!bytes.ok()) return Status::Corruption(where + ".end: want a hex string or null");
    out->keys.end = std::move(bytes.value());
  }
  auto ltc = r.find(kLtcField);
  if (ltc != r.end() && !ltc->is_null()) {
    if (!ltc->is_string()) return Status::Corruption(where + ".ltc: want a string");
    out->ltc = ltc->get<std::string>();
  }
  auto owner_epoch = r.find(kOwnerEpochField);
  if (owner_epoch != r.end()) {
    if (!owner_epoch->is_number_unsigned()) {
      return Status::Corruption(where + ".owner_epoch: want an unsigned integer");
    }
    out->owner_epoch = owner_epoch->get<uint64_t>();
  }
  return Status::OK();
}

Status ValidateMembers(const std::map<std::string, std::string>& members, const char* what) {
  for (const auto& [id, address] : members) {
    Status s = ValidateMemberId(id);
    if (!s.ok()) return s.Prepend(what);
  }
  return Status::OK();
}

Status ValidateIds(const std::set<std::string>& ids, const char* what) {
  for (const std::string& id : ids) {
    Status s = ValidateMemberId(id);
    if (!s.ok()) return s.Prepend(what);
  }
  return Status::OK();
}

// Reads an array of member ids (absent: empty).
Status ReadIdSet(const json& doc, const char* field, const char* what, std::set<std::string>* out) {
  auto d = doc.find(field);
  if (d == doc.end()) return Status::OK();
  const Status bad = Status::Corruption(std::string(field) + ": want an array of " + what + " ids");
  if (!d->is_array()) return bad;
  for (const json& id : *d) {
    if (!id.is_string()) return bad;
    out->insert(id.get<std::string>());
  }
  return Status::OK();
}

}  // namespace

const char* MemberKindName(MemberKind kind) {
  switch (kind) {
    case MemberKind::kLtc:
      return "ltc";
    case MemberKind::kLogc:
      return "logc";
    case MemberKind::kStoc:
      return "stoc";
    case MemberKind::kCoordinator:
      return "coordinator";
  }
  return "unknown";
}

bool ParseMemberKind(std::string_view name, MemberKind* kind) {
  for (MemberKind k : kAllMemberKinds) {
    if (name == MemberKindName(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

Status ValidateMemberId(std::string_view id) {
  if (id.empty() || id.size() > kMaxMemberIdLength || id == "." || id == "..") {
    return Status::InvalidArgument("member id '" + std::string(id) +
                                   "': want 1 to 64 characters of [A-Za-z0-9._-]");
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Status::InvalidArgument("member id '" + std::string(id) +
                                     "': want only characters of [A-Za-z0-9._-]");
    }
  }
  return Status::OK();
}

Status ClusterConfig::Validate() const {
  if (cluster.empty()) return Status::InvalidArgument("cluster name is empty");
  if (ranges.empty()) return Status::InvalidArgument("no ranges");
  NOVA_RETURN_NOT_OK(ValidateMembers(ltcs, "ltcs: "));
  NOVA_RETURN_NOT_OK(ValidateMembers(logcs, "logcs: "));
  NOVA_RETURN_NOT_OK(ValidateMembers(stocs, "stocs: "));
  NOVA_RETURN_NOT_OK(ValidateIds(draining, "draining: "));
  NOVA_RETURN_NOT_OK(ValidateIds(draining_stocs, "draining_stocs: "));
  if (!ranges.front().keys.start.empty()) {
    return Status::InvalidArgument("ranges[0] must start at the empty key");
  }
  std::set<uint32_t> ids;
  for (size_t i = 0; i < ranges.size(); i++) {
    const RangeAssignment& r = ranges[i];
    const std::string where =
        "range " + std::to_string(r.id) + " (ranges[" + std::to_string(i) + "])";
    if (!ids.insert(r.id).second) return Status::InvalidArgument(where + ": duplicate id");
    const bool last = i + 1 == ranges.size();
    if (last != r.keys.unbounded()) {
      return Status::InvalidArgument(where + (last ? ": the last range must be unbounded"
                                                   : ": only the last range may be unbounded"));
    }
    if (!r.keys.Valid()) {
      return Status::InvalidArgument(where + ": end must be greater than start");
    }
    if (!last && ranges[i + 1].keys.start != *r.keys.end) {
      return Status::InvalidArgument(where +
                                     ": end differs from the next range's start "
                                     "(ranges must tile the key space in order)");
    }
    if (!r.ltc.empty() && ltcs.count(r.ltc) == 0) {
      return Status::InvalidArgument(where + ": owner '" + r.ltc + "' is not in ltcs");
    }
  }
  std::set<uint32_t> migrating;
  for (const RangeMigration& m : migrations) {
    const std::string where = "migration of range " + std::to_string(m.range);
    if (ids.count(m.range) == 0) return Status::InvalidArgument(where + ": no such range");
    if (!migrating.insert(m.range).second) {
      return Status::InvalidArgument(where + ": more than one migration of the range");
    }
    if (m.to.empty() || m.to == m.from) {
      return Status::InvalidArgument(where + ": the destination must be another LTC");
    }
  }
  return Status::OK();
}

const RangeMigration* ClusterConfig::MigrationOf(uint32_t range) const {
  for (const RangeMigration& m : migrations) {
    if (m.range == range) return &m;
  }
  return nullptr;
}

RangeMigration* ClusterConfig::MigrationOf(uint32_t range) {
  return const_cast<RangeMigration*>(std::as_const(*this).MigrationOf(range));
}

const RangeAssignment* ClusterConfig::Range(uint32_t id) const {
  for (const RangeAssignment& r : ranges) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

RangeAssignment* ClusterConfig::Range(uint32_t id) {
  return const_cast<RangeAssignment*>(std::as_const(*this).Range(id));
}

std::string ClusterConfig::ToJson() const {
  json doc;
  doc[kFormatVersionField] = kFormatVersion;
  doc[kClusterField] = cluster;
  doc[kEpochField] = epoch;
  json rs = json::array();
  for (const RangeAssignment& r : ranges) {
    json j;
    j[kIdField] = r.id;
    j[kStartField] = HexEncode(r.keys.start);
    // JSON spells the unbounded end null.
    j[kEndField] = r.keys.end.has_value() ? json(HexEncode(*r.keys.end)) : json(nullptr);
    j[kLtcField] = r.ltc;
    j[kOwnerEpochField] = r.owner_epoch;
    rs.push_back(std::move(j));
  }
  doc[kRangesField] = std::move(rs);
  doc[kLtcsField] = ltcs;
  doc[kLogcsField] = logcs;
  doc[kStocsField] = stocs;
  doc[kSettingsField] = settings;
  doc[kDrainingField] = draining;
  doc[kDrainingStocsField] = draining_stocs;
  doc[kLtcIncarnationsField] = ltc_incarnations;
  json ms = json::array();
  for (const RangeMigration& m : migrations) {
    json j;
    j["range"] = m.range;
    j["from"] = m.from;
    j["to"] = m.to;
    j["from_epoch"] = m.from_epoch;
    j["running"] = m.running;
    j["started_ms"] = m.started_ms;
    ms.push_back(std::move(j));
  }
  doc[kMigrationsField] = std::move(ms);
  // Replace invalid UTF-8 in names/settings rather than throwing (dump's default).
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<ClusterConfig> ClusterConfig::FromJson(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Corruption("configuration is not valid JSON");
  if (!doc.is_object()) return Status::Corruption("configuration: want a JSON object");

  auto version = doc.find(kFormatVersionField);
  if (version == doc.end() || !version->is_number_unsigned()) {
    return Status::Corruption("format_version: missing or not an unsigned integer");
  }
  if (version->get<uint64_t>() != kFormatVersion) {
    return Status::Corruption("format_version " + std::to_string(version->get<uint64_t>()) +
                              " is not supported (want " + std::to_string(kFormatVersion) + ")");
  }
  ClusterConfig config;
  auto cluster = doc.find(kClusterField);
  if (cluster == doc.end() || !cluster->is_string()) {
    return Status::Corruption("cluster: missing or not a string");
  }
  config.cluster = cluster->get<std::string>();
  auto epoch = doc.find(kEpochField);
  if (epoch == doc.end() || !epoch->is_number_unsigned()) {
    return Status::Corruption("epoch: missing or not an unsigned integer");
  }
  config.epoch = epoch->get<uint64_t>();

  auto ranges = doc.find(kRangesField);
  if (ranges == doc.end() || !ranges->is_array()) {
    return Status::Corruption("ranges: missing or not an array");
  }
  config.ranges.resize(ranges->size());
  for (size_t i = 0; i < ranges->size(); i++) {
    NOVA_RETURN_NOT_OK(ReadRange((*ranges)[i], i, &config.ranges[i]));
  }
  NOVA_RETURN_NOT_OK(ReadStringMap(doc, kLtcsField, &config.ltcs));
  NOVA_RETURN_NOT_OK(ReadStringMap(doc, kLogcsField, &config.logcs));
  NOVA_RETURN_NOT_OK(ReadStringMap(doc, kStocsField, &config.stocs));
  NOVA_RETURN_NOT_OK(ReadStringMap(doc, kSettingsField, &config.settings));
  NOVA_RETURN_NOT_OK(ReadStringMap(doc, kLtcIncarnationsField, &config.ltc_incarnations));
  NOVA_RETURN_NOT_OK(ReadIdSet(doc, kDrainingField, "LTC", &config.draining));
  NOVA_RETURN_NOT_OK(ReadIdSet(doc, kDrainingStocsField, "StoC", &config.draining_stocs));
  if (auto ms = doc.find(kMigrationsField); ms != doc.end()) {
    if (!ms->is_array()) return Status::Corruption("migrations: want an array");
    config.migrations.resize(ms->size());
    for (size_t i = 0; i < ms->size(); i++) {
      NOVA_RETURN_NOT_OK(ReadMigration((*ms)[i], i, &config.migrations[i]));
    }
  }
  NOVA_RETURN_NOT_OK(config.Validate());
  return config;
}

const RangeAssignment* ClusterConfig::RangeForKey(std::string_view key) const {
  // The last range whose start is <= key; ranges are sorted by start when valid.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), key,
                             [](std::string_view k, const RangeAssignment& r) {
                               return k < std::string_view(r.keys.start);
                             });
  if (it == ranges.begin()) return nullptr;
  --it;
  return it->Contains(key) ? &*it : nullptr;
}

std::vector<uint32_t> ClusterConfig::RangesOf(std::string_view ltc) const {
  std::vector<uint32_t> ids;
  for (const RangeAssignment& r : ranges) {
    if (r.ltc == ltc) ids.push_back(r.id);
  }
  return ids;
}

std::map<std::string, std::string>* ClusterConfig::Members(MemberKind kind) {
  switch (kind) {
    case MemberKind::kLtc:
      return &ltcs;
    case MemberKind::kLogc:
      return &logcs;
    case MemberKind::kStoc:
      return &stocs;
    case MemberKind::kCoordinator:
      return nullptr;
  }
  return nullptr;
}

const std::map<std::string, std::string>* ClusterConfig::Members(MemberKind kind) const {
  return const_cast<ClusterConfig*>(this)->Members(kind);
}


Result<std::vector<std::string>> EvenSplitPoints(int n) {
  if (n < 1 || n > kMaxEvenRanges) {
    return Status::InvalidArgument("--ranges=" + std::to_string(n) +
                                   ": want 1..256 without --split-points (the default split "
                                   "points are single bytes)");
  }
  std::vector<std::string> points;
  for (int i = 1; i < n; i++) {
    points.push_back(std::string(1, static_cast<char>(kMaxEvenRanges * i / n)));
  }
  return points;
}

Result<std::vector<std::string>> ParseSplitPoints(std::string_view text) {
  std::vector<std::string> points;
  size_t line_no = 0;
  while (!text.empty()) {
    line_no++;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    if (line.empty() || line.front() == '#') continue;
    const std::string where = "split points line " + std::to_string(line_no) + ": ";
    Result<std::string> decoded = HexDecode(line);
    if (!decoded.ok()) {
      return Status::InvalidArgument(where + "'" + std::string(line) + "' is not hex");
    }
    std::string key = std::move(decoded.value());
    if (key.empty()) return Status::InvalidArgument(where + "empty key");
    if (!points.empty() && key <= points.back()) {
      return Status::InvalidArgument(where + "not greater than the previous split point");
    }
    points.push_back(std::move(key));
  }
  return points;
}

Result<ClusterConfig> MakeInitialConfig(const std::string& cluster,
                                        const std::vector<std::string>& split_points,
                                        const std::map<std::string, std::string>& settings) {
  ClusterConfig config;
  config.epoch = 1;
  config.cluster = cluster;
  config.settings = settings;
  std::string start;
  for (size_t i = 0; i <= split_points.size(); i++) {
    RangeAssignment r;
    r.id = static_cast<uint32_t>(i);
    r.keys.start = start;
    if (i < split_points.size()) {
      r.keys.end = split_points[i];
      start = split_points[i];
    }
    config.ranges.push_back(std::move(r));
  }
  NOVA_RETURN_NOT_OK(config.Validate());
  return config;
}

}  // namespace nova::coordinator
