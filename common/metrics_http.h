// A small HTTP server (cpp-httplib) that exports a MetricsRegistry:
//
//   GET /metrics   the registry in the Prometheus text format
//                  (Content-Type: text/plain; version=0.0.4)
//   GET /debug     the registry's debug sections (MetricsRegistry::DumpDebug), plain text
//   GET /healthz   "ok" while the process is serving
//
// It runs on its own threads (a listener and two request workers) and never touches the
// data path. httplib.h is included only by metrics_http.cc: it is a heavy header.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/status.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace nova {

// Lifecycle: construct (cannot fail), Start() (binds and serves), Shutdown() (idempotent;
// the destructor calls it). Thread-safe: Start, Shutdown and port may be called from any
// thread, concurrently.
class MetricsHttpServer {
 public:
  // `registry` must outlive this server. `port` 0 picks an ephemeral port.
  MetricsHttpServer(MetricsRegistry* registry, std::string host, int port);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds host:port and starts serving on a background thread. The socket does not use
  // SO_REUSEPORT (httplib's default), so a port another process listens on is an error
  // rather than a silently split scrape.
  // Returns OK once the server accepts connections; IOError naming host:port if it cannot
  // bind; IllegalState if already started or shut down.
  Status Start();

  // Stops accepting, waits for in-flight requests and joins the threads. Safe to call
  // more than once and before Start().
  void Shutdown();

  // The bound port (the ephemeral one when constructed with 0); -1 before Start()
  // succeeds.
  int port() const { return bound_port_.load(std::memory_order_acquire); }

 private:
  // Constant after construction.
  MetricsRegistry* const registry_;  // not owned; must outlive this
  const std::string host_;
  const int requested_port_;

  std::atomic<int> bound_port_{-1};

  Mutex mu_;  // serializes Start and Shutdown
  enum class State { kNew, kRunning, kShutdown };
  State state_ GUARDED_BY(mu_) = State::kNew;
  std::unique_ptr<httplib::Server> server_ GUARDED_BY(mu_);
  std::thread listener_ GUARDED_BY(mu_);
};

}  // namespace nova
