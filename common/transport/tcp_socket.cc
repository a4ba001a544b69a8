#include "common/transport/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nova::transport {

namespace {

constexpr int kListenBacklog = 128;

// Waits until fd is ready for `events` or the deadline passes.
Status WaitFd(int fd, short events, Deadline deadline, const char* what) {
  while (true) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining());
    if (remaining.count() <= 0 && deadline.Expired()) {
      return Status::TimedOut(std::string("timed out waiting to ") + what);
    }
    pollfd p{fd, events, 0};
    int timeout_ms = static_cast<int>(std::max<int64_t>(1, remaining.count()));
    int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return Status::OK();
    if (r < 0 && errno != EINTR) return Status::FromErrno(std::string("poll to ") + what, errno);
  }
}

Status Resolve(const std::string& host, uint16_t port, sockaddr_in* out) {
  std::memset(out, 0, sizeof(*out));
  out->sin_family = AF_INET;
  out->sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &out->sin_addr) == 1) return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  out->sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return Status::OK();
}

}  // namespace

Status ParseHostPort(const std::string& address, std::string* host, uint16_t* port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::InvalidArgument("address '" + address + "' is not host:port");
  }
  const std::string port_str = address.substr(colon + 1);
  uint32_t p = 0;
  for (char c : port_str) {
    if (c < '0' || c > '9') return Status::InvalidArgument("bad port in '" + address + "'");
    p = p * 10 + static_cast<uint32_t>(c - '0');
    if (p > 65535) return Status::InvalidArgument("port out of range in '" + address + "'");
  }
  *host = address.substr(0, colon);
  *port = static_cast<uint16_t>(p);
  return Status::OK();
}

Result<int> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port) {
  sockaddr_in addr;
  NOVA_RETURN_NOT_OK(Resolve(host, port, &addr));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const std::string where = host + ":" + std::to_string(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Status::FromErrno("bind " + where, errno);
    ::close(fd);
    return s;
  }
  if (::listen(fd, kListenBacklog) != 0) {
    Status s = Status::FromErrno("listen " + where, errno);
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

Result<int> ConnectTcp(const std::string& address, Deadline deadline) {
  std::string host;
  uint16_t port;
  NOVA_RETURN_NOT_OK(ParseHostPort(address, &host, &port));
  sockaddr_in addr;
  NOVA_RETURN_NOT_OK(Resolve(host, port, &addr));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 && errno != EINPROGRESS) {
    Status s = Status::NetworkError("connect " + address + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  if (rc != 0) {
    Status s = WaitFd(fd, POLLOUT, deadline, ("connect to " + address).c_str());
    int err = 0;
    socklen_t len = sizeof(err);
    if (s.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
      s = Status::NetworkError("connect " + address + ": " + std::strerror(err));
    }
    if (!s.ok()) {
      ::close(fd);
      return s;
    }
  }
  Status s = SetNonBlocking(fd, false);
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  return fd;
}

Status TuneSocket(int fd, int buffer_bytes) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return Status::FromErrno("setsockopt TCP_NODELAY", errno);
  }
  if (buffer_bytes > 0) {
    // Best effort: the kernel caps these at net.core.{r,w}mem_max.
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  return Status::OK();
}

Status SetNonBlocking(int fd, bool nonblocking) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) return Status::FromErrno("fcntl F_GETFL", errno);
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return Status::FromErrno("fcntl F_SETFL", errno);
  return Status::OK();
}

Status WriteFully(int fd, const char* data, size_t n, Deadline deadline) {
  while (n > 0) {
    // Send first: a message usually fits in the socket's buffer at once, and a poll before
    // every send would cost a system call per message for nothing.
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        NOVA_RETURN_NOT_OK(WaitFd(fd, POLLOUT, deadline, "write"));
        continue;
      }
      return Status::NetworkError(std::string("send: ") + std::strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status ReadFully(int fd, char* data, size_t n, Deadline deadline) {
  while (n > 0) {
    NOVA_RETURN_NOT_OK(WaitFd(fd, POLLIN, deadline, "read"));
    ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
    if (r == 0) return Status::NetworkError("connection closed by peer");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Status::NetworkError(std::string("recv: ") + std::strerror(errno));
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

Status WriteHandshakeFrame(int fd, const std::string& payload, Deadline deadline) {
  FrameHeader h;
  h.type = FrameType::kHandshake;
  h.payload_length = static_cast<uint32_t>(payload.size());
  std::string frame = EncodeFrame(h, payload);
  return WriteFully(fd, frame.data(), frame.size(), deadline);
}

Result<std::string> ReadHandshakeFrame(int fd, Deadline deadline) {
  char hdr[kFrameHeaderBytes];
  NOVA_RETURN_NOT_OK(ReadFully(fd, hdr, sizeof(hdr), deadline));
  FrameLimits limits;
  limits.handshake_phase = true;
  FrameHeader h;
  NOVA_RETURN_NOT_OK(DecodeFrameHeader(hdr, limits, &h));
  std::string payload(h.payload_length, '\0');
  NOVA_RETURN_NOT_OK(ReadFully(fd, payload.data(), payload.size(), deadline));
  return payload;
}

}  // namespace nova::transport
