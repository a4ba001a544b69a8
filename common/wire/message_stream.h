// MessageStream: common/wire messages read from a connected stream socket. The one reading
// loop of both ends of the client protocol (the LTC server's connection readers and the
// client library's LtcConnection): it frames what its SocketReader (common/socket_reader.h,
// the receive buffer the exchange transport's tcp lanes use too) holds and hands out whole,
// checked messages (magic, version, length limit, crc).
//
//   MessageStream in(fd, max_message_bytes);
//   for (;;) {
//     wire::MessageHeader h;
//     std::string_view payload;
//     Status s = in.Next(&h, &payload);
//     if (s.IsNotFound()) { NOVA_RETURN_NOT_OK(in.Fill(/*dont_wait=*/false)); continue; }
//     if (!s.ok()) return s;  // the stream cannot be trusted past it
//     Handle(h, payload);
//   }
//
// Thread safety: not thread-safe (one reader per connection).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/socket_reader.h"
#include "common/status.h"
#include "common/wire/message.h"

namespace nova::wire {

class MessageStream {
 public:
  // Bytes asked of recv() at a time; a larger message is read in several.
  static constexpr size_t kReadChunk = 64 << 10;

  // `fd` stays the caller's (never closed here). Messages longer than `max_message_bytes`
  // (header included) are refused.
  MessageStream(int fd, size_t max_message_bytes)
      : max_message_bytes_(max_message_bytes), in_(fd, kReadChunk) {}

  // The next whole message buffered:
  //  - OK: *h and *payload (a view valid until the next Next or Fill);
  //  - NotFound: more bytes are needed (Fill);
  //  - InvalidArgument: the next message is longer than max_message_bytes (its length is
  //    refused_bytes()); only h->type and h->request_id are set (so the sender can be told
  //    which request it was);
  //  - Corruption or NotSupported: it cannot be decoded (the bytes are not a message).
  // After an error other than NotFound the stream cannot go on.
  Status Next(MessageHeader* h, std::string_view* payload);

  // Receives what the socket has: blocks for at least one byte, or with `dont_wait`
  // returns at once. OK when bytes arrived; Unavailable when none did (dont_wait, or a
  // signal interrupted the wait); NetworkError when the peer closed the connection
  // ("closed by the peer") or recv failed (its error).
  Status Fill(bool dont_wait);

  // Bytes received and not yet handed out by Next (0: the next message is still in the
  // socket, or not sent yet).
  size_t buffered_bytes() const { return in_.buffered().size(); }

  // Length of the message Next refused as too long.
  size_t refused_bytes() const { return refused_bytes_; }

 private:
  const size_t max_message_bytes_;
  SocketReader in_;  // messages handed out are consumed from it at once (see Next)
  size_t refused_bytes_ = 0;
};

}  // namespace nova::wire
