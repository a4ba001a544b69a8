// Small blocking socket helpers for the tcp backend's connection set-up (listen, connect
// with a deadline, whole-frame I/O during the handshake). Data transfer after the handshake
// is non-blocking and lives in tcp_lane.cc.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "common/transport/tcp_frame.h"

namespace nova::transport {

// Splits "host:port". Returns InvalidArgument for anything else.
Status ParseHostPort(const std::string& address, std::string* host, uint16_t* port);

// Opens a listening socket on host:port (port 0 = ephemeral); *bound_port gets the port.
Result<int> ListenTcp(const std::string& host, uint16_t port, uint16_t* bound_port);

// Connects to "host:port" before `deadline`. Returns the connected (blocking) fd.
Result<int> ConnectTcp(const std::string& address, Deadline deadline);

// Sets TCP_NODELAY, socket buffer sizes and close-on-exec.
Status TuneSocket(int fd, int buffer_bytes);
Status SetNonBlocking(int fd, bool nonblocking);

// Writes/reads exactly n bytes before the deadline (blocking fd, poll-based).
Status WriteFully(int fd, const char* data, size_t n, Deadline deadline);
Status ReadFully(int fd, char* data, size_t n, Deadline deadline);

// Handshake-phase frames: a kHandshake header + payload.
Status WriteHandshakeFrame(int fd, const std::string& payload, Deadline deadline);
Result<std::string> ReadHandshakeFrame(int fd, Deadline deadline);

}  // namespace nova::transport
