#include "ltc/server/ltc_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <limits>

#include <glog/logging.h>

#include "common/clock.h"
#include "common/coding.h"
#include "common/transport/tcp_socket.h"
#include "common/wire/message_stream.h"
#include "ltc/server/ltc_server_conn.h"

namespace nova::ltc {
namespace {

// Socket buffer size for client connections.
constexpr int kSocketBufferBytes = 1 << 20;

// The connection-level error message type (request id 0): sent before the LTC closes a
// connection it refuses or cannot parse. DO NOT CHANGE: on the wire.
constexpr uint16_t kConnectionErrorType = 0x0300;

}  // namespace

const LtcServer::Hosted* LtcServer::Table::Find(std::string_view key) const {
  // The last range starting at or before key; it holds key if key is below its end.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), key,
                             [](std::string_view k, const Hosted& h) { return k < h.info.start; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return it->info.Contains(key) ? &*it : nullptr;
}

LtcServer::LtcServer(LtcServerOptions options, AssignmentSource* source, BackendFactory factory,
                     MetricsRegistry* metrics)
    : options_(std::move(options)), source_(source), factory_(std::move(factory)),
      metrics_(metrics) {
  requests_ = metrics_->GetCounter("ltc_client_requests_total", "Client requests received");
  request_errors_ = metrics_->GetCounter("ltc_client_request_errors_total",
                                         "Client requests answered with an error");
  wrong_range_ = metrics_->GetCounter("ltc_client_wrong_range_total",
                                      "Client requests answered WrongRange");
  connections_refused_ = metrics_->GetCounter("ltc_client_connections_refused_total",
                                              "Connections refused (--ltc_max_connections)");
  connections_ = metrics_->GetGauge("ltc_client_connections", "Open client connections");
  table_ = std::make_shared<Table>();
}

LtcServer::~LtcServer() { Shutdown(); }

std::shared_ptr<RangeSlot> RangeSlot::Ready(uint32_t range_id, std::shared_ptr<RangeBackend> b) {
  auto slot = std::make_shared<RangeSlot>(range_id);
  slot->Set(std::move(b));
  return slot;
}

void RangeSlot::Set(std::shared_ptr<RangeBackend> backend) {
  std::lock_guard<std::mutex> l(mu_);
  backend_ = std::move(backend);
  last_error_ = Status::OK();
  cv_.notify_all();
}

void RangeSlot::SetError(const Status& error) {
  std::lock_guard<std::mutex> l(mu_);
  last_error_ = error;
}

Result<std::shared_ptr<RangeBackend>> RangeSlot::Wait(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  if (backend_ == nullptr && timeout.count() > 0) {
    cv_.wait_for(l, timeout, [&] { return backend_ != nullptr; });
  }
  if (backend_ != nullptr) return backend_;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - since_);
  std::string why = "range " + std::to_string(range_id_) + " is being recovered (for " +
                    std::to_string(waited.count()) + " ms)";
  if (!last_error_.ok()) why += "; its last open attempt failed: " + last_error_.ToString();
  return Status::Unavailable(why);
}

std::shared_ptr<RangeBackend> RangeSlot::TryGet() const {
  std::lock_guard<std::mutex> l(mu_);
  return backend_;
}

std::string RangeSlot::StateText() const {
  auto b = Wait(std::chrono::milliseconds(0));
  return b.ok() ? b.value()->StatsText() : b.status().message();
}

Status LtcServer::Init() {
  auto a = source_->Current();
  if (!a.ok()) return a.status().Prepend("reading the range assignment");
  NOVA_RETURN_NOT_OK(a.value().Validate());
  // The first assignment may carry epoch 0 (a static one); ApplyAssignment wants newer.
  // Its ranges are published at once and opened in the background (recovering their
  // memtables from the logs may take a while): requests for a range wait for it, others
  // are served meanwhile.
  std::lock_guard<std::mutex> l(apply_mu_);
  auto t = std::make_shared<Table>();
  t->epoch = a.value().epoch;
  t->ltc_id = a.value().ltc_id;
  for (const RangeInfo& r : a.value().ranges) {
    auto slot = std::make_shared<RangeSlot>(r.id);
    t->ranges.push_back(Hosted{r, slot});
    OpenInBackground(r, a.value(), slot);
  }
  std::lock_guard<std::mutex> tl(table_mu_);
  table_ = std::move(t);
  return Status::OK();
}

void LtcServer::OpenInBackground(const RangeInfo& r, const LtcAssignment& a,
                                 std::shared_ptr<RangeSlot> slot) {
  std::lock_guard<std::mutex> l(openers_mu_);
  openers_.emplace_back([this, r, a, slot] {
    auto delay = std::chrono::milliseconds(100);
    const MonoTime start = MonoNow();
    while (!stopping_ && !slot->abandoned()) {
      auto b = factory_(r, a);
      if (b.ok() && slot->abandoned()) {
        // Removed while it opened: close it again (as a removed range closes).
        LOG(INFO) << "range " << r.id << " opened after it left the assignment; closing it";
        return;
      }
      if (b.ok()) {
        slot->Set(std::shared_ptr<RangeBackend>(std::move(b.value())));
        LOG(INFO)
            << "range " << r.id << " open after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - start).count()
            << " ms";
        return;
      }
      slot->SetError(b.status());
      LOG(ERROR) << "opening range " << r.id << " failed (retried in " << delay.count()
                 << " ms): " << b.status().ToString();
      std::unique_lock<std::mutex> pl(pending_mu_);
      pending_cv_.wait_for(pl, delay, [&] { return stopping_.load(); });
      delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::seconds(5));
    }
  });
}

Result<std::shared_ptr<RangeBackend>> LtcServer::BackendOf(const Hosted& h) {
  if (auto b = h.slot->TryGet()) return b;
  // Wait for the range only while most workers stay free for other ranges.
  const int waiting = waiting_for_recovery_.fetch_add(1) + 1;
  const bool may_wait = waiting * 2 <= options_.client_threads;
  auto b = h.slot->Wait(may_wait ? options_.recovery_wait : std::chrono::milliseconds(0));
  waiting_for_recovery_.fetch_sub(1);
  return b;
}

Status LtcServer::ApplyAssignment(const LtcAssignment& a) {
  NOVA_RETURN_NOT_OK(a.Validate());
  std::lock_guard<std::mutex> l(apply_mu_);
  std::shared_ptr<const Table> old = CurrentTable();
  if (a.epoch <= old->epoch) {
    return Status::InvalidArgument("assignment epoch " + std::to_string(a.epoch) +
                                   " is not newer than " + std::to_string(old->epoch));
  }
  std::map<uint32_t, std::shared_ptr<RangeSlot>> kept;
  for (const Hosted& h : old->ranges) kept[h.info.id] = h.slot;
  auto t = std::make_shared<Table>();
  t->epoch = a.epoch;
  t->ltc_id = a.ltc_id;
  for (const RangeInfo& r : a.ranges) {
    auto it = kept.find(r.id);
    if (it != kept.end()) {
      t->ranges.push_back(Hosted{r, it->second});
      continue;
    }
    auto b = factory_(r, a);
    if (!b.ok()) return b.status().Prepend("opening range " + std::to_string(r.id));
    LOG(INFO) << "epoch " << a.epoch << ": opened range " << r.id;
    t->ranges.push_back(
        Hosted{r, RangeSlot::Ready(r.id, std::shared_ptr<RangeBackend>(std::move(b.value())))});
  }
  {
    std::lock_guard<std::mutex> tl(table_mu_);
    table_ = t;
  }
  for (const Hosted& h : old->ranges) {
    const bool kept_now = std::any_of(t->ranges.begin(), t->ranges.end(),
                                      [&](const Hosted& n) { return n.slot == h.slot; });
    if (!kept_now) h.slot->Abandon();  // stops a background open still retrying
  }
  // Ranges no longer assigned close when `old` and the last request using them let go.
  LOG(INFO) << "installed assignment epoch " << a.epoch << " with " << a.ranges.size()
            << " ranges";
  return Status::OK();
}

std::shared_ptr<const LtcServer::Table> LtcServer::CurrentTable() const {
  std::lock_guard<std::mutex> l(table_mu_);
  return table_;
}

uint64_t LtcServer::epoch() const { return CurrentTable()->epoch; }

std::string LtcServer::address() const {
  return options_.host + ":" + std::to_string(bound_port_);
}

Status LtcServer::Start() {
  pool_ = std::make_unique<ThreadPool>("ltc-client", static_cast<size_t>(options_.client_threads),
                                       options_.max_queue);
  auto fd = transport::ListenTcp(options_.host, options_.port, &bound_port_);
  if (!fd.ok()) return fd.status().Prepend("client listener");
  listen_fd_ = fd.value();
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  applier_ = std::thread([this] { ApplyLoop(); });
  source_->Watch([this](const LtcAssignment& a) {
    std::lock_guard<std::mutex> l(pending_mu_);
    if (!pending_ || a.epoch > pending_->epoch) pending_ = a;
    pending_cv_.notify_all();
  });
  return Status::OK();
}

void LtcServer::ApplyLoop() {
  constexpr auto kFirstRetry = std::chrono::milliseconds(100);
  constexpr auto kMaxRetry = std::chrono::seconds(5);
  auto delay = kFirstRetry;
  std::unique_lock<std::mutex> l(pending_mu_);
  while (!stopping_) {
    if (!pending_) {
      pending_cv_.wait(l, [&] { return pending_.has_value() || stopping_.load(); });
      continue;
    }
    const LtcAssignment a = *pending_;
    l.unlock();
    Status s = a.epoch <= CurrentTable()->epoch ? Status::OK() : ApplyAssignment(a);
    l.lock();
    if (s.ok()) {
      if (pending_ && pending_->epoch == a.epoch) pending_.reset();
      delay = kFirstRetry;
      continue;
    }
    LOG(ERROR) << "range assignment of epoch " << a.epoch << " not applied (retried in "
               << std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()
               << " ms): " << s.ToString();
    // Woken early by a newer assignment or shutdown.
    pending_cv_.wait_for(l, delay, [&] {
      return stopping_.load() || (pending_ && pending_->epoch != a.epoch);
    });
    delay = std::min<std::chrono::milliseconds>(delay * 2, kMaxRetry);
  }
}

void LtcServer::Shutdown() {
  {
    std::lock_guard<std::mutex> l(conns_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  source_->Unwatch();
  stopping_ = true;
  {
    std::lock_guard<std::mutex> l(pending_mu_);
    pending_cv_.notify_all();
  }
  if (applier_.joinable()) applier_.join();
  std::vector<std::thread> openers;
  {
    std::lock_guard<std::mutex> l(openers_mu_);
    openers.swap(openers_);
  }
  for (auto& t : openers) t.join();  // an open in progress finishes first
  if (acceptor_.joinable()) {
    const char b = 1;
    (void)!::write(wake_pipe_[1], &b, 1);
    acceptor_.join();
  }
  // Shut every connection's socket (its reader wakes up) and join the readers. A reader
  // that finds itself gone from conns_ leaves its thread to us.
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> l(conns_mu_);
    for (auto& [id, c] : conns_) {
      ::shutdown(c->fd, SHUT_RDWR);
      if (c->reader.joinable()) readers.push_back(std::move(c->reader));
      std::lock_guard<std::mutex> cl(c->mu);
      c->cv.notify_all();
    }
    conns_.clear();
    for (auto& t : finished_readers_) readers.push_back(std::move(t));
    finished_readers_.clear();
  }
  for (auto& t : readers) t.join();
  if (pool_) pool_->Shutdown();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int& p : wake_pipe_) {
    if (p >= 0) ::close(p);
    p = -1;
  }
  listen_fd_ = -1;
  std::lock_guard<std::mutex> tl(table_mu_);
  table_ = std::make_shared<Table>();  // closes the ranges no request holds any more
}

void LtcServer::AcceptLoop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "client listener poll: " << strerror(errno);
      return;
    }
    if (fds[1].revents != 0 || stopping_) return;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the peer gave up already, or out of fds: try the next one
    transport::TuneSocket(fd, kSocketBufferBytes).IgnoreError();
    std::vector<std::thread> done;
    std::unique_lock<std::mutex> l(conns_mu_);
    done.swap(finished_readers_);
    if (conns_.size() >= static_cast<size_t>(options_.max_connections)) {
      l.unlock();
      connections_refused_->Increment();
      const std::string msg = wire::EncodeErrorResponse(
          kConnectionErrorType, 0,
          Status::ResourceExhausted("too many client connections: the limit is " +
                                    std::to_string(options_.max_connections) +
                                    " (--ltc_max_connections)"));
      transport::WriteFully(fd, msg.data(), msg.size(),
                            Deadline::After(options_.write_timeout)).IgnoreError();
      ::shutdown(fd, SHUT_WR);
      ::close(fd);
    } else {
      auto conn = std::make_shared<Conn>(fd, next_conn_id_++);
      conns_[conn->id] = conn;
      connections_->Set(static_cast<double>(conns_.size()));
      conn->reader = std::thread([this, conn] { ReadLoop(conn); });
      l.unlock();
    }
    for (auto& t : done) t.join();
  }
}

void LtcServer::ReadLoop(std::shared_ptr<Conn> conn) {
  wire::MessageStream in(conn->fd, options_.limits.max_request_bytes);
  for (;;) {
    wire::MessageHeader h;
    std::string_view payload;
    Status s = in.Next(&h, &payload);
    if (s.IsNotFound()) {
      s = in.Fill(/*dont_wait=*/false);
      if (s.ok() || s.IsUnavailable()) continue;
      break;  // closed by the client, or shut down by us
    }
    if (s.IsInvalidArgument()) {
      // Too long: answer the request it would have been, then hang up.
      SendError(conn.get(), h.type, h.request_id,
                Status::InvalidArgument("request of " + std::to_string(in.refused_bytes()) +
                                        " bytes exceeds the limit of " +
                                        std::to_string(options_.limits.max_request_bytes) +
                                        " bytes (--ltc_max_request_bytes)"));
      break;
    }
    if (s.ok() && h.is_response()) s = Status::Corruption("a client sent a response");
    if (!s.ok()) {
      // The stream cannot be trusted past a bad frame: say why and hang up.
      SendError(conn.get(), kConnectionErrorType, 0, s.Prepend("malformed request"));
      break;
    }
    requests_->Increment();
    {
      std::unique_lock<std::mutex> l(conn->mu);
      conn->cv.wait(l, [&] {
        return conn->inflight < options_.max_inflight_per_connection || stopping_;
      });
      if (stopping_) break;
      ++conn->inflight;
    }
    Status sub = pool_->Submit(
        [this, conn, t = h.type, id = h.request_id, p = std::string(payload)]() mutable {
          Serve(conn, t, id, std::move(p));
        });
    if (!sub.ok()) {
      {
        std::lock_guard<std::mutex> l(conn->mu);
        --conn->inflight;
      }
      SendError(conn.get(), h.type, h.request_id,
                sub.IsResourceExhausted()
                    ? Status::ResourceExhausted("LTC overloaded: request queue full")
                    : Status::Unavailable("LTC shutting down"));
    }
  }
  ::shutdown(conn->fd, SHUT_RD);
  std::lock_guard<std::mutex> l(conns_mu_);
  if (conns_.erase(conn->id) > 0 && conn->reader.joinable()) {
    finished_readers_.push_back(std::move(conn->reader));
  }
  connections_->Set(static_cast<double>(conns_.size()));
}

void LtcServer::Send(Conn* conn, const std::string& message) {
  std::lock_guard<std::mutex> l(conn->write_mu);
  if (conn->broken) return;
  Status s = transport::WriteFully(conn->fd, message.data(), message.size(),
                                   Deadline::After(options_.write_timeout));
  if (!s.ok()) {
    conn->broken = true;
    VLOG(1) << "client connection " << conn->id << ": " << s.ToString();
    ::shutdown(conn->fd, SHUT_RDWR);  // its reader ends; nothing more is sent
  }
}

void LtcServer::SendError(Conn* conn, uint16_t type, uint64_t request_id, const Status& error) {
  request_errors_->Increment();
  if (error.IsWrongRange()) wrong_range_->Increment();
  Send(conn, wire::EncodeErrorResponse(type, request_id, error));
}

void LtcServer::Serve(const std::shared_ptr<Conn>& conn, uint16_t type, uint64_t request_id,
                      std::string payload) {
  ClientRequest r;
  Status s = DecodeClientRequest(type, payload, &r);
  if (s.ok()) s = CheckClientLimits(r, options_.limits);
  if (!s.ok()) {
    SendError(conn.get(), type, request_id, s);
  } else {
    Result<std::string> resp = Handle(conn.get(), r);
    if (resp.ok()) {
      Send(conn.get(), wire::EncodeMessage(type, request_id, resp.value(), wire::kFlagResponse));
    } else {
      SendError(conn.get(), type, request_id, resp.status());
    }
  }
  std::lock_guard<std::mutex> l(conn->mu);
  --conn->inflight;
  conn->cv.notify_all();
}

}  // namespace nova::ltc
