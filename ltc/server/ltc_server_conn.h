// LtcServer::Conn: the server's state of one client connection, shared by ltc_server.cc
// (I/O) and ltc_server_handlers.cc (snapshots). Private to the server.
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "ltc/server/ltc_server.h"

namespace nova::ltc {

// One client connection. Shared by its reader and the workers serving its requests; the
// last owner closes the socket and releases the snapshots the client still held.
struct LtcServer::Conn {
  explicit Conn(int f, uint64_t i) : fd(f), id(i) {}
  ~Conn() {
    for (auto& [sid, snap] : snapshots) {
      if (auto b = snap.backend.lock()) b->ReleaseSnapshot(snap.handle);
    }
    ::close(fd);
  }
  const int fd;
  const uint64_t id;
  std::thread reader;  // set under conns_mu_

  std::mutex write_mu;  // a leaf: serializes responses
  bool broken = false;  // protected by write_mu: a write failed, the socket is shut down

  std::mutex mu;
  std::condition_variable cv;
  // Protected by mu:
  int inflight = 0;
  struct Snap {
    uint32_t range_id;
    RangeInfo info;
    // Weak: a snapshot must not keep a range open after it has left the assignment.
    std::weak_ptr<RangeBackend> backend;
    RangeBackend::Snapshot handle;
  };
  std::map<uint64_t, Snap> snapshots;
};

}  // namespace nova::ltc
