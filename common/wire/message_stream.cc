#include "common/wire/message_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "common/coding.h"

namespace nova::wire {

Status MessageStream::Next(MessageHeader* h, std::string_view* payload) {
  const std::string_view avail(buf_.data() + used_, buf_.size() - used_);
  // A header that cannot start a message (bad magic, version, reserved bits) first: only
  // then are its type, id and length worth answering about.
  size_t need = 0;
  NOVA_RETURN_NOT_OK(PeekMessageLength(avail, std::numeric_limits<uint32_t>::max(), &need));
  if (need == 0) return Status::NotFound("more bytes needed");
  if (need > max_message_bytes_) {
    h->type = DecodeFixed16(avail.data() + 4);
    h->request_id = DecodeFixed64(avail.data() + 8);
    refused_bytes_ = need;
    return Status::InvalidArgument("message of " + std::to_string(need) +
                                   " bytes exceeds the limit of " +
                                   std::to_string(max_message_bytes_) + " bytes");
  }
  if (avail.size() < need) return Status::NotFound("more bytes needed");
  NOVA_RETURN_NOT_OK(DecodeMessage(avail.substr(0, need), h, payload, max_message_bytes_));
  used_ += need;
  return Status::OK();
}

Status MessageStream::Fill(bool dont_wait) {
  if (used_ > 0) {  // what was handed out is no longer referenced (see Next)
    buf_.erase(0, used_);
    used_ = 0;
  }
  const size_t old = buf_.size();
  buf_.resize(old + kReadChunk);
  const ssize_t got = ::recv(fd_, buf_.data() + old, kReadChunk, dont_wait ? MSG_DONTWAIT : 0);
  buf_.resize(old + (got > 0 ? static_cast<size_t>(got) : 0));
  if (got > 0) return Status::OK();
  if (got == 0) return Status::NetworkError("closed by the peer");
  if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) {
    return Status::Unavailable("nothing to read yet");
  }
  return Status::NetworkError(std::strerror(errno));
}

}  // namespace nova::wire
