#include "common/transport/tcp_lane.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <glog/logging.h>

namespace nova::transport {

namespace {

// Receive buffer for headers and small payloads; larger payloads go straight from the
// socket into their destination (the registered region), without a copy through it.
constexpr size_t kInBufBytes = 256 << 10;
// Payload remainders at least this large are read directly into their destination.
constexpr uint64_t kDirectReadBytes = 64 << 10;
// Work bound per OnReadable call, so one busy lane cannot starve the thread's others.
constexpr int kMaxReadsPerCall = 64;
constexpr int kMaxIov = 64;

Status ReplyStatus(const FrameHeader& h, const std::string& text) {
  if (h.code == 0) return Status::OK();
  return Status(static_cast<Status::Code>(h.code), text);
}

}  // namespace

TcpLane::TcpLane(int fd, PeerId peer, uint64_t generation, const LaneEnv& env)
    : fd_(fd), peer_(peer), generation_(generation), env_(env), in_(fd, kInBufBytes) {}

TcpLane::~TcpLane() {
  DCHECK(pending_.empty()) << "lane destroyed with pending ops";
  ::close(fd_);
}

void TcpLane::Queue(const FrameHeader& h, const char* data, uint64_t length, std::string owned,
                    bool uses_owned, RegionPin pin) {
  // Replies go in the order of the ops they answer: deferred acknowledgments first.
  if (!deferred_acks_.empty()) ReleaseDeferredAcks();
  OutFrame& f = out_.emplace_back();
  EncodeFrameHeader(h, f.header);
  f.data = data;
  f.owned = std::move(owned);
  f.uses_owned = uses_owned;
  f.length = length;
  f.pin = std::move(pin);
}

void TcpLane::ReleaseDeferredAcks() {
  std::vector<uint64_t> ids;
  ids.swap(deferred_acks_);
  for (uint64_t id : ids) QueueReply(FrameType::kAck, id, Status::OK());
}

void TcpLane::QueueReply(FrameType type, uint64_t op_id, const Status& s) {
  FrameHeader h;
  h.type = type;
  h.op_id = op_id;
  h.code = static_cast<uint8_t>(s.code());
  std::string text;
  if (!s.ok()) text = s.message().substr(0, kMaxErrorMessageBytes);
  h.payload_length = static_cast<uint32_t>(text.size());
  const uint64_t len = text.size();
  Queue(h, nullptr, len, std::move(text), true, RegionPin());
}

void TcpLane::PostSend(std::string msg, Completion done) {
  FrameHeader h;
  h.type = FrameType::kSend;
  h.op_id = next_op_id_++;
  h.payload_length = static_cast<uint32_t>(msg.size());
  pending_.push_back(PendingOp{h.op_id, FrameType::kAck, std::move(done)});
  const uint64_t len = msg.size();
  Queue(h, nullptr, len, std::move(msg), true, RegionPin());
}

void TcpLane::PostWrite(const char* src, uint64_t length, RemoteAddr remote,
                        std::optional<uint32_t> imm, Completion done) {
  FrameHeader h;
  h.type = FrameType::kWrite;
  h.op_id = next_op_id_++;
  h.payload_length = static_cast<uint32_t>(length);
  h.addr = remote.addr;
  h.rkey = remote.rkey;
  if (imm) {
    h.flags = kFlagHasImm;
    h.aux = *imm;
  }
  pending_.push_back(PendingOp{h.op_id, FrameType::kAck, std::move(done)});
  Queue(h, src, length, std::string(), false, RegionPin());
}

void TcpLane::PostRead(RemoteAddr remote, uint64_t length, char* dst, Completion done) {
  FrameHeader h;
  h.type = FrameType::kReadReq;
  h.op_id = next_op_id_++;
  h.addr = remote.addr;
  h.rkey = remote.rkey;
  h.aux = static_cast<uint32_t>(length);
  pending_.push_back(PendingOp{h.op_id, FrameType::kReadResp, std::move(done), dst, length});
  Queue(h, nullptr, 0, std::string(), false, RegionPin());
}

Status TcpLane::Flush() {
  while (!out_.empty()) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = out_.begin(); it != out_.end() && n + 2 <= kMaxIov; ++it) {
      const char* payload = it->uses_owned ? it->owned.data() : it->data;
      uint64_t skip = it->written;
      if (skip < kFrameHeaderBytes) {
        iov[n++] = {const_cast<char*>(it->header + skip), kFrameHeaderBytes - skip};
        skip = 0;
      } else {
        skip -= kFrameHeaderBytes;
      }
      if (it->length > skip) {
        iov[n++] = {const_cast<char*>(payload + skip), it->length - skip};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::OK();
      return Status::NetworkError(std::string("send: ") + std::strerror(errno));
    }
    uint64_t left = static_cast<uint64_t>(w);
    while (left > 0 && !out_.empty()) {
      OutFrame& f = out_.front();
      const uint64_t total = kFrameHeaderBytes + f.length;
      const uint64_t take = std::min(left, total - f.written);
      f.written += take;
      left -= take;
      if (f.written == total) out_.pop_front();  // releases its pin
    }
  }
  return Status::OK();
}

Status TcpLane::OnReadable() {
  for (int i = 0; i < kMaxReadsPerCall; ++i) {
    NOVA_RETURN_NOT_OK(ConsumeBuffered());
    const bool direct = rx_state_ == RxState::kPayload && rx_dst_ != nullptr &&
                        in_.buffered().empty() && rx_remaining_ >= kDirectReadBytes;
    size_t got = 0;
    // After ConsumeBuffered only a partial header (or nothing) is buffered, so a full
    // buffer always has a consumed prefix for Fill to reclaim: it never grows.
    const SocketReader::Result r = direct ? in_.ReadDirect(rx_dst_ + rx_done_, rx_remaining_, &got)
                                          : in_.Fill(/*dont_wait=*/true, /*min_room=*/1);
    switch (r) {
      case SocketReader::kData:
        break;
      case SocketReader::kInterrupted:
        continue;
      case SocketReader::kWouldBlock:
        return Status::OK();
      case SocketReader::kClosed:
        return Status::NetworkError("connection closed by peer");
      case SocketReader::kError:
        return Status::NetworkError(std::string("recv: ") + std::strerror(in_.last_errno()));
    }
    if (direct) {
      rx_done_ += got;
      rx_remaining_ -= got;
      if (rx_remaining_ == 0) NOVA_RETURN_NOT_OK(FinishFrame());
    }
  }
  return ConsumeBuffered();
}

void TcpLane::AcceptPayload(const char* src, uint64_t n) {
  if (rx_dst_ != nullptr) std::memcpy(rx_dst_ + rx_done_, src, n);
  rx_done_ += n;
  rx_remaining_ -= n;
}

Status TcpLane::ConsumeBuffered() {
  for (std::string_view avail = in_.buffered(); !avail.empty(); avail = in_.buffered()) {
    if (rx_state_ == RxState::kHeader) {
      if (avail.size() < kFrameHeaderBytes) break;
      NOVA_RETURN_NOT_OK(DecodeFrameHeader(avail.data(), env_.limits, &rx_));
      in_.Consume(kFrameHeaderBytes);
      NOVA_RETURN_NOT_OK(StartFrame());
    } else {
      const uint64_t n = std::min<uint64_t>(avail.size(), rx_remaining_);
      AcceptPayload(avail.data(), n);
      in_.Consume(n);
      if (rx_remaining_ == 0) NOVA_RETURN_NOT_OK(FinishFrame());
    }
  }
  return Status::OK();
}

Status TcpLane::StartFrame() {
  rx_dst_ = nullptr;
  rx_done_ = 0;
  rx_remaining_ = rx_.payload_length;
  rx_owned_.clear();
  rx_reject_ = Status::OK();
  switch (rx_.type) {
    case FrameType::kSend:
      rx_owned_.resize(rx_.payload_length);
      rx_dst_ = rx_owned_.data();
      break;
    case FrameType::kWrite: {
      rx_pin_ = env_.regions->Pin(rx_.rkey);
      if (!rx_pin_) {
        rx_reject_ = Status::PermissionDenied("write with unknown rkey " + std::to_string(rx_.rkey));
      } else {
        rx_reject_ = CheckRemoteAccess(rx_pin_.region(), rx_.addr, rx_.payload_length, kRemoteWrite);
      }
      if (rx_reject_.ok()) {
        rx_dst_ = reinterpret_cast<char*>(rx_.addr);
      } else {
        rx_pin_.Reset();  // payload is drained and dropped
      }
      break;
    }
    case FrameType::kReadReq: {
      RegionPin pin = env_.regions->Pin(rx_.rkey);
      Status s = pin ? CheckRemoteAccess(pin.region(), rx_.addr, rx_.aux, kRemoteRead)
                     : Status::PermissionDenied("read with unknown rkey " + std::to_string(rx_.rkey));
      if (!s.ok()) {
        env_.counters->rejected_remote_ops.fetch_add(1, std::memory_order_relaxed);
        LOG_EVERY_N(WARNING, 100) << "refused a peer's one-sided read: " << s.ToString();
        QueueReply(FrameType::kReadResp, rx_.op_id, s);
      } else {
        FrameHeader h;
        h.type = FrameType::kReadResp;
        h.op_id = rx_.op_id;
        h.payload_length = rx_.aux;
        Queue(h, reinterpret_cast<const char*>(rx_.addr), rx_.aux, std::string(), false,
              std::move(pin));
      }
      return Status::OK();
    }
    case FrameType::kAck:
    case FrameType::kReadResp: {
      if (pending_.empty() || pending_.front().op_id != rx_.op_id ||
          pending_.front().reply != rx_.type) {
        return Status::Corruption("reply for an operation that is not the oldest pending one");
      }
      const PendingOp& op = pending_.front();
      if (rx_.type == FrameType::kReadResp && rx_.code == 0) {
        if (rx_.payload_length != op.read_length) {
          return Status::Corruption("read response length does not match the request");
        }
        rx_dst_ = op.read_dst;
      } else {
        rx_owned_.resize(rx_.payload_length);
        rx_dst_ = rx_owned_.data();
      }
      break;
    }
    case FrameType::kHandshake:
      return Status::Corruption("handshake frame on an established lane");
  }
  rx_state_ = RxState::kPayload;
  if (rx_remaining_ == 0) return FinishFrame();
  return Status::OK();
}

Status TcpLane::FinishFrame() {
  rx_state_ = RxState::kHeader;
  switch (rx_.type) {
    case FrameType::kSend:
      if (deferred_acks_.empty()) deferred_since_ = MonoNow();
      deferred_acks_.push_back(rx_.op_id);
      env_.handler->OnMessage(peer_, rx_owned_);
      break;
    case FrameType::kWrite:
      rx_pin_.Reset();
      if (!rx_reject_.ok()) {
        env_.counters->rejected_remote_ops.fetch_add(1, std::memory_order_relaxed);
        LOG_EVERY_N(WARNING, 100) << "refused a peer's one-sided write: " << rx_reject_.ToString();
        QueueReply(FrameType::kAck, rx_.op_id, rx_reject_);
      } else {
        QueueReply(FrameType::kAck, rx_.op_id, Status::OK());
        if (rx_.flags & kFlagHasImm) env_.handler->OnWriteWithImm(peer_, rx_.aux, rx_.payload_length);
      }
      break;
    case FrameType::kAck:
    case FrameType::kReadResp: {
      PendingOp op = std::move(pending_.front());
      pending_.pop_front();
      Status s = ReplyStatus(rx_, rx_owned_);
      if (!s.ok()) env_.counters->failed_ops.fetch_add(1, std::memory_order_relaxed);
      op.done(s);
      break;
    }
    case FrameType::kReadReq:
    case FrameType::kHandshake:
      break;  // handled in StartFrame
  }
  rx_owned_.clear();
  rx_dst_ = nullptr;
  return Status::OK();
}

void TcpLane::FailAll(const Status& why) {
  std::deque<PendingOp> ops;
  ops.swap(pending_);
  out_.clear();  // releases pins of queued READ responses
  env_.counters->failed_ops.fetch_add(ops.size(), std::memory_order_relaxed);
  for (auto& op : ops) op.done(why);
  rx_pin_.Reset();
}

}  // namespace nova::transport
