#include "common/split.h"

namespace nova {

std::vector<std::string> SplitNonEmpty(std::string_view s, char sep) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const size_t at = s.find(sep);
    const std::string_view piece = s.substr(0, at);
    if (!piece.empty()) out.emplace_back(piece);
    if (at == std::string_view::npos) break;
    s.remove_prefix(at + 1);
  }
  return out;
}

}  // namespace nova
