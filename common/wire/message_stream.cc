#include "common/wire/message_stream.h"

#include <cstring>
#include <limits>

#include "common/coding.h"

namespace nova::wire {

Status MessageStream::Next(MessageHeader* h, std::string_view* payload) {
  const std::string_view avail = in_.buffered();
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
  // Consumed at once: the bytes stay where they are until the next Fill, so *payload
  // stays valid as Next promises.
  in_.Consume(need);
  return Status::OK();
}

Status MessageStream::Fill(bool dont_wait) {
  switch (in_.Fill(dont_wait, /*min_room=*/kReadChunk, /*max_bytes=*/kReadChunk)) {
    case SocketReader::kData:
      return Status::OK();
    case SocketReader::kClosed:
      return Status::NetworkError("closed by the peer");
    case SocketReader::kWouldBlock:
    case SocketReader::kInterrupted:
      return Status::Unavailable("nothing to read yet");
    case SocketReader::kError:
      break;
  }
  return Status::NetworkError(std::strerror(in_.last_errno()));
}

}  // namespace nova::wire
