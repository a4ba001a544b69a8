// One lane (connection) of the tcp backend: the non-blocking state machine that plays the
// RDMA NIC for one queue pair. It frames outgoing operations, applies peers' one-sided
// WRITE/READ to registered memory (checked against the RegionTable), delivers SENDs and
// immediates to the handler, and completes our operations when their replies arrive.
// It receives through a SocketReader (common/socket_reader.h, the receive buffer
// wire::MessageStream uses too): headers and small payloads through its buffer, large
// payloads straight from the socket into their destination.
//
// Thread safety: a lane is owned by one xchg thread; every method must be called on it.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/socket_reader.h"
#include "common/status.h"
#include "common/transport/region_table.h"
#include "common/transport/tcp_frame.h"
#include "common/transport/transport.h"
#include "common/transport/transport_counters.h"

namespace nova::transport {

// What a lane needs from its transport. Everything must outlive the lane.
struct LaneEnv {
  const RegionTable* regions = nullptr;
  TransportHandler* handler = nullptr;
  TransportCounters* counters = nullptr;
  FrameLimits limits;
};

class TcpLane {
 public:
  // Takes ownership of `fd` (connected, authenticated, non-blocking).
  TcpLane(int fd, PeerId peer, uint64_t generation, const LaneEnv& env);
  ~TcpLane();  // closes the fd; pending ops must have been failed (FailAll) before
  TcpLane(const TcpLane&) = delete;
  TcpLane& operator=(const TcpLane&) = delete;

  int fd() const { return fd_; }
  PeerId peer() const { return peer_; }
  uint64_t generation() const { return generation_; }

  // Queue operations; `done` runs when the reply arrives or the lane fails.
  void PostSend(std::string msg, Completion done);
  void PostWrite(const char* src, uint64_t length, RemoteAddr remote, std::optional<uint32_t> imm,
                 Completion done);
  void PostRead(RemoteAddr remote, uint64_t length, char* dst, Completion done);

  // Reads and processes what the socket has (bounded work per call). A non-OK Status means
  // the lane is broken (peer closed, protocol violation) and must be closed.
  Status OnReadable();
  // Writes queued frames until done or the socket is full. Non-OK: lane broken.
  Status Flush();
  bool HasPendingOutput() const { return !out_.empty(); }

  // Acknowledgments of received SENDs are deferred: they go out in front of the next frame
  // queued to the peer (a response, a request), so a request and its answer cost one
  // message each way instead of two, or when the transport releases them (its ack delay).
  // Only a SEND's completion waits for them (WRITE and READ replies are never deferred),
  // and nothing waits on that but error reporting.
  bool HasDeferredAcks() const { return !deferred_acks_.empty(); }
  MonoTime deferred_since() const { return deferred_since_; }
  // Queues the deferred acknowledgments, in order.
  void ReleaseDeferredAcks();
  // Completes every pending operation with `why` (the lane is going away).
  void FailAll(const Status& why);
  size_t pending_ops() const { return pending_.size(); }

 private:
  struct OutFrame {
    char header[kFrameHeaderBytes];
    const char* data = nullptr;  // payload not owned (caller's registered memory) ...
    std::string owned;           // ... or owned (messages, error text)
    bool uses_owned = false;
    uint64_t length = 0;         // payload bytes
    uint64_t written = 0;        // header + payload bytes already on the wire
    RegionPin pin;               // keeps the source region registered (READ responses)
  };
  struct PendingOp {
    uint64_t op_id;
    FrameType reply;  // kAck or kReadResp
    Completion done;
    char* read_dst = nullptr;
    uint64_t read_length = 0;
  };
  enum class RxState { kHeader, kPayload };

  void Queue(const FrameHeader& h, const char* data, uint64_t length, std::string owned,
             bool uses_owned, RegionPin pin);
  void QueueReply(FrameType type, uint64_t op_id, const Status& s);
  Status ConsumeBuffered();
  Status StartFrame();
  Status FinishFrame();
  // Copies up to n payload bytes (or skips them when discarding).
  void AcceptPayload(const char* src, uint64_t n);

  const int fd_;
  const PeerId peer_;
  const uint64_t generation_;
  const LaneEnv env_;

  uint64_t next_op_id_ = 1;
  std::deque<PendingOp> pending_;  // in posting order; replies arrive in the same order
  std::deque<OutFrame> out_;
  std::vector<uint64_t> deferred_acks_;  // op ids of received SENDs, in order
  MonoTime deferred_since_{};            // when the first of them was deferred

  // Receive side.
  SocketReader in_;  // reads fd_ (which it does not own)
  RxState rx_state_ = RxState::kHeader;
  FrameHeader rx_;
  char* rx_dst_ = nullptr;       // where payload goes; nullptr = discard
  uint64_t rx_remaining_ = 0;
  uint64_t rx_done_ = 0;
  std::string rx_owned_;         // message or error text
  RegionPin rx_pin_;             // target region of an incoming WRITE
  Status rx_reject_;             // why an incoming WRITE is refused (payload discarded)
};

}  // namespace nova::transport
