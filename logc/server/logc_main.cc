// nova_logc: the logging component daemon. See docs/logc.md and docs/operations.md.
#include <signal.h>

#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/daemon/daemon_init.h"
#include "common/daemon/transport_flags.h"
#include "common/metrics.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "coordinator/zk_flags.h"
#include "logc/server/logc_server.h"

DECLARE_string(zk);

DEFINE_string(logc_id, "0", "This LogC's id in the cluster (its node name is logc-<id>)");
DEFINE_string(logc_dir, "",
              "Data directory: persisted log files live in <dir>/logs. Required with "
              "--logc_persist");
DEFINE_bool(logc_persist, false,
            "Accept persisted logs (log modes disk and memory+disk): appends are written to "
            "--logc_dir and fdatasync'd before they are acknowledged");
DEFINE_uint64(logc_memory_limit_mb, 1024,
              "Memory all log file regions may use together, MiB (one region per log segment)");
DEFINE_uint64(logc_max_segment_mb, 1024, "Largest log segment a client may open, MiB");
DEFINE_int32(logc_storage_threads, 2,
             "Storage threads: write and fdatasync persisted logs, serve disk reads");
DEFINE_int32(logc_control_threads, 1, "Threads for open/list/delete/stats requests");

namespace {
constexpr uint64_t kMiB = 1ull << 20;

int BadFlags(const std::string& why) {
  std::fprintf(stderr, "nova_logc: %s (see --help)\n", why.c_str());
  return nova::kBadFlagsExitCode;
}
}  // namespace

int main(int argc, char** argv) {
  nova::InitDaemon(&argc, &argv,
                   "nova_logc --logc_id=ID --cluster_secret_file=FILE [--logc_persist "
                   "--logc_dir=DIR] [flags]\n"
                   "The Nova-LSM logging component: hosts replicated log files of LTC "
                   "memtables in memory and, with --logc_persist, on disk.");
  ::signal(SIGXFSZ, SIG_IGN);  // a write past a file-size limit fails with EFBIG instead
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // threads started below inherit it

  nova::Status valid = nova::coordinator::ValidateMemberId(FLAGS_logc_id);
  if (!valid.ok()) return BadFlags("--logc_id: " + valid.ToString());
  if (FLAGS_logc_persist && FLAGS_logc_dir.empty()) {
    return BadFlags("--logc_persist needs --logc_dir");
  }
  if (FLAGS_logc_memory_limit_mb == 0) return BadFlags("--logc_memory_limit_mb must be > 0");
  if (FLAGS_logc_max_segment_mb == 0) return BadFlags("--logc_max_segment_mb must be > 0");
  if (FLAGS_logc_storage_threads < 1 || FLAGS_logc_control_threads < 1) {
    return BadFlags("--logc_storage_threads and --logc_control_threads must be >= 1");
  }
  nova::logc::LogcOptions options;
  options.logc_id = FLAGS_logc_id;
  options.dir = FLAGS_logc_dir;
  options.persist = FLAGS_logc_persist;
  auto transport = nova::TransportOptionsFromFlags("logc-" + FLAGS_logc_id);
  if (!transport.ok()) return BadFlags(transport.status().ToString());
  options.transport = transport.value();
  options.memory_limit_bytes = FLAGS_logc_memory_limit_mb * kMiB;
  options.max_segment_bytes = FLAGS_logc_max_segment_mb * kMiB;
  options.storage_threads = FLAGS_logc_storage_threads;
  options.control_threads = FLAGS_logc_control_threads;

  nova::MetricsRegistry metrics;
  nova::logc::LogcServer server(options, &metrics);
  nova::Status s = server.Init();
  if (s.ok()) s = server.Start();
  if (!s.ok()) {
    LOG(ERROR) << "nova_logc failed to start: " << s.ToString();
    std::fprintf(stderr, "nova_logc: %s\n", s.ToString().c_str());
    return 1;
  }
  auto http = nova::StartMetricsServer(&metrics);
  if (!http.ok()) {
    LOG(ERROR) << http.status().ToString();
    return 1;
  }
  // With --zk the LogC registers itself; the coordinator adds it to the configuration, where
  // LTCs find it.
  auto config_store = nova::coordinator::RegisterDaemonFromFlags(
      nova::coordinator::MemberKind::kLogc, options.logc_id, server.address(),
      nova::MetricsAddress(http.value().get()));
  if (!config_store.ok()) {
    std::fprintf(stderr, "nova_logc: %s\n", config_store.status().ToString().c_str());
    return nova::kBadFlagsExitCode;
  }
  // The line harnesses and scripts wait for (see docs/operations.md).
  std::printf("LISTEN %s\n", server.address().c_str());
  std::fflush(stdout);
  LOG(INFO) << "nova_logc " << options.logc_id << " serving on " << server.address()
            << (options.persist ? " (persisted logs in " + options.dir + ")" : "");

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LOG(INFO) << "nova_logc: signal " << sig << ", shutting down";
  if (http.value()) http.value()->Shutdown();
  server.Shutdown();
  if (config_store.value()) config_store.value()->Shutdown();
  return 0;
}
