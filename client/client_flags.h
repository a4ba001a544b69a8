// Command-line flags shared by the client tools (nova_cli, nova_admin):
//   --client_secret_file=FILE   the client secret the LTCs require (their
//                               --ltc_client_secret_file), proven on connect
// Only tools link this (nova_client_flags); the library takes ClientOptions::client_secret.
#pragma once

#include <string>

#include "common/status.h"

namespace nova::client {

// The secret in --client_secret_file (common/secret_file.h: trailing newlines stripped, a
// WARNING unless mode 0600), or "" without the flag. NotFound / InvalidArgument naming the
// flag and the path if it cannot be read or is empty. REQUIRES: gflags were parsed.
Result<std::string> ClientSecretFromFlags();

}  // namespace nova::client
