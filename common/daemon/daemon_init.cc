#include "common/daemon/daemon_init.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/fault_point.h"

DEFINE_string(fault_points, "",
              "Fault points to arm at start-up, for tests: comma-separated "
              "<name>=<action>[:<option>...] entries, action error | delay:<N>ms | abort, "
              "options once | p=<probability> | after=<hits>; e.g. "
              "'stoc.write=error:p=0.1,ltc.flush=delay:200ms'. Empty: none.");
DEFINE_int32(metrics_port, -1,
             "TCP port of the HTTP server exporting /metrics (Prometheus) and /healthz; "
             "-1 disables it, 0 picks a free port (logged).");
DEFINE_string(metrics_host, "127.0.0.1", "Address the /metrics HTTP server binds to.");

namespace nova {

namespace {

// Keep in step with project(VERSION) in the top-level CMakeLists.txt; a build may
// override it with -DNOVA_VERSION_STRING=...
#ifndef NOVA_VERSION_STRING
#define NOVA_VERSION_STRING "0.1.0"
#endif
constexpr char kVersion[] = NOVA_VERSION_STRING;

constexpr int kMaxPort = 65535;
constexpr int kMetricsDisabled = -1;

}  // namespace

void InitDaemon(int* argc, char*** argv, const char* usage) {
  gflags::SetUsageMessage(usage);
  gflags::SetVersionString(kVersion);
  // Daemons log to stderr unless told otherwise; changing the default (rather than the
  // value) keeps --help truthful and lets --logtostderr=false win.
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(argc, argv, /*remove_flags=*/true);
  if (!FLAGS_log_dir.empty() && gflags::GetCommandLineFlagInfoOrDie("logtostderr").is_default) {
    FLAGS_logtostderr = false;  // --log_dir alone means "log to files there"
  }
  google::InitGoogleLogging((*argv)[0]);
  google::InstallFailureSignalHandler();

  Status s = FaultPoints::Arm(FLAGS_fault_points);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: bad --fault_points: %s\n", (*argv)[0], s.ToString().c_str());
    std::exit(kBadFlagsExitCode);
  }
}

Result<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(MetricsRegistry* registry) {
  if (FLAGS_metrics_port == kMetricsDisabled) {
    LOG(INFO) << "metrics HTTP server disabled (--metrics_port=-1)";
    return std::unique_ptr<MetricsHttpServer>();
  }
  if (FLAGS_metrics_port < kMetricsDisabled || FLAGS_metrics_port > kMaxPort) {
    return Status::InvalidArgument("--metrics_port=" + std::to_string(FLAGS_metrics_port) +
                                   ": want -1 (disabled), 0 (any free port) or 1..65535");
  }
  auto server =
      std::make_unique<MetricsHttpServer>(registry, FLAGS_metrics_host, FLAGS_metrics_port);
  NOVA_RETURN_NOT_OK_PREPEND(server->Start(), "--metrics_port");
  LOG(INFO) << "serving /metrics on http://" << FLAGS_metrics_host << ":" << server->port()
            << "/metrics";
  return server;
}

std::string MetricsAddress(const MetricsHttpServer* server) {
  return server != nullptr ? FLAGS_metrics_host + ":" + std::to_string(server->port()) : "";
}

}  // namespace nova
