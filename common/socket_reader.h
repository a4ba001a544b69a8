// SocketReader: the buffered reading of length-prefixed frames from a connected stream
// socket. The one receive path under both framings of the tree:
//  - wire::MessageStream (common/wire/message_stream.h), the client protocol's messages,
//    read by the LTC server's connection readers and the client library's LtcConnection;
//  - the exchange transport's tcp lanes (common/transport/tcp_lane.h), whose frames carry
//    one-sided operations.
// It owns the buffer: what recv() returned and the framing has not consumed yet, as one
// contiguous run starting at buffered().data(). The framing above it peeks at buffered(),
// decodes a header once enough bytes are there (its own size and length rules), and
// Consume()s what it took. A payload the framing wants elsewhere (a lane's registered
// memory) is read with ReadDirect, straight from the socket into its destination, without a
// copy through the buffer.
//
// Every call is at most one recv() system call; no call allocates except Fill when the
// buffer must grow (when the room asked for, `min_room`, does not fit even after the
// buffered bytes move to the front) or shrink: a buffer grown past its starting capacity
// goes back to it at the next Fill that finds nothing buffered, so a connection that once
// carried a 64 MiB message does not keep 128 MiB for the rest of its life.
//
//   SocketReader in(fd, 64 << 10);
//   for (;;) {
//     if (in.buffered().size() >= kHeader && <whole frame buffered>) { ...; in.Consume(n); }
//     else if (in.Fill(/*dont_wait=*/false, /*min_room=*/1) != SocketReader::kData) break;
//   }
//
// Thread safety: not thread-safe (one reader per socket).
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace nova {

class SocketReader {
 public:
  // What one recv() found. Plain values, not Status: the hot path (a lane's reads, each of
  // which ends with kWouldBlock) must not allocate an error message per call; each framing
  // words its own errors (with last_errno()).
  enum Result {
    kData,         // bytes arrived
    kWouldBlock,   // none yet (non-blocking read, or EAGAIN)
    kInterrupted,  // a signal interrupted the wait (EINTR): nothing lost, try again
    kClosed,       // the peer closed the connection (end of stream)
    kError,        // recv failed: last_errno() says why; the socket cannot be read further
  };

  // `fd` stays the caller's (never closed here). The buffer starts at `capacity` bytes.
  SocketReader(int fd, size_t capacity);
  SocketReader(const SocketReader&) = delete;
  SocketReader& operator=(const SocketReader&) = delete;

  int fd() const { return fd_; }

  // The bytes received and not yet consumed. The view is valid until the next Fill.
  std::string_view buffered() const { return std::string_view(buf_.get() + start_, end_ - start_); }
  // Drops the first n buffered bytes. REQUIRES: n <= buffered().size().
  void Consume(size_t n) {
    start_ += n;
    if (start_ == end_) start_ = end_ = 0;
  }

  // One recv() into the buffer, after what is buffered: first makes room for at least
  // `min_room` more bytes (moving the buffered bytes to the front of the buffer if the tail
  // is short, growing the buffer only if that is not enough), then asks for at most
  // `max_bytes` (0: as much as fits). Blocks for at least one byte unless `dont_wait`.
  Result Fill(bool dont_wait, size_t min_room, size_t max_bytes = 0);

  // One non-blocking recv() of up to n bytes straight into dst, bypassing the buffer; *got
  // is what arrived (with kData). REQUIRES: n > 0; buffered() is empty (bytes must not
  // overtake the ones buffered before them).
  Result ReadDirect(char* dst, size_t n, size_t* got);

  // errno of the last kError.
  int last_errno() const { return last_errno_; }
  // Bytes the buffer holds room for now (grows for long frames, shrinks back after them).
  size_t capacity() const { return capacity_; }

 private:
  Result Classify(long got);

  const int fd_;
  std::unique_ptr<char[]> buf_;
  const size_t initial_capacity_;
  size_t capacity_;
  size_t start_ = 0;  // buffered bytes are [start_, end_)
  size_t end_ = 0;
  int last_errno_ = 0;
};

}  // namespace nova
