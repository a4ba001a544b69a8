// Command-line flags shared by every process that uses the exchange transport (daemons,
// benchmarks). Only daemons and tools include this; libraries take TransportOptions.
#pragma once

#include <string>

#include "common/status.h"
#include "common/transport/transport.h"

namespace nova {

// Builds TransportOptions from --transport, --xchg_threads, --cluster_secret_file,
// --listen_host, --listen_port, --transport_max_message_mb. Reads the secret file: it must
// exist and be non-empty (trailing newlines are stripped).
Result<transport::TransportOptions> TransportOptionsFromFlags(const std::string& node_name);

// Reads a cluster secret file. NotFound / InvalidArgument (empty) with the path in the message.
Result<std::string> ReadClusterSecret(const std::string& path);

}  // namespace nova
