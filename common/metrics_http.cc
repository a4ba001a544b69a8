#include "common/metrics_http.h"

#include <glog/logging.h>
#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

namespace nova {

namespace {

constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";
// Scrapes are rare and cheap; two workers let /healthz answer while a scrape runs.
constexpr size_t kWorkerThreads = 2;
// One request per connection: a scraper holding a keep-alive connection would otherwise
// pin a worker for httplib's keep-alive timeout.
constexpr size_t kRequestsPerConnection = 1;
// How often Start() checks whether the listener thread is accepting yet.
constexpr auto kStartPollInterval = std::chrono::milliseconds(1);
// pthread names are at most 15 characters.
constexpr char kListenerThreadName[] = "metrics-http";

}  // namespace

MetricsHttpServer::MetricsHttpServer(MetricsRegistry* registry, std::string host, int port)
    : registry_(registry), host_(std::move(host)), requested_port_(port) {}

MetricsHttpServer::~MetricsHttpServer() { Shutdown(); }

Status MetricsHttpServer::Start() {
  MutexLock l(&mu_);
  if (state_ != State::kNew) return Status::IllegalState("metrics HTTP server already started");

  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(kWorkerThreads); };
  server->set_keep_alive_max_count(kRequestsPerConnection);
  // httplib's default sets SO_REUSEPORT, which would let two daemons share a port.
  // SO_REUSEADDR alone still allows a quick restart while old connections linger.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  MetricsRegistry* registry = registry_;
  server->Get("/metrics", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->DumpPrometheus(), kPrometheusContentType);
  });
  server->Get("/debug", [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->DumpDebug(), "text/plain");
  });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });

  errno = 0;
  int port = -1;
  if (requested_port_ == 0) {
    port = server->bind_to_any_port(host_);
  } else if (server->bind_to_port(host_, requested_port_)) {
    port = requested_port_;
  }
  if (port <= 0) {
    int err = errno;
    std::string msg =
        "metrics HTTP server cannot bind " + host_ + ":" + std::to_string(requested_port_);
    if (err != 0) return Status::FromErrno(msg, err);
    return Status::IOError(msg + " (unknown host or address not local?)");
  }

  // httplib::Server::stop() is a no-op until the listener thread marks the server
  // running, so Start() waits for that: afterwards Shutdown() cannot miss it.
  auto listen_done = std::make_shared<std::atomic<bool>>(false);
  httplib::Server* raw = server.get();
  listener_ = std::thread([raw, listen_done] {
    pthread_setname_np(pthread_self(), kListenerThreadName);
    if (!raw->listen_after_bind()) LOG(WARNING) << "metrics HTTP listener stopped with an error";
    listen_done->store(true);
  });
  while (!raw->is_running() && !listen_done->load()) {
    std::this_thread::sleep_for(kStartPollInterval);
  }
  server_ = std::move(server);
  state_ = State::kRunning;
  bound_port_.store(port, std::memory_order_release);
  return Status::OK();
}

void MetricsHttpServer::Shutdown() {
  MutexLock l(&mu_);
  if (state_ == State::kRunning) {
    server_->stop();
    listener_.join();
    server_.reset();
  }
  state_ = State::kShutdown;
}

}  // namespace nova
