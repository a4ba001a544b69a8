// Splitting flag values such as "a,b,c" (lists of addresses, ids, numbers).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nova {

// The pieces of `s` between occurrences of `sep`, empty pieces dropped:
// SplitNonEmpty("a,,b,", ',') == {"a", "b"}; SplitNonEmpty("", ',') == {}.
std::vector<std::string> SplitNonEmpty(std::string_view s, char sep);

}  // namespace nova
