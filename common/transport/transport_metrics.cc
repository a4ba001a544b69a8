#include "common/transport/transport_metrics.h"

#include <functional>

namespace nova::transport {

namespace {

struct Exported {
  const char* name;
  const char* help;
  uint64_t TransportStats::*field;
};

constexpr Exported kExported[] = {
    {"xchg_sends_total", "Two-sided messages posted", &TransportStats::sends},
    {"xchg_writes_total", "One-sided writes posted", &TransportStats::writes},
    {"xchg_reads_total", "One-sided reads posted", &TransportStats::reads},
    {"xchg_sent_bytes_total", "Bytes of messages posted", &TransportStats::bytes_sent},
    {"xchg_written_bytes_total", "Bytes of one-sided writes posted", &TransportStats::bytes_written},
    {"xchg_read_bytes_total", "Bytes of one-sided reads posted", &TransportStats::bytes_read},
    {"xchg_failed_ops_total", "Posted operations that completed with an error",
     &TransportStats::failed_ops},
    {"xchg_rejected_remote_ops_total",
     "Peers' one-sided operations refused (rkey, bounds or access)",
     &TransportStats::rejected_remote_ops},
    {"xchg_auth_failures_total", "Connections refused for a bad or missing cluster secret",
     &TransportStats::auth_failures},
    {"xchg_peers_up", "Peers currently connected", &TransportStats::peers_up},
};

}  // namespace

void RegisterTransportMetrics(MetricsRegistry* registry, const Transport* transport) {
  for (const Exported& e : kExported) {
    auto field = e.field;
    registry->RegisterCallbackGauge(e.name, e.help, [transport, field] {
      return static_cast<double>(transport->GetStats().*field);
    });
  }
}

void UnregisterTransportMetrics(MetricsRegistry* registry) {
  for (const Exported& e : kExported) registry->UnregisterCallbackGauge(e.name);
}

}  // namespace nova::transport
