// Exports a transport's counters (TransportStats) as callback gauges in a MetricsRegistry,
// so every daemon's /metrics shows its exchange traffic:
//   xchg_sends_total, xchg_writes_total, xchg_reads_total, xchg_sent_bytes_total,
//   xchg_written_bytes_total, xchg_read_bytes_total, xchg_failed_ops_total,
//   xchg_rejected_remote_ops_total, xchg_auth_failures_total, xchg_peers_up.
#pragma once

#include "common/metrics.h"
#include "common/transport/transport.h"

namespace nova::transport {

// `transport` must outlive the registration: call UnregisterTransportMetrics before
// destroying it (or destroy the registry first).
void RegisterTransportMetrics(MetricsRegistry* registry, const Transport* transport);
void UnregisterTransportMetrics(MetricsRegistry* registry);

}  // namespace nova::transport
