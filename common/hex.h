// Bytes as text: lower-case hex (config documents, split points, nova_cli --hex, secrets)
// and an escaped printable form for messages and logs.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova {

// Two lower-case hex digits per byte.
std::string HexEncode(std::string_view bytes);
// The bytes of `hex` (upper or lower case digits). InvalidArgument on an odd length or a
// character that is not a hex digit.
Result<std::string> HexDecode(std::string_view hex);
// Printable ASCII as is (except '\'), every other byte as \xNN; at most `max_bytes` bytes
// of input, then "..." if there were more.
std::string EscapeBytes(std::string_view bytes,
                        size_t max_bytes = std::numeric_limits<size_t>::max());

}  // namespace nova
