#include "common/socket_reader.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nova {

SocketReader::SocketReader(int fd, size_t capacity)
    : fd_(fd),
      buf_(new char[std::max<size_t>(capacity, 1)]),
      initial_capacity_(std::max<size_t>(capacity, 1)),
      capacity_(initial_capacity_) {}

SocketReader::Result SocketReader::Fill(bool dont_wait, size_t min_room, size_t max_bytes) {
  min_room = std::max<size_t>(min_room, 1);
  if (start_ == end_ && capacity_ > initial_capacity_ && min_room <= initial_capacity_) {
    // A long frame grew the buffer and has been consumed: give the memory back.
    buf_.reset(new char[initial_capacity_]);
    capacity_ = initial_capacity_;
    start_ = end_ = 0;
  }
  if (capacity_ - end_ < min_room && start_ > 0) {
    // The consumed prefix is dead space: move the partial frame to the front.
    std::memmove(buf_.get(), buf_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  if (capacity_ - end_ < min_room) {
    // Only when a frame longer than the buffer is being assembled (wire messages).
    const size_t grown = std::max(capacity_ * 2, end_ + min_room);
    std::unique_ptr<char[]> bigger(new char[grown]);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    capacity_ = grown;
  }
  size_t want = capacity_ - end_;
  if (max_bytes > 0) want = std::min(want, max_bytes);
  const ssize_t got = ::recv(fd_, buf_.get() + end_, want, dont_wait ? MSG_DONTWAIT : 0);
  if (got > 0) end_ += static_cast<size_t>(got);
  return Classify(got);
}

SocketReader::Result SocketReader::ReadDirect(char* dst, size_t n, size_t* got) {
  const ssize_t r = ::recv(fd_, dst, n, MSG_DONTWAIT);
  *got = r > 0 ? static_cast<size_t>(r) : 0;
  return Classify(r);
}

SocketReader::Result SocketReader::Classify(long got) {
  if (got > 0) return kData;
  if (got == 0) return kClosed;
  if (errno == EINTR) return kInterrupted;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return kWouldBlock;
  last_errno_ = errno;
  return kError;
}

}  // namespace nova
