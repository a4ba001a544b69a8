// Names of StoC files written by LTCs, so a StoC's listing tells whose files it holds:
//   table fragment:  r<range>-t<table>-f<fragment>-p<replica>   e.g. r3-t000123-f2-p0
//   MANIFEST:        r<range>-manifest-<number>                  e.g. r3-manifest-000007
//   log file:        r<range>-log-<memtable id>                  e.g. r3-log-000042
// Numbers are decimal; table, manifest and log numbers are zero-padded to 6 digits (more
// digits when larger). DO NOT CHANGE: persisted (StoC catalogs hold these names).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::stoc {

// Longest file name, in bytes. DO NOT CHANGE: persisted names are at most this long.
constexpr size_t kMaxFileNameBytes = 255;

// Returns OK if `name` is 1..kMaxFileNameBytes bytes of [A-Za-z0-9._-] and is not "." or
// ".." (which could never be used as a file name on disk); else InvalidArgument saying why.
Status ValidateFileName(std::string_view name);

struct FragmentName {
  uint32_t range_id = 0;
  uint64_t table_number = 0;
  uint32_t fragment = 0;  // 0..rho-1 data fragments; rho = the meta fragment
  uint32_t replica = 0;
};

std::string TableFragmentFileName(const FragmentName& f);
std::string ManifestFileName(uint32_t range_id, uint64_t number);
std::string LogFileName(uint32_t range_id, uint64_t memtable_id);

enum class StocFileType { kTableFragment, kManifest, kLog, kUnknown };

struct ParsedFileName {
  StocFileType type = StocFileType::kUnknown;
  uint32_t range_id = 0;
  uint64_t number = 0;  // table number, manifest number or memtable id
  uint32_t fragment = 0;
  uint32_t replica = 0;
};

// Parses a name made by the functions above; kUnknown for anything else.
ParsedFileName ParseStocFileName(std::string_view name);

}  // namespace nova::stoc
