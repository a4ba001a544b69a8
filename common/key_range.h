// KeyRange: the bounds of a range of the key space, [start, end) in bytewise order.
//
// The one way the tree writes a range's bounds: the cluster configuration
// (coordinator::RangeAssignment), the client protocol and the LTC's assignment
// (ltc::RangeInfo) and the client's routing table all hold a KeyRange. The unbounded end is
// written one way, as a missing `end`; codecs that must spell it otherwise (an empty string
// on the wire, null in the configuration's JSON) convert at their edge.
//
// Thread safety: a plain value.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nova {

struct KeyRange {
  std::string start;               // inclusive; the first range of a key space starts at ""
  std::optional<std::string> end;  // exclusive; nullopt: unbounded above (+infinity)

  // The whole key space.
  static KeyRange All() { return KeyRange{}; }

  bool Contains(std::string_view key) const {
    return key >= std::string_view(start) && (!end.has_value() || key < std::string_view(*end));
  }
  bool unbounded() const { return !end.has_value(); }
  // True unless the range holds no key: an end at or before the start.
  bool Valid() const { return !end.has_value() || start < *end; }
  // True if some key is in both.
  bool Overlaps(const KeyRange& o) const {
    return (!end.has_value() || o.start < *end) && (!o.end.has_value() || start < *o.end);
  }
  // "[<start hex>, <end hex>)", with "end" for the unbounded end: for messages and logs.
  std::string ToString() const;

  bool operator==(const KeyRange& o) const = default;
};

}  // namespace nova
