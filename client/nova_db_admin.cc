#include "client/nova_db_admin.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include "common/coding.h"
#include "common/hex.h"

namespace nova::client {
namespace {

constexpr std::string_view kFilesAtLevel = "leveldb.num-files-at-level";
// LevelDB's levels (its config::kNumLevels; Nova's engine has as many): the levels
// num-files-at-level<N> accepts and sstables lists, whatever the ranges report.
constexpr size_t kLevelDbLevels = 7;
constexpr double kMiB = 1048576.0;
// The sequence and type tag ending an internal key (user key, then 8 bytes).
constexpr size_t kTagBytes = 8;

// "'<user key>' @ <sequence> : <type>", LevelDB's way of printing an internal key.
std::string InternalKeyText(std::string_view ikey) {
  if (ikey.size() < kTagBytes) return "(bad key '" + EscapeBytes(ikey) + "')";
  const uint64_t tag = DecodeFixed64(ikey.data() + ikey.size() - kTagBytes);
  return "'" + EscapeBytes(ikey.substr(0, ikey.size() - kTagBytes)) + "' @ " +
         std::to_string(tag >> 8) + " : " + std::to_string(tag & 0xff);
}

// The levels any range reports (at least LevelDB's).
size_t NumLevels(const NovaClient::ClusterFigures& f) {
  size_t n = kLevelDbLevels;
  for (const auto& r : f.ranges) n = std::max(n, r.levels.size());
  return n;
}

// The cluster's levels, summed over its ranges, as LevelDB's table.
std::string StatsTable(const NovaClient::ClusterFigures& f) {
  std::vector<ltc::LevelFigures> sums(NumLevels(f));
  for (size_t l = 0; l < sums.size(); ++l) {
    ltc::LevelFigures& sum = sums[l];
    for (const auto& r : f.ranges) {
      if (l >= r.levels.size()) continue;
      sum.files += r.levels[l].files;
      sum.bytes += r.levels[l].bytes;
      sum.compaction_micros += r.levels[l].compaction_micros;
      sum.read_bytes += r.levels[l].read_bytes;
      sum.write_bytes += r.levels[l].write_bytes;
    }
  }
  return ltc::LevelStatsTable(sums);
}

std::string Sstables(const NovaClient::ClusterFigures& f) {
  std::string out;
  for (size_t l = 0; l < NumLevels(f); ++l) {
    out += "--- level " + std::to_string(l) + " ---\n";
    for (const auto& r : f.ranges) {
      for (const ltc::TableFigures& t : r.tables) {
        if (t.level != l) continue;
        out += " " + std::to_string(t.number) + ":" + std::to_string(t.bytes) + "[" +
               InternalKeyText(t.smallest) + " .. " + InternalKeyText(t.largest) + "] range " +
               std::to_string(r.range.id) + "\n";
      }
    }
  }
  return out;
}

}  // namespace

bool GetLevelDbProperty(NovaClient* client, std::string_view property, std::string* value) {
  const bool files_at_level = property.substr(0, kFilesAtLevel.size()) == kFilesAtLevel;
  size_t level = 0;
  if (files_at_level) {
    // A decimal number and nothing else, as LevelDB parses it.
    const std::string_view digits = property.substr(kFilesAtLevel.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), level);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return false;
    }
  } else if (property != "leveldb.sstables" && property != "leveldb.stats" &&
             property != "leveldb.approximate-memory-usage") {
    return false;
  }
  Result<NovaClient::ClusterFigures> f = client->RangeStats(property == "leveldb.sstables");
  if (!f.ok()) return false;
  if (files_at_level) {
    if (level >= NumLevels(f.value())) return false;
    uint64_t files = 0;
    for (const auto& r : f.value().ranges) {
      if (level < r.levels.size()) files += r.levels[level].files;
    }
    *value = std::to_string(files);
    return true;
  }
  if (property == "leveldb.sstables") {
    *value = Sstables(f.value());
    return true;
  }
  uint64_t memtables = 0, memtable_bytes = 0, cache_bytes = 0;
  for (const auto& r : f.value().ranges) {
    memtables += r.memtables;
    memtable_bytes += r.memtable_bytes;
    cache_bytes += r.block_cache_bytes;
  }
  if (property == "leveldb.approximate-memory-usage") {
    *value = std::to_string(memtable_bytes + cache_bytes);
    return true;
  }
  // leveldb.stats: LevelDB's table, then Nova's figures.
  *value = StatsTable(f.value());
  char summary[256];
  std::snprintf(summary, sizeof(summary),
                "\nNova-LSM: %zu ranges at epoch %llu, %llu memtables (%.1f MB), block caches "
                "%.1f MB%s\n",
                f.value().ranges.size(), static_cast<unsigned long long>(f.value().epoch),
                static_cast<unsigned long long>(memtables), memtable_bytes / kMiB,
                cache_bytes / kMiB,
                f.value().errors.empty() ? "" : " (some LTCs did not answer)");
  *value += summary;
  Result<std::string> text = client->Stats();
  if (text.ok()) *value += text.value();
  return true;
}

void GetApproximateSizes(NovaClient* client, const leveldb::Range* ranges, int n,
                         uint64_t* sizes) {
  if (n <= 0) return;
  std::vector<KeyRange> spans;
  spans.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    spans.push_back(KeyRange{ranges[i].start.ToString(), ranges[i].limit.ToString()});
  }
  Result<std::vector<uint64_t>> r = client->ApproximateSizes(spans);
  for (int i = 0; i < n; ++i) sizes[i] = r.ok() ? r.value()[static_cast<size_t>(i)] : 0;
}

void CompactRange(NovaClient* client, const leveldb::Slice* begin, const leveldb::Slice* end) {
  KeyRange span;
  if (begin != nullptr) span.start = begin->ToString();
  // LevelDB's end is inclusive: the span ends just past it.
  if (end != nullptr) span.end = end->ToString() + '\0';
  (void)client->CompactRange(span);
}

}  // namespace nova::client
