// RpcEndpoint: request/response messaging between components over an exchange Transport.
//
// A process has one Transport and one RpcEndpoint, which is the transport's handler. It
//  - sends requests (Call) encoded with common/wire/message.h and matches responses by
//    request id; every call completes exactly once: with the response, the remote error, a
//    NetworkError when the peer goes down, or TimedOut at its deadline;
//  - dispatches incoming requests by message type to registered services, on the service's
//    thread pool, or on the xchg thread that received them for a service registered
//    without one (handlers that never block); a request for an unknown
//    type is answered with NotSupported, one that finds the pool full with ResourceExhausted;
//  - fans out WRITE-with-immediate events and peer up/down events to registered observers.
//
// Thread safety: all methods are thread-safe. Callbacks, observers and inline services run
// on transport threads and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "common/transport/transport.h"
#include "common/wire/message.h"

namespace nova::rpc {

using transport::PeerId;

// Completes a call: OK and the response payload, or the error.
using ResponseCallback = std::function<void(const Status& status, std::string payload)>;

class RpcEndpoint;

// Answers one request. Exactly one Reply/ReplyError should be called; a Responder destroyed
// without replying answers Aborted (so the caller is never left waiting for its deadline).
// Movable, not copyable.
class Responder {
 public:
  // A request_id of kNotificationId marks a one-way notification: nothing is sent back.
  Responder(RpcEndpoint* endpoint, PeerId peer, uint16_t type, uint64_t request_id)
      : endpoint_(endpoint), peer_(peer), type_(type), request_id_(request_id),
        done_(request_id == kNotificationId) {}
  static constexpr uint64_t kNotificationId = 0;
  Responder(Responder&& o) noexcept;
  Responder& operator=(Responder&&) = delete;
  Responder(const Responder&) = delete;
  ~Responder();

  void Reply(std::string_view payload);
  void ReplyError(const Status& error);
  PeerId peer() const { return peer_; }

 private:
  RpcEndpoint* endpoint_;  // must outlive the responder
  PeerId peer_;
  uint16_t type_;
  uint64_t request_id_;
  bool done_ = false;
};

// In a service's handler: if `expr` (a Status) fails, counts it in `error_counter` (a
// Counter*), answers the request with the error through `responder` (a Responder*) and
// returns.
#define NOVA_REPLY_IF_ERROR(responder, expr, error_counter) \
  do {                                                       \
    Status _nova_reply_status = (expr);                      \
    if (!_nova_reply_status.ok()) {                          \
      (error_counter)->Increment();                          \
      return (responder)->ReplyError(_nova_reply_status);    \
    }                                                        \
  } while (0)

class RpcService {
 public:
  virtual ~RpcService() = default;
  // Handles one request of a registered type. `payload` is owned by the callee.
  virtual void HandleRequest(PeerId peer, uint16_t type, std::string payload,
                             Responder responder) = 0;
};

// Observes peers and immediates (e.g. a StoC's persistent appends).
class EndpointObserver {
 public:
  virtual ~EndpointObserver() = default;
  virtual void OnPeerUp(const transport::PeerInfo& peer) { (void)peer; }
  virtual void OnPeerDown(PeerId peer, const Status& why) {
    (void)peer;
    (void)why;
  }
  // Return true if this observer consumed the immediate.
  virtual bool OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) {
    (void)peer;
    (void)imm;
    (void)length;
    return false;
  }
};

struct RpcEndpointOptions {
  // Largest payload accepted in a message (matches the transport's max_message_bytes).
  uint64_t max_payload_bytes = transport::kDefaultMaxMessageBytes;
};

class RpcEndpoint : public transport::TransportHandler {
 public:
  explicit RpcEndpoint(const RpcEndpointOptions& options = RpcEndpointOptions());
  ~RpcEndpoint() override;  // fails pending calls with Aborted
  RpcEndpoint(const RpcEndpoint&) = delete;
  RpcEndpoint& operator=(const RpcEndpoint&) = delete;

  // Binds the transport this endpoint sends on. `t` must be created with this endpoint as
  // its handler and must outlive it... or be shut down first.
  // REQUIRES: called once, before t->Start().
  void Attach(transport::Transport* t) { transport_ = t; }
  transport::Transport* transport() const { return transport_; }

  // Routes requests whose type lies in `range` to `service`, run on `pool` (nullptr: inline
  // on the receiving xchg thread; only for handlers that never block). Both must outlive
  // the endpoint. REQUIRES: before the transport starts; ranges do not overlap.
  void RegisterService(wire::TypeRange range, RpcService* service, ThreadPool* pool);
  // REQUIRES: before the transport starts. `observer` must outlive the endpoint.
  void AddObserver(EndpointObserver* observer);

  // Sends a request; `done` runs exactly once (see the class comment).
  void Call(PeerId peer, uint16_t type, std::string_view payload, Deadline deadline,
            ResponseCallback done, int lane = -1);
  // Blocking form of Call. Returns the response payload or the error.
  Result<std::string> CallSync(PeerId peer, uint16_t type, std::string_view payload,
                               std::chrono::milliseconds timeout, int lane = -1);

  // Sends a one-way notification (request id 0): the peer's service handles it and nothing
  // is answered. Returns the transport's posting error, if any.
  Status Notify(PeerId peer, uint16_t type, std::string_view payload, int lane = -1);

  uint64_t pending_calls() const;

  // transport::TransportHandler
  void OnPeerUp(const transport::PeerInfo& peer) override;
  void OnPeerDown(PeerId peer, const Status& why) override;
  void OnMessage(PeerId peer, std::string& payload) override;
  void OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) override;

 private:
  friend class Responder;
  using DeadlineMap = std::multimap<MonoTime, uint64_t>;
  struct Pending {
    PeerId peer = transport::kInvalidPeer;
    ResponseCallback done;
    std::optional<DeadlineMap::iterator> deadline;  // its entry in deadlines_, if any
  };
  struct Route {
    wire::TypeRange range;
    RpcService* service;
    ThreadPool* pool;
  };

  void SendResponse(PeerId peer, uint16_t type, uint64_t request_id, const Status& error,
                    std::string_view payload);
  // Removes and returns the pending call, if it is still there.
  bool TakePending(uint64_t request_id, Pending* out) EXCLUDES(mu_);
  // REQUIRES: mu_ held. Removes the call and its deadline entry.
  Pending ErasePendingLocked(std::unordered_map<uint64_t, Pending>::iterator it) REQUIRES(mu_);
  void TimeoutLoop() EXCLUDES(mu_);

  const RpcEndpointOptions options_;
  transport::Transport* transport_ = nullptr;
  // Set before the transport starts, then read-only:
  std::vector<Route> routes_;
  std::vector<EndpointObserver*> observers_;

  mutable Mutex mu_;
  // Signalled when a deadline before timeout_wakes_at_ is added, and by the destructor.
  CondVar cv_;
  uint64_t next_request_id_ GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  DeadlineMap deadlines_ GUARDED_BY(mu_);
  // When the timeout thread wakes next by itself: a call with an earlier deadline wakes it.
  MonoTime timeout_wakes_at_ GUARDED_BY(mu_) = MonoTime::min();
  bool stopping_ GUARDED_BY(mu_) = false;
  // Started by the constructor and joined by the destructor, the only two places that touch
  // it (so it needs no lock).
  std::thread timeout_thread_;
};

}  // namespace nova::rpc
