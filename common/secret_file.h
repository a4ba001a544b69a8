// Reading a secret from a file named by a flag (the cluster secret, the LTC client secret,
// the ZooKeeper credential): the one place that decides what such a file may hold and how
// it should be protected (docs/security.md).
//
// Thread safety: the function is pure (it reads the file).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace nova {

// The contents of `path` with trailing newlines ("\n", "\r\n") stripped, so that a file
// written by `echo` works. NotFound if it cannot be read, InvalidArgument if it holds
// nothing; both name `what` (e.g. "--ltc_client_secret_file") and the path. Logs a
// WARNING if the file is readable or writable by group or others (mode 0600 is meant).
Result<std::string> ReadSecretFile(const std::string& path, std::string_view what);

}  // namespace nova
