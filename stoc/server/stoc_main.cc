// nova_stoc: the storage component daemon. See docs/stoc.md and docs/operations.md.
#include <signal.h>

#include <cstdio>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/daemon/daemon_init.h"
#include "common/daemon/transport_flags.h"
#include "common/metrics.h"
#include "coordinator/config_store.h"
#include "coordinator/zk_flags.h"
#include "stoc/server/compaction_service.h"
#include "stoc/server/stoc_server.h"

DECLARE_string(zk);

DEFINE_uint32(stoc_id, 0, "This StoC's id in the cluster (its node name is stoc-<id>)");
DEFINE_string(stoc_dir, "", "Data directory (catalog and persistent files). Required");
DEFINE_uint64(stoc_memory_region_mb, 64,
              "Size of each region of an in-memory file, MiB (the paper sizes them like "
              "memtables, tau)");
DEFINE_uint64(stoc_memory_limit_mb, 1024, "Memory all in-memory files may use together, MiB");
DEFINE_uint64(stoc_file_buffer_mb, 256,
              "Registered file buffer for appends and reads of persistent files, MiB");
DEFINE_uint64(stoc_max_block_mb, 16, "Largest block one append or read may carry, MiB");
DEFINE_int32(stoc_storage_threads, 2, "Storage threads: write, fsync and read persistent files");
DEFINE_int32(stoc_compaction_threads, 1,
             "Threads running compactions offloaded by LTCs (jobs run at once)");
DEFINE_int32(stoc_control_threads, 1, "Threads for open/close/delete/list requests");
DEFINE_bool(stoc_local_reads, true,
            "Tell clients on this host where a persistent file's data lies, so they read it "
            "with pread instead of a request per block (docs/stoc.md \"Local reads\"); a client "
            "that may not open the file reads by request. The compaction service reads the "
            "inputs of offloaded compactions on this host so too");

namespace {
constexpr uint64_t kMiB = 1ull << 20;
}  // namespace

int main(int argc, char** argv) {
  nova::InitDaemon(&argc, &argv,
                   "nova_stoc --stoc_dir=DIR --stoc_id=N --cluster_secret_file=FILE [flags]\n"
                   "The Nova-LSM storage component: stores blocks of append-only files in "
                   "memory or on disk for LTCs and LogCs.");
  // Writes past a file-size limit must fail with EFBIG (reported to the client), not kill us.
  ::signal(SIGXFSZ, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // threads started below inherit it

  if (FLAGS_stoc_dir.empty()) {
    std::fprintf(stderr, "nova_stoc: --stoc_dir is required (see --help)\n");
    return nova::kBadFlagsExitCode;
  }
  nova::stoc::StocOptions options;
  options.stoc_id = FLAGS_stoc_id;
  options.dir = FLAGS_stoc_dir;
  options.local_reads = FLAGS_stoc_local_reads;
  auto transport = nova::TransportOptionsFromFlags("stoc-" + std::to_string(FLAGS_stoc_id));
  if (!transport.ok()) {
    std::fprintf(stderr, "nova_stoc: %s\n", transport.status().ToString().c_str());
    return nova::kBadFlagsExitCode;
  }
  options.transport = transport.value();
  options.memory_region_bytes = FLAGS_stoc_memory_region_mb * kMiB;
  options.memory_limit_bytes = FLAGS_stoc_memory_limit_mb * kMiB;
  options.file_buffer_bytes = FLAGS_stoc_file_buffer_mb * kMiB;
  options.max_block_bytes = FLAGS_stoc_max_block_mb * kMiB;
  options.storage_threads = FLAGS_stoc_storage_threads;
  options.compaction_threads = FLAGS_stoc_compaction_threads;
  options.control_threads = FLAGS_stoc_control_threads;

  nova::MetricsRegistry metrics;
  nova::stoc::StocServer server(options, &metrics);
  // Offloaded compactions (docs/stoc.md "Compaction service").
  nova::stoc::CompactionServiceOptions cso;
  cso.stoc_id = options.stoc_id;
  cso.transport = options.transport;
  cso.local_reads = options.local_reads;
  nova::stoc::StocCompactionService compactions(cso, &metrics,
                                                [&server] { return server.CurrentLoad(); });
  nova::Status s = server.Init();
  if (s.ok()) s = compactions.Init();
  if (s.ok()) {
    server.RegisterCompactionService(&compactions);
    s = server.Start();
  }
  if (!s.ok()) {
    LOG(ERROR) << "nova_stoc failed to start: " << s.ToString();
    std::fprintf(stderr, "nova_stoc: %s\n", s.ToString().c_str());
    return 1;
  }
  auto http = nova::StartMetricsServer(&metrics);
  if (!http.ok()) {
    LOG(ERROR) << http.status().ToString();
    return 1;
  }
  // With --zk the StoC registers itself; the coordinator adds it to the configuration, where
  // LTCs find it.
  auto config_store = nova::coordinator::RegisterDaemonFromFlags(
      nova::coordinator::MemberKind::kStoc, std::to_string(options.stoc_id), server.address(),
      nova::MetricsAddress(http.value().get()));
  if (!config_store.ok()) {
    std::fprintf(stderr, "nova_stoc: %s\n", config_store.status().ToString().c_str());
    return nova::kBadFlagsExitCode;
  }
  // The line harnesses and scripts wait for (see docs/operations.md).
  std::printf("LISTEN %s\n", server.address().c_str());
  std::fflush(stdout);
  LOG(INFO) << "nova_stoc " << options.stoc_id << " serving on " << server.address();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LOG(INFO) << "nova_stoc: signal " << sig << ", shutting down";
  if (http.value()) http.value()->Shutdown();
  compactions.Shutdown();  // running jobs fail fast instead of holding up the server
  server.Shutdown();
  if (config_store.value()) config_store.value()->Shutdown();
  return 0;
}
