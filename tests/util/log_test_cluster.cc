#include "tests/util/log_test_cluster.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

namespace nova::test {

namespace {

constexpr int kStocs = 2;
// Each /metrics GET is on loopback: a second means the LTC is not serving.
constexpr std::chrono::seconds kMetricsTimeout(1);
constexpr int kHttpOk = 200;

// A loopback port that was free a moment ago (as tests/stoc_itest.cc picks one), or 0.
// Chosen by the test rather than by the daemon (--metrics_port=0) so that it stays the
// same across restarts.
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace

LogTestCluster::LogTestCluster(LogTestClusterOptions options) : options_(std::move(options)) {}

LogTestCluster::~LogTestCluster() { Shutdown(); }

Status LogTestCluster::Start() {
  dir_ = TestTempDir(options_.name);
  auto secret = WriteClusterSecret(dir_);
  if (!secret.ok()) return secret.status();
  std::string stoc_list, logc_list;
  for (uint32_t id = 0; id < kStocs; ++id) {
    stocs_.push_back(std::make_unique<ExternalDaemon>(StocDaemonOptions(
        dir_, secret.value(), id, {"--stoc_memory_limit_mb=256", "--stoc_file_buffer_mb=32"})));
    NOVA_RETURN_NOT_OK(stocs_.back()->Start());
    stoc_list +=
        (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" + stocs_.back()->address();
  }
  for (int id = 0; id < options_.logcs; ++id) {
    ExternalDaemonOptions o =
        LogcDaemonOptions(dir_, secret.value(), id, {"--logc_memory_limit_mb=512"});
    if (options_.logc_persist) o.extra_flags.push_back("--logc_persist");
    logcs_.push_back(std::make_unique<ExternalDaemon>(o));
    NOVA_RETURN_NOT_OK(logcs_.back()->Start());
    logc_list +=
        (logc_list.empty() ? "" : ",") + std::to_string(id) + "@" + logcs_.back()->address();
  }
  std::vector<std::string> flags = {"--engine=nova",
                                    "--ltc_id=1",
                                    "--ranges=2",
                                    "--stoc=" + stoc_list,
                                    "--logc=" + logc_list,
                                    "--log_mode=" + options_.log_mode,
                                    "--log_replicas=2",
                                    "--log_timeout_ms=2000",
                                    "--ltc_memtable_size_mb=1",
                                    "--ltc_sstable_size_mb=1",
                                    "--ltc_dranges_per_range=4",
                                    "--ltc_memtables_per_range=12",
                                    "--ltc_recovery_threads=2",
                                    "--ltc_recovery_wait_ms=200"};
  if (options_.ltc_metrics) {
    metrics_port_ = FreeLoopbackPort();
    if (metrics_port_ == 0) return Status::IOError("no free loopback port for the LTC's /metrics");
    flags.push_back("--metrics_port=" + std::to_string(metrics_port_));
  }
  flags.insert(flags.end(), options_.ltc_flags.begin(), options_.ltc_flags.end());
  ltc_ = std::make_unique<ExternalDaemon>(LtcDaemonOptions(dir_, secret.value(), "ltc-1", flags));
  NOVA_RETURN_NOT_OK(ltc_->Start());
  auto client = NewClient(options_.client_timeout);
  if (!client.ok()) return client.status();
  client_ = std::move(client).value();
  return Status::OK();
}

void LogTestCluster::Shutdown() {
  client_.reset();
  if (ltc_) ltc_->Shutdown().IgnoreError();
  logcs_.clear();  // each destructor kills its daemon
  stocs_.clear();
}

Result<std::unique_ptr<client::NovaClient>> LogTestCluster::NewClient(
    std::chrono::milliseconds timeout) {
  client::ClientOptions co;
  co.ltcs = {ltc_->address()};
  co.timeout = timeout;
  auto client = std::make_unique<client::NovaClient>(co);
  NOVA_RETURN_NOT_OK(client->Init());
  return client;
}

Result<std::string> LogTestCluster::LtcMetrics() {
  if (metrics_port_ == 0) return Status::IllegalState("the LTC was started without /metrics");
  httplib::Client http("127.0.0.1", metrics_port_);
  http.set_connection_timeout(kMetricsTimeout);
  http.set_read_timeout(kMetricsTimeout);
  auto res = http.Get("/metrics");
  if (!res) {
    return Status::Unavailable("GET /metrics on port " + std::to_string(metrics_port_) + ": " +
                               httplib::to_string(res.error()));
  }
  if (res->status != kHttpOk) {
    return Status::Unavailable("GET /metrics answered " + std::to_string(res->status));
  }
  return res->body;
}

std::optional<double> MetricValue(const std::string& metrics, const std::string& name) {
  // A sample line is "<name> <value>"; "# HELP <name> ..." and "<name>_total ..." are not.
  const std::string prefix = name + " ";
  for (size_t pos = 0; pos < metrics.size();) {
    size_t end = metrics.find('\n', pos);
    if (end == std::string::npos) end = metrics.size();
    if (metrics.compare(pos, prefix.size(), prefix) == 0) {
      const std::string value = metrics.substr(pos + prefix.size(), end - pos - prefix.size());
      char* parsed_end = nullptr;
      const double v = std::strtod(value.c_str(), &parsed_end);
      if (parsed_end == value.c_str()) return std::nullopt;
      return v;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

}  // namespace nova::test
