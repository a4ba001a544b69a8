// Start-up shared by every Nova daemon's main(). This folder is the only code that reads
// gflags: a daemon turns its flags into the Options structs of its components.
//
//   int main(int argc, char** argv) {
//     nova::InitDaemon(&argc, &argv, "nova_stoc --stoc_dir=... : a storage component");
//     nova::MetricsRegistry metrics;
//     auto http = nova::StartMetricsServer(&metrics);
//     if (!http.ok()) { LOG(ERROR) << http.status().ToString(); return 1; }
//     ...
//   }
//
// Flags defined here (see --help):
//   --fault_points   fault point spec armed at start-up (grammar in common/fault_point.h)
//   --metrics_port   port of the /metrics HTTP server; -1 disables it, 0 picks a free one
//   --metrics_host   address it binds to
#pragma once

#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/metrics_http.h"
#include "common/status.h"

namespace nova {

// Exit status of a daemon whose command line is unusable (as for a usage error).
// DO NOT CHANGE: test harnesses match on it.
constexpr int kBadFlagsExitCode = 2;

// Call first thing in main(). Sets the usage message (`usage`, shown by --help, which
// lists every flag) and the version (--version), parses and removes the flags from
// *argc/*argv, initializes glog (to stderr by default; --log_dir without an explicit
// --logtostderr logs to files instead; glog's own flags are honoured), installs glog's
// failure signal handler (stack trace on SIGSEGV and friends) and arms --fault_points.
// On a bad --fault_points spec it prints the reason to stderr and exits with
// kBadFlagsExitCode. `usage` must be a string literal or otherwise outlive the process.
// REQUIRES: called once per process, before any other thread starts.
void InitDaemon(int* argc, char*** argv, const char* usage);

// Starts the /metrics and /healthz HTTP server on --metrics_host:--metrics_port and logs
// the bound port. Returns the running server (the caller owns it; `registry` must
// outlive it), a null pointer when --metrics_port is -1 (disabled), InvalidArgument for
// a port outside [-1, 65535], or the IOError of a failed bind.
// REQUIRES: InitDaemon() was called.
Result<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(MetricsRegistry* registry);

// "host:port" of a server StartMetricsServer() returned (what a daemon publishes as its
// member's "metrics" address), or "" for none (disabled).
std::string MetricsAddress(const MetricsHttpServer* server);

}  // namespace nova
