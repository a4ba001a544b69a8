#include "benchmarks/ycsb/record_codec.h"

#include <algorithm>

#include "common/coding.h"

namespace nova::ycsb {

void EncodeRecord(const Record& record, std::string* dst) {
  for (const auto& [name, value] : record) {
    PutLengthPrefixed(dst, name);
    PutLengthPrefixed(dst, value);
  }
}

bool DecodeRecord(std::string_view value, const std::vector<std::string>* fields, Record* out) {
  out->clear();
  while (!value.empty()) {
    std::string_view name, data;
    if (!GetLengthPrefixed(&value, &name) || !GetLengthPrefixed(&value, &data)) return false;
    if (fields != nullptr && std::find(fields->begin(), fields->end(), name) == fields->end()) {
      continue;
    }
    out->emplace_back(std::string(name), std::string(data));
  }
  return true;
}

void MergeRecord(const Record& update, Record* record) {
  for (const Field& f : update) {
    auto it = std::find_if(record->begin(), record->end(),
                           [&f](const Field& g) { return g.first == f.first; });
    if (it != record->end()) {
      it->second = f.second;
    } else {
      record->push_back(f);
    }
  }
}

}  // namespace nova::ycsb
