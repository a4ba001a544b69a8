// nova_coordinator: owns the cluster configuration in ZooKeeper (docs/coordinator.md).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/daemon/daemon_init.h"
#include "common/metrics.h"
#include "coordinator/coordinator.h"
#include "coordinator/zk_flags.h"


DEFINE_string(coordinator_id, "",
              "This coordinator's id: its member and election candidate name, "
              "[A-Za-z0-9._-]{1,64}. Empty: coord-<pid>");
DEFINE_uint32(coordinator_min_ltcs, 1,
              "Assign ranges only once this many LTCs have registered, so a new cluster "
              "spreads its ranges (omega = ranges / LTCs per LTC) over all of them");
DEFINE_int32(coordinator_recheck_interval_ms, 2000,
             "Re-check election and members this often without a ZooKeeper event, ms "
             "(a safety net; changes are normally seen through watches)");

DEFINE_int32(coordinator_ltc_failover_delay_ms, 0,
             "Failover: an LTC whose ZooKeeper node has been gone this long (the node goes "
             "--zk_session_timeout_ms after the LTC dies) loses its ranges to the live LTCs, "
             "least loaded first; they recover them from the MANIFEST and the logs. ms, >= 0");
DEFINE_int32(coordinator_ltc_grace_ms, 60000,
             "An LTC gone this long leaves the configuration; if it comes back later it "
             "registers as a new, empty member. ms, > 0");
DEFINE_int32(coordinator_stoc_grace_ms, 60000,
             "A StoC not registered for this long leaves the configuration (the LTCs then "
             "repair the table copies it held onto the other StoCs), but only while a "
             "majority of the configuration's StoCs are live, and never the last one; if it "
             "comes back later it joins as a new member. ms, >= 0; 0: never");
DEFINE_int32(coordinator_leader_settle_ms, 0,
             "A coordinator that just became the leader fails over no LTC before this long "
             "(LTCs may be re-registering after a restart). 0: --zk_session_timeout_ms");

DEFINE_int32(coordinator_max_concurrent_migrations, 4,
             "Live migrations (nova_admin migrate-range, drain-ltc, remove-ltc, rebalance) "
             "that run at once; the others wait in the configuration's queue. > 0");
DEFINE_int32(coordinator_migration_timeout_ms, 60000,
             "A live migration still running after this long is dropped (rolled back: the "
             "source LTC serves on; re-run the nova_admin command to retry). ms, > 0");

int main(int argc, char** argv) {
  nova::InitDaemon(&argc, &argv,
                   "nova_coordinator --zk=host:port[,...] --cluster=NAME [flags]: joins the "
                   "leader election of the cluster's coordinators; the leader assigns ranges "
                   "to registered LTCs and publishes the configuration in ZooKeeper");
  if (argc > 1) {
    std::fprintf(stderr, "nova_coordinator: unexpected argument '%s' (see --help)\n", argv[1]);
    return nova::kBadFlagsExitCode;
  }
  auto store = nova::coordinator::ConfigStoreOptionsFromFlags();
  if (!store.ok()) {
    std::fprintf(stderr, "nova_coordinator: %s\n", store.status().ToString().c_str());
    return nova::kBadFlagsExitCode;
  }
  if (FLAGS_coordinator_recheck_interval_ms <= 0) {
    std::fprintf(stderr, "nova_coordinator: --coordinator_recheck_interval_ms must be > 0\n");
    return nova::kBadFlagsExitCode;
  }
  if (FLAGS_coordinator_ltc_failover_delay_ms < 0 || FLAGS_coordinator_ltc_grace_ms <= 0 ||
      FLAGS_coordinator_leader_settle_ms < 0 || FLAGS_coordinator_stoc_grace_ms < 0) {
    std::fprintf(stderr,
                 "nova_coordinator: --coordinator_ltc_failover_delay_ms, "
                 "--coordinator_leader_settle_ms and --coordinator_stoc_grace_ms must be >= 0, "
                 "--coordinator_ltc_grace_ms > 0\n");
    return nova::kBadFlagsExitCode;
  }
  if (FLAGS_coordinator_max_concurrent_migrations <= 0 ||
      FLAGS_coordinator_migration_timeout_ms <= 0) {
    std::fprintf(stderr,
                 "nova_coordinator: --coordinator_max_concurrent_migrations and "
                 "--coordinator_migration_timeout_ms must be > 0\n");
    return nova::kBadFlagsExitCode;
  }
  nova::coordinator::CoordinatorOptions options;
  options.max_concurrent_migrations =
      static_cast<size_t>(FLAGS_coordinator_max_concurrent_migrations);
  options.migration_timeout =
      std::chrono::milliseconds(FLAGS_coordinator_migration_timeout_ms);
  options.ltc_failover_delay = std::chrono::milliseconds(FLAGS_coordinator_ltc_failover_delay_ms);
  options.ltc_grace = std::chrono::milliseconds(FLAGS_coordinator_ltc_grace_ms);
  options.stoc_grace = std::chrono::milliseconds(FLAGS_coordinator_stoc_grace_ms);
  options.leader_settle = std::chrono::milliseconds(FLAGS_coordinator_leader_settle_ms);
  options.store = store.value();
  options.id =
      FLAGS_coordinator_id.empty() ? "coord-" + std::to_string(::getpid()) : FLAGS_coordinator_id;
  options.min_ltcs = FLAGS_coordinator_min_ltcs;
  options.recheck_interval = std::chrono::milliseconds(FLAGS_coordinator_recheck_interval_ms);
  if (nova::Status s = nova::coordinator::ValidateMemberId(options.id); !s.ok()) {
    std::fprintf(stderr, "nova_coordinator: --coordinator_id: %s\n", s.ToString().c_str());
    return nova::kBadFlagsExitCode;
  }

  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // threads started below inherit it

  nova::MetricsRegistry metrics;
  auto http = nova::StartMetricsServer(&metrics);
  if (!http.ok()) {
    LOG(ERROR) << http.status().ToString();
    return 1;
  }
  if (http.value()) options.info.addresses["metrics"] = nova::MetricsAddress(http.value().get());

  nova::coordinator::Coordinator coordinator(options);
  nova::Status s = coordinator.Init();
  if (!s.ok()) {
    LOG(ERROR) << "nova_coordinator: " << s.ToString();
    return s.code() == nova::Status::Code::kInvalidArgument ? nova::kBadFlagsExitCode : 1;
  }
  s = coordinator.Start();
  if (!s.ok()) {
    LOG(ERROR) << "nova_coordinator: " << s.ToString();
    return 1;
  }
  metrics.RegisterCallbackGauge("nova_coordinator_is_leader",
                                "1 while this coordinator leads the cluster's coordinators",
                                [&] { return coordinator.is_leader() ? 1.0 : 0.0; });
  metrics.RegisterCallbackGauge(
      "nova_coordinator_published_epoch",
      "Epoch of the last configuration this coordinator published (0: none)",
      [&] { return static_cast<double>(coordinator.published_epoch()); });
  metrics.RegisterCallbackGauge("nova_coordinator_zk_connected",
                                "1 while the ZooKeeper session is connected",
                                [&] { return coordinator.zk_connected() ? 1.0 : 0.0; });
  LOG(INFO) << "nova_coordinator " << options.id << " running for cluster " << options.store.cluster
            << " (ZooKeeper " << options.store.zk_servers << ")";

  int sig = 0;
  sigwait(&stop_signals, &sig);
  LOG(INFO) << "nova_coordinator: signal " << sig << ", shutting down";
  // The gauges read the coordinator: remove them before it goes.
  for (const char* gauge : {"nova_coordinator_is_leader", "nova_coordinator_published_epoch",
                            "nova_coordinator_zk_connected"}) {
    metrics.UnregisterCallbackGauge(gauge);
  }
  coordinator.Shutdown();
  return 0;
}
