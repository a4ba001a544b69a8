#include "stoc/client/file_names.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>

namespace nova::stoc {

Status ValidateFileName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("file name is empty");
  if (name.size() > kMaxFileNameBytes) {
    return Status::InvalidArgument("file name is " + std::to_string(name.size()) +
                                   " bytes, longer than " + std::to_string(kMaxFileNameBytes));
  }
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Status::InvalidArgument("file name has a character outside [A-Za-z0-9._-] (byte " +
                                     std::to_string(static_cast<unsigned char>(c)) + ")");
    }
  }
  if (name == "." || name == "..") {
    return Status::InvalidArgument("file name may not be \".\" or \"..\"");
  }
  return Status::OK();
}

namespace {

// Parses a decimal number at the front of *s (at least one digit) and advances *s.
bool TakeNumber(std::string_view* s, uint64_t* v) {
  const char* end = s->data() + s->size();
  auto [p, ec] = std::from_chars(s->data(), end, *v);
  if (ec != std::errc() || p == s->data()) return false;
  s->remove_prefix(static_cast<size_t>(p - s->data()));
  return true;
}

bool TakePrefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool Fits32(uint64_t v) { return v <= UINT32_MAX; }

}  // namespace

std::string TableFragmentFileName(const FragmentName& f) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "r%" PRIu32 "-t%06" PRIu64 "-f%" PRIu32 "-p%" PRIu32, f.range_id,
                f.table_number, f.fragment, f.replica);
  return buf;
}

std::string ManifestFileName(uint32_t range_id, uint64_t number) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "r%" PRIu32 "-manifest-%06" PRIu64, range_id, number);
  return buf;
}

std::string LogFileName(uint32_t range_id, uint64_t memtable_id) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "r%" PRIu32 "-log-%06" PRIu64, range_id, memtable_id);
  return buf;
}

ParsedFileName ParseStocFileName(std::string_view name) {
  ParsedFileName out;
  std::string_view s = name;
  uint64_t range;
  if (!TakePrefix(&s, "r") || !TakeNumber(&s, &range) || !Fits32(range)) return out;
  uint64_t number, fragment, replica;
  if (TakePrefix(&s, "-t")) {
    if (TakeNumber(&s, &number) && TakePrefix(&s, "-f") && TakeNumber(&s, &fragment) &&
        Fits32(fragment) && TakePrefix(&s, "-p") && TakeNumber(&s, &replica) && Fits32(replica) &&
        s.empty()) {
      out.type = StocFileType::kTableFragment;
      out.fragment = static_cast<uint32_t>(fragment);
      out.replica = static_cast<uint32_t>(replica);
    }
  } else if (TakePrefix(&s, "-manifest-")) {
    if (TakeNumber(&s, &number) && s.empty()) out.type = StocFileType::kManifest;
  } else if (TakePrefix(&s, "-log-")) {
    if (TakeNumber(&s, &number) && s.empty()) out.type = StocFileType::kLog;
  }
  if (out.type != StocFileType::kUnknown) {
    out.range_id = static_cast<uint32_t>(range);
    out.number = number;
  }
  return out;
}

}  // namespace nova::stoc
