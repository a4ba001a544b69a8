#include "client/ltc_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <tuple>
#include <utility>
#include <vector>

#include "common/transport/tcp_socket.h"
#include "common/wire/message.h"
#include "common/wire/message_stream.h"
#include "ltc/protocol/client_auth.h"
#include "ltc/protocol/client_protocol.h"

namespace nova::client {
namespace {

constexpr int kSocketBufferBytes = 1 << 20;
// The reader sleeps at most this long between deadline checks, so calls whose deadline is
// later than its next check need not wake it.
constexpr auto kReaderCheckInterval = std::chrono::milliseconds(100);
// The LTC's connection-level error type (request id 0); see docs/protocol.md.
constexpr uint16_t kConnectionErrorType = 0x0300;

// One call on `conn`, waited for.
std::pair<Status, std::string> CallAndWait(LtcConnection* conn, ltc::ClientMsg type,
                                           std::string_view payload, Deadline deadline) {
  std::promise<std::pair<Status, std::string>> p;
  auto f = p.get_future();
  conn->Call(static_cast<uint16_t>(type), payload, deadline,
             [&p](const Status& s, std::string r) { p.set_value({s, std::move(r)}); });
  return f.get();
}

int PollTimeoutMs(MonoTime until) {
  if (until == MonoTime::max()) return -1;
  const auto now = MonoNow();
  if (until <= now) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

}  // namespace

Result<std::shared_ptr<LtcConnection>> LtcConnection::Connect(const std::string& address,
                                                              Deadline deadline,
                                                              uint64_t max_response_bytes,
                                                              const std::string& client_secret) {
  return Open(address, deadline, max_response_bytes, client_secret, /*direct=*/false, {},
              nullptr);
}

Result<std::shared_ptr<LtcConnection>> LtcConnection::ConnectDirect(
    const std::string& address, Deadline deadline, uint64_t max_response_bytes,
    const std::string& client_secret, std::chrono::microseconds spin,
    std::atomic<int>* spinners) {
  return Open(address, deadline, max_response_bytes, client_secret, /*direct=*/true, spin,
              spinners);
}

Result<std::shared_ptr<LtcConnection>> LtcConnection::Open(const std::string& address,
                                                           Deadline deadline,
                                                           uint64_t max_response_bytes,
                                                           const std::string& client_secret,
                                                           bool direct,
                                                           std::chrono::microseconds spin,
                                                           std::atomic<int>* spinners) {
  auto fd = transport::ConnectTcp(address, deadline);
  if (!fd.ok()) {
    return Status::NetworkError("cannot connect to LTC " + address + ": " +
                                fd.status().ToString());
  }
  transport::TuneSocket(fd.value(), kSocketBufferBytes).IgnoreError();
  std::shared_ptr<LtcConnection> c(
      new LtcConnection(address, fd.value(), max_response_bytes, direct, spin, spinners));
  if (direct) {
    // The limit is of payloads: a whole message is a header longer.
    c->direct_in_ = std::make_unique<wire::MessageStream>(
        fd.value(), max_response_bytes + wire::kHeaderBytes);
  } else {
    if (::pipe2(c->wake_pipe_, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
    LtcConnection* raw = c.get();
    c->reader_ = std::thread([raw] { raw->ReadLoop(); });
  }
  if (!client_secret.empty()) {
    Status s = c->Authenticate(client_secret, deadline);
    if (!s.ok()) {
      c->Close();
      return s;
    }
  }
  if (direct) {
    // Lets the LTC serve each request on the connection's reader (no hand-off). An older
    // LTC answers with an error: it serves them as any others then.
    auto [s, payload] = CallAndWait(c.get(), ltc::ClientMsg::kDeclareSynchronous, "", deadline);
    if (!s.ok() && !c->healthy()) {
      c->Close();
      return s.Prepend("declaring the connection to LTC " + address + " synchronous");
    }
  }
  return c;
}

Status LtcConnection::Authenticate(const std::string& client_secret, Deadline deadline) {
  auto [s, payload] = CallAndWait(this, ltc::ClientMsg::kAuthChallenge, "", deadline);
  if (s.code() == Status::Code::kNotSupported) {
    // An LTC older than the handshake: it has no client secret to check.
    return Status::OK();
  }
  if (!s.ok()) return s.Prepend("authenticating to LTC " + address_);
  ltc::AuthChallenge challenge;
  NOVA_RETURN_NOT_OK_PREPEND(ltc::DecodeAuthChallenge(payload, &challenge),
                             "authenticating to LTC " + address_);
  if (!challenge.required) return Status::OK();
  std::tie(s, payload) =
      CallAndWait(this, ltc::ClientMsg::kAuthenticate,
                  ltc::EncodeAuthenticate(ltc::ClientAuthMac(client_secret, challenge.nonce)),
                  deadline);
  // A refusal arrives as the connection-level error, already naming this LTC.
  if (s.IsPermissionDenied()) return s;
  return s.Prepend("authenticating to LTC " + address_);
}

LtcConnection::LtcConnection(std::string address, int fd, uint64_t max_response_bytes,
                             bool direct, std::chrono::microseconds spin,
                             std::atomic<int>* spinners)
    : address_(std::move(address)), fd_(fd), max_response_bytes_(max_response_bytes),
      direct_(direct), direct_spin_(spin, spinners) {}

LtcConnection::~LtcConnection() {
  Close();
  ::close(fd_);
  for (int p : wake_pipe_) {
    if (p >= 0) ::close(p);
  }
}

bool LtcConnection::healthy() const {
  MutexLock l(&mu_);
  return failed_.ok() && !closing_;
}

void LtcConnection::Close() {
  {
    MutexLock l(&mu_);
    if (closing_ && !reader_.joinable()) return;
    closing_ = true;
  }
  ::shutdown(fd_, SHUT_RDWR);
  if (wake_pipe_[1] >= 0) {
    const char b = 1;
    (void)!::write(wake_pipe_[1], &b, 1);
  }
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
  Fail(Status::Aborted("connection to LTC " + address_ + " closed"));
}

void LtcConnection::Call(uint16_t type, std::string_view payload, Deadline deadline,
                         CallCallback done) {
  uint64_t id = 0;
  Status refused;
  bool wake_reader = false;
  {
    MutexLock l(&mu_);
    if (!failed_.ok() || closing_) {
      refused = failed_.ok() ? Status::Aborted("connection to LTC " + address_ + " closed")
                             : failed_;
    } else {
      id = next_id_++;
      pending_[id] = Pending{done, deadline.when()};
      if (!direct_ && deadline.when() < reader_wakes_at_) {
        // The reader sleeps past this deadline: let it recompute how long it may sleep.
        wake_reader = true;
        reader_wakes_at_ = deadline.when();
      }
    }
  }
  if (!refused.ok()) {
    done(refused, std::string());
    return;
  }
  const std::string msg = wire::EncodeMessage(type, id, payload);
  Status s;
  {
    MutexLock wl(&write_mu_);
    s = transport::WriteFully(fd_, msg.data(), msg.size(), deadline);
  }
  if (!s.ok()) {
    Fail(Status::NetworkError("sending to LTC " + address_ + ": " + s.ToString()));
    return;
  }
  if (direct_) {
    AwaitDirect(id, deadline);
  } else if (wake_reader) {
    const char b = 1;
    (void)!::write(wake_pipe_[1], &b, 1);
  }
}

void LtcConnection::AwaitDirect(uint64_t id, Deadline deadline) {
  for (;;) {
    {
      MutexLock l(&mu_);
      if (pending_.count(id) == 0) return;  // completed, or failed with the connection
    }
    if (!DeliverResponses(direct_in_.get())) return;
    {
      MutexLock l(&mu_);
      if (pending_.count(id) == 0) return;
      if (closing_) break;
    }
    if (direct_spin_.ShouldSpin()) {
      // Poll without sleeping for a moment: an answer that comes meanwhile is read with no
      // wake-up (common/adaptive_spin.h).
      const MonoTime until = std::min(MonoNow() + direct_spin_.window(), deadline.when());
      const Status got =
          direct_spin_.PollWindow(until, [&] { return direct_in_->Fill(/*dont_wait=*/true); });
      if (got.ok()) continue;
      if (!got.IsUnavailable()) {
        Fail(LostError(got));
        return;
      }
    }
    pollfd fd = {fd_, POLLIN, 0};
    const int n = ::poll(&fd, 1, PollTimeoutMs(deadline.when()));
    if (n < 0 && errno != EINTR) {
      Fail(Status::NetworkError("poll on connection to LTC " + address_));
      return;
    }
    if (n == 0) {
      // The late response must not be taken for a later call's: the connection goes.
      Fail(Status::TimedOut("no answer from LTC " + address_ + " before the deadline"));
      return;
    }
    if ((fd.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    Status got = direct_in_->Fill(/*dont_wait=*/true);
    if (got.IsUnavailable()) continue;
    if (!got.ok()) {
      Fail(LostError(got));
      return;
    }
  }
  Fail(Status::Aborted("connection to LTC " + address_ + " closed"));
}

Status LtcConnection::LostError(const Status& read_error) const {
  return Status::NetworkError("connection to LTC " + address_ + " lost" +
                              (read_error.message() == "closed by the peer"
                                   ? std::string(" (closed by the LTC)")
                                   : ": " + read_error.message()));
}

void LtcConnection::Fail(const Status& why) {
  std::map<uint64_t, Pending> failed;
  {
    MutexLock l(&mu_);
    if (failed_.ok()) failed_ = why;
    failed.swap(pending_);
  }
  for (auto& [id, p] : failed) p.done(why, std::string());
}

MonoTime LtcConnection::ExpireOverdue() {
  std::vector<Pending> overdue;
  const MonoTime now = MonoNow();
  MonoTime nearest = now + kReaderCheckInterval;
  {
    MutexLock l(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        overdue.push_back(std::move(it->second));
        it = pending_.erase(it);
      } else {
        nearest = std::min(nearest, it->second.deadline);
        ++it;
      }
    }
    reader_wakes_at_ = nearest;
  }
  for (Pending& p : overdue) {
    p.done(Status::TimedOut("no answer from LTC " + address_ + " before the deadline"),
           std::string());
  }
  return nearest;
}

void LtcConnection::ReadLoop() {
  // The limit is of payloads: a whole message is a header longer.
  wire::MessageStream in(fd_, max_response_bytes_ + wire::kHeaderBytes);
  for (;;) {
    const MonoTime nearest = ExpireOverdue();
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, PollTimeoutMs(nearest));
    if (n < 0 && errno != EINTR) {
      Fail(Status::NetworkError("poll on connection to LTC " + address_));
      return;
    }
    if (fds[1].revents != 0) {
      char drain[64];
      (void)!::read(wake_pipe_[0], drain, sizeof(drain));
    }
    {
      MutexLock l(&mu_);
      if (closing_) return;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    Status got = in.Fill(/*dont_wait=*/true);
    if (got.IsUnavailable()) continue;
    if (!got.ok()) {
      Fail(LostError(got));
      return;
    }
    if (!DeliverResponses(&in)) return;
  }
}

bool LtcConnection::DeliverResponses(wire::MessageStream* in) {
  for (;;) {
    wire::MessageHeader h;
    std::string_view payload;
    Status s = in->Next(&h, &payload);
    if (s.IsNotFound()) return true;
    if (s.ok() && !h.is_response()) s = Status::Corruption("the LTC sent a request");
    if (!s.ok()) {
      Fail(Status::NetworkError("bad response from LTC " + address_ + ": " + s.ToString()));
      return false;
    }
    Status err = h.is_error() ? wire::DecodeErrorPayload(payload) : Status::OK();
    if (h.request_id == 0 && h.type == kConnectionErrorType) {
      // The LTC refuses this connection and will close it.
      Fail(err.ok() ? Status::NetworkError("LTC " + address_ + " closed the connection")
                    : err.Prepend("LTC " + address_));
      return false;
    }
    Pending p;
    {
      MutexLock l(&mu_);
      auto it = pending_.find(h.request_id);
      if (it == pending_.end()) continue;  // timed out already
      p = std::move(it->second);
      pending_.erase(it);
    }
    p.done(err, err.ok() ? std::string(payload) : std::string());
  }
}

}  // namespace nova::client
