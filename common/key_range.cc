#include "common/key_range.h"

#include "common/hex.h"

namespace nova {

std::string KeyRange::ToString() const {
  return "[" + HexEncode(start) + ", " + (end.has_value() ? HexEncode(*end) : "end") + ")";
}

}  // namespace nova
