#include "ltc/server/ltc_server.h"

#include <algorithm>

#include <glog/logging.h>

#include "common/clock.h"
#include "common/wire/message.h"
#include "logc/client/log_client.h"
#include "stoc/client/stoc_client.h"

namespace nova::ltc {
namespace {

RangeTableOptions RangeTableOptionsOf(const LtcServerOptions& o) {
  RangeTableOptions r;
  r.recovery_wait = o.recovery_wait;
  r.max_waiting_for_recovery = o.client_threads / 2;  // at most half the workers wait
  return r;
}

ConnectionListenerOptions ListenerOptionsOf(const LtcServerOptions& o) {
  ConnectionListenerOptions l;
  l.host = o.host;
  l.port = o.port;
  l.max_connections = o.max_connections;
  l.max_inflight_per_connection = o.max_inflight_per_connection;
  l.max_request_bytes = o.limits.max_request_bytes;
  l.write_timeout = o.write_timeout;
  l.client_secret = o.client_secret;
  l.reader_spin = o.reader_spin;
  return l;
}

}  // namespace

LtcServer::LtcServer(LtcServerOptions options, AssignmentSource* source, BackendFactory factory,
                     MetricsRegistry* metrics)
    : options_(std::move(options)), source_(source), metrics_(metrics),
      request_metrics_(metrics),
      ranges_(std::move(factory),
              [this] {
                RangeTableOptions r = RangeTableOptionsOf(options_);
                r.on_fenced = [this](uint32_t range, uint64_t owner_epoch) {
                  // Under a backend's locks maybe: the applier thread closes the range.
                  MutexLock l(&pending_mu_);
                  fenced_.emplace_back(range, owner_epoch);
                  pending_cv_.NotifyAll();
                };
                return r;
              }()),
      listener_(ListenerOptionsOf(options_),
                [this](const std::shared_ptr<ClientConn>& conn, uint16_t type,
                       uint64_t request_id, std::string payload, bool may_run_inline) {
                  return Dispatch(conn, type, request_id, std::move(payload), may_run_inline);
                },
                &metrics_) {}

LtcServer::~LtcServer() { Shutdown(); }

Status LtcServer::Init() {
  auto a = source_->Current();
  if (!a.ok()) return a.status().Prepend("reading the range assignment");
  // The first assignment may carry epoch 0 (a static one); Apply wants newer. Its ranges
  // are published at once and opened in the background (recovering their memtables from
  // the logs may take a while): requests for a range wait for it, others are served
  // meanwhile.
  return ranges_.Init(a.value());
}

Status LtcServer::Start() {
  pool_ = std::make_unique<ThreadPool>("ltc-client", static_cast<size_t>(options_.client_threads),
                                       options_.max_queue);
  compact_pool_ = std::make_unique<ThreadPool>(
      "ltc-compact", static_cast<size_t>(std::max(1, options_.compact_threads)),
      std::max<size_t>(1, options_.max_compact_queue));
  NOVA_RETURN_NOT_OK(listener_.Start());
  applier_ = std::thread([this] { ApplyLoop(); });
  source_->Watch([this](const LtcAssignment& a) {
    MutexLock l(&pending_mu_);
    if (!pending_ || a.epoch > pending_->epoch) pending_ = a;
    pending_cv_.NotifyAll();
  });
  return Status::OK();
}

void LtcServer::ApplyLoop() {
  constexpr auto kFirstRetry = std::chrono::milliseconds(100);
  constexpr auto kMaxRetry = std::chrono::milliseconds(5000);
  auto delay = kFirstRetry;
  MutexLock l(&pending_mu_);
  while (!stopping_) {
    if (!fenced_.empty()) {
      std::vector<std::pair<uint32_t, uint64_t>> fenced;
      fenced.swap(fenced_);
      l.Unlock();
      for (const auto& [range, owner_epoch] : fenced) ranges_.Fence(range, owner_epoch);
      l.Lock();
      continue;
    }
    if (!pending_) {
      pending_cv_.Wait(&l, [&]() REQUIRES(pending_mu_) {
        return pending_.has_value() || !fenced_.empty() || stopping_.load();
      });
      continue;
    }
    const LtcAssignment a = *pending_;
    l.Unlock();
    if (a.epoch > ranges_.epoch() && options_.on_assignment) options_.on_assignment(a);
    Status s = a.epoch <= ranges_.epoch() ? Status::OK() : ApplyAssignment(a);
    l.Lock();
    if (s.ok()) {
      if (pending_ && pending_->epoch == a.epoch) pending_.reset();
      delay = kFirstRetry;
      continue;
    }
    LOG(ERROR) << "range assignment of epoch " << a.epoch << " not applied (retried in "
               << delay.count() << " ms): " << s.ToString();
    // Woken early by a newer assignment or shutdown.
    pending_cv_.WaitUntil(&l, MonoNow() + delay, [&]() REQUIRES(pending_mu_) {
      return stopping_.load() || !fenced_.empty() || (pending_ && pending_->epoch != a.epoch);
    });
    delay = std::min(delay * 2, kMaxRetry);
  }
}

void LtcServer::Shutdown() {
  if (shut_down_.exchange(true)) return;
  source_->Unwatch();
  stopping_ = true;
  // Background openers quit now rather than after the applier is joined: one retrying a
  // range that will not open must not make the stop wait for its next attempt.
  ranges_.BeginStopOpening();
  {
    MutexLock l(&pending_mu_);
    pending_cv_.NotifyAll();
  }
  if (applier_.joinable()) applier_.join();
  ranges_.StopOpening();  // an open in progress finishes first
  listener_.Shutdown();   // no request is read any more
  if (pool_) pool_->Shutdown();
  if (compact_pool_) compact_pool_->Shutdown();  // running ones stop at their next step
  ranges_.Clear();  // closes the ranges no request holds any more
}

Status LtcServer::Dispatch(const std::shared_ptr<ClientConn>& conn, uint16_t type,
                           uint64_t request_id, std::string payload, bool may_run_inline) {
  const bool compaction = type == static_cast<uint16_t>(ClientMsg::kCompactRange);
  if (may_run_inline && !compaction && options_.serve_inline) {
    // One request at a time on this connection (a synchronous client): no worker to wake.
    metrics_.served_inline->Increment();
    Serve(conn, type, request_id, std::move(payload), std::nullopt);
    return Status::OK();
  }
  ThreadPool* pool = compaction ? compact_pool_.get() : pool_.get();
  Status sub = pool->Submit(
      [this, conn, type, request_id, p = std::move(payload), queued_at = MonoNow()]() mutable {
        Serve(conn, type, request_id, std::move(p), queued_at);
      });
  if (sub.ok()) return sub;
  return sub.IsResourceExhausted() ? Status::ResourceExhausted("LTC overloaded: request queue full")
                                   : Status::Unavailable("LTC shutting down");
}

void LtcServer::Serve(const std::shared_ptr<ClientConn>& conn, uint16_t type,
                      uint64_t request_id, std::string payload,
                      std::optional<MonoTime> queued_at) {
  // Steady-clock readings (vDSO, no system call) and the thread's own tallies of StoC reads
  // and log appends: cheap enough for every request. The thread's CPU clock (a system call)
  // only for one request in kCpuSampleEvery of each thread.
  thread_local uint32_t served_here = 0;  // by this thread: picks the CPU samples
  const bool cpu_sample = ++served_here % kCpuSampleEvery == 0;
  const uint64_t cpu_before = cpu_sample ? ThreadCpuNanos() : 0;
  const MonoTime start = MonoNow();
  const uint64_t stoc_before = stoc::StocClient::ThreadReadNanos();
  const uint64_t log_before = logc::LogClient::ThreadAppendNanos();
  Result<std::string> resp = Respond(conn.get(), type, payload);
  const MonoTime handled = MonoNow();
  if (resp.ok()) {
    conn->Send(wire::EncodeMessage(type, request_id, resp.value(), wire::kFlagResponse));
  } else {
    conn->SendError(type, request_id, resp.status());
  }
  const MonoTime sent = MonoNow();
  const uint64_t cpu_after = cpu_sample ? ThreadCpuNanos() : 0;
  if (type != static_cast<uint16_t>(ClientMsg::kCompactRange)) {  // long by nature: apart
    const auto ns = [](MonoClock::duration d) {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    };
    RequestTimes times;
    if (queued_at) times.wait_ns = ns(start - *queued_at);
    times.engine_ns = ns(handled - start);
    times.stoc_read_ns = stoc::StocClient::ThreadReadNanos() - stoc_before;
    times.log_append_ns = logc::LogClient::ThreadAppendNanos() - log_before;
    times.send_ns = ns(sent - handled);
    if (cpu_sample) {
      times.cpu_sampled = true;
      times.thread_cpu_ns = cpu_after - cpu_before;
    }
    request_metrics_.Record(ClassOfRequest(type), times);
  }
  conn->EndRequest(payload.size());
}

Result<std::string> LtcServer::Respond(ClientConn* conn, uint16_t type,
                                       const std::string& payload) {
  ClientRequest r;
  Status s = DecodeClientRequest(type, payload, &r);
  if (s.ok()) s = CheckClientLimits(r, options_.limits);
  if (!s.ok()) return s;
  Result<std::string> resp = Handle(conn, r);
  if (resp.status().IsFenced()) {
    // A newer owner has the range (never shown to clients as such): the client re-reads
    // the configuration and goes there.
    resp = FormatWrongRange(ranges_.epoch(), resp.status().message());
  }
  return resp;
}

}  // namespace nova::ltc
