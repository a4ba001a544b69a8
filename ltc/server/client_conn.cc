#include "ltc/server/client_conn.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <glog/logging.h>

#include "common/clock.h"
#include "common/transport/tcp_socket.h"
#include "common/wire/message.h"

namespace nova::ltc {

ClientMetrics::ClientMetrics(MetricsRegistry* registry)
    : requests(registry->GetCounter("ltc_client_requests_total", "Client requests received")),
      request_errors(registry->GetCounter("ltc_client_request_errors_total",
                                          "Client requests answered with an error")),
      wrong_range(registry->GetCounter("ltc_client_wrong_range_total",
                                       "Client requests answered WrongRange")),
      connections_refused(registry->GetCounter("ltc_client_connections_refused_total",
                                               "Connections refused (--ltc_max_connections)")),
      auth_refused(registry->GetCounter(
          "ltc_client_auth_refused_total",
          "Connections refused client authentication (no or a wrong client secret)")),
      served_inline(registry->GetCounter(
          "ltc_client_served_inline_total",
          "Client requests served on their connection's reader thread (no hand-off to a "
          "worker: the connection had no other request in flight)")),
      connections(registry->GetGauge("ltc_client_connections", "Open client connections")) {}

ClientConn::ClientConn(int fd, uint64_t id, std::chrono::milliseconds write_timeout,
                       ClientMetrics* metrics)
    : fd_(fd), id_(id), write_timeout_(write_timeout), metrics_(metrics) {}

ClientConn::~ClientConn() {
  for (auto& [sid, snap] : snapshots_) {
    if (auto b = snap.backend.lock()) b->ReleaseSnapshot(snap.handle);
  }
  ::close(fd_);
}

void ClientConn::Send(const std::string& message) {
  MutexLock l(&write_mu_);
  if (broken_) return;
  Status s = transport::WriteFully(fd_, message.data(), message.size(),
                                   Deadline::After(write_timeout_));
  if (!s.ok()) {
    broken_ = true;
    VLOG(1) << "client connection " << id_ << ": " << s.ToString();
    ::shutdown(fd_, SHUT_RDWR);  // its reader ends; nothing more is sent
  }
}

void ClientConn::SendError(uint16_t type, uint64_t request_id, const Status& error) {
  metrics_->request_errors->Increment();
  if (error.IsWrongRange()) metrics_->wrong_range->Increment();
  Send(wire::EncodeErrorResponse(type, request_id, error));
}

bool ClientConn::BeginRequest(int max_inflight, uint64_t bytes, uint64_t max_inflight_bytes,
                              bool* alone) {
  MutexLock l(&mu_);
  room_cv_.Wait(&l, [&]() REQUIRES(mu_) {
    if (stop_reading_) return true;
    // A request that would overflow the byte budget waits only while big requests are in
    // flight, not behind small ones (a CompactRange may be in flight for minutes): memory
    // stays below about twice the budget, and a request bigger than the budget is never
    // refused (it goes alone).
    return inflight_ == 0 ||
           (inflight_ < max_inflight && (inflight_bytes_ + bytes <= max_inflight_bytes ||
                                         (bytes <= max_inflight_bytes &&
                                          inflight_bytes_ <= max_inflight_bytes / 16)));
  });
  if (stop_reading_) return false;
  *alone = inflight_ == 0;
  ++inflight_;
  inflight_bytes_ += bytes;
  return true;
}

void ClientConn::EndRequest(uint64_t bytes) {
  MutexLock l(&mu_);
  --inflight_;
  inflight_bytes_ -= std::min(bytes, inflight_bytes_);
  room_cv_.NotifyAll();
}

void ClientConn::StopReading() {
  ::shutdown(fd_, SHUT_RDWR);
  MutexLock l(&mu_);
  stop_reading_ = true;
  room_cv_.NotifyAll();
}

void ClientConn::AddSnapshot(uint64_t snapshot_id, Snap snap) {
  MutexLock l(&mu_);
  snapshots_[snapshot_id] = std::move(snap);
}

Status ClientConn::FindSnapshot(uint64_t snapshot_id, Snap* out) const {
  MutexLock l(&mu_);
  auto it = snapshots_.find(snapshot_id);
  if (it == snapshots_.end()) {
    return Status::NotFound("no snapshot " + std::to_string(snapshot_id) + " on this connection");
  }
  *out = it->second;
  return Status::OK();
}

Status ClientConn::TakeSnapshot(uint64_t snapshot_id, Snap* out) {
  MutexLock l(&mu_);
  auto it = snapshots_.find(snapshot_id);
  if (it == snapshots_.end()) {
    return Status::NotFound("no snapshot " + std::to_string(snapshot_id) + " on this connection");
  }
  *out = std::move(it->second);
  snapshots_.erase(it);
  return Status::OK();
}

}  // namespace nova::ltc
