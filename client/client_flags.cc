#include "client/client_flags.h"

#include <gflags/gflags.h>

#include "common/secret_file.h"

DEFINE_string(client_secret_file, "",
              "File holding the client secret (mode 0600) that LTCs started with "
              "--ltc_client_secret_file require; proven on connect by an HMAC-SHA256 "
              "challenge, never sent. Empty: none (LTCs that require one refuse the client)");

namespace nova::client {

Result<std::string> ClientSecretFromFlags() {
  if (FLAGS_client_secret_file.empty()) return std::string();
  return ReadSecretFile(FLAGS_client_secret_file, "--client_secret_file");
}

}  // namespace nova::client
