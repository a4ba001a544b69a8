// The tcp backend of the exchange transport (see transport.h for the semantics and
// docs/transport.md for the frame format).
//
// Threads:
//  - options.xchg_threads exchange threads, each an epoll loop owning lane k of every peer
//    (a TcpLane). Callers hand operations to the lane's thread through a task queue + eventfd;
//    the thread frames them, applies peers' one-sided ops to registered memory and runs
//    completions. This is the NIC's role in RDMA.
//  - one listener thread: accepts connections and runs the server side of the handshake.
//  - one reconnect thread: re-establishes peers we connected to after they fail.
//
// Peer life cycle: Connecting -> Up -> Down (-> Up again after a reconnect) or Closed.
// A peer's lanes carry its generation; a lane failure takes the whole peer down (every
// lane is closed and its pending ops fail), since RDMA connections fail per QP but the
// components above treat a peer as one unit.
//
// Lock order: peers_mu_ before XchgThread::mu. regions have their own lock (never held
// while taking another).
//
// Thread safety: all public methods are thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/transport/region_table.h"
#include "common/transport/tcp_lane.h"
#include "common/transport/transport.h"

namespace nova::transport {

class TcpTransport final : public Transport {
 public:
  // `handler` must outlive this transport.
  TcpTransport(const TransportOptions& options, TransportHandler* handler);
  ~TcpTransport() override;

  Status Init() override;
  Status Start() override;
  void Shutdown() override;

  std::string listen_address() const override;
  const TransportOptions& options() const override { return options_; }

  Result<PeerId> Connect(const std::string& address) override;
  void Disconnect(PeerId peer) override;
  bool IsUp(PeerId peer) const override;
  Result<PeerInfo> GetPeerInfo(PeerId peer) const override;

  Result<MemoryRegion> RegisterMemory(void* base, uint64_t length, uint32_t access) override;
  Status DeregisterMemory(const MemoryRegion& region) override;

  Status Send(PeerId peer, std::string_view msg, Completion done, int lane) override;
  Status Write(PeerId peer, const MemoryRegion& local, uint64_t local_offset, uint64_t length,
               RemoteAddr remote, std::optional<uint32_t> imm, Completion done,
               int lane) override;
  Status Read(PeerId peer, RemoteAddr remote, uint64_t length, const MemoryRegion& local,
              uint64_t local_offset, Completion done, int lane) override;

  TransportStats GetStats() const override;

 private:
  enum class PeerState { kConnecting, kUp, kDown, kClosed };
  struct Peer {
    PeerId id = kInvalidPeer;
    std::string name;
    std::string listen_address;   // as the peer announced it
    std::string connect_address;  // what Connect() was given; empty for accepted peers
    uint64_t incarnation = 0;
    PeerState state = PeerState::kConnecting;
    uint64_t generation = 0;      // of the current (or last) set of lanes
    int lanes_open = 0;           // lanes of `generation` not yet closed
    bool reconnect = false;       // reconnect after failure (initiated, not Disconnect()ed)
    int backoff_ms = 0;
    bool installing = false;      // a new lane set is replacing the current one
    bool down_pending = false;    // OnPeerDown is running
    Status down_reason;
  };
  struct XchgThread;
  using Task = std::function<void(XchgThread&)>;
  struct XchgThread {
    int index = 0;
    std::thread thread;
    int epoll_fd = -1;
    int event_fd = -1;
    Mutex mu;
    std::vector<Task> tasks GUARDED_BY(mu);
    // Owned by the thread itself (touched only on it):
    struct Slot {
      std::unique_ptr<TcpLane> lane;
      bool reading = false;   // EPOLLIN wanted (set once the peer is announced up)
      bool in_epoll = false;
      uint32_t events = 0;    // current epoll interest
    };
    std::unordered_map<PeerId, Slot> lanes;
    std::vector<PeerId> dirty;  // lanes that may have output to flush
    bool stop = false;
    // Once set, tasks run inline on the poster's thread (under mu).
    bool exited GUARDED_BY(mu) = false;

    // For a task: whether it runs inline because the thread has exited. A task runs either
    // on this thread before it exits (only this thread sets `exited`, as it exits) or under
    // mu, so it may read the flag without taking mu; the analysis cannot tell which case.
    bool TaskRunsAfterExit() const NO_THREAD_SAFETY_ANALYSIS { return exited; }
  };
  // The connected, authenticated fds of one peer, one per lane, ready to be adopted.
  struct LaneSet {
    std::string name;
    std::string listen_address;
    uint64_t incarnation = 0;
    std::vector<int> fds;  // index = lane
  };

  void XchgLoop(XchgThread* t);
  void RunTasks(XchgThread* t);
  void PostTask(int lane, Task task);
  void FlushDirty(XchgThread* t);
  // Sends the deferred acknowledgments (TcpLane::HasDeferredAcks) of t's lanes that are
  // kAckDelay old; returns the epoll timeout until the next is due (ms, -1: none).
  int ReleaseDueAcks(XchgThread* t);
  // How long a received SEND's acknowledgment may wait for a frame to ride with.
  static constexpr std::chrono::milliseconds kAckDelay{1};
  void UpdateInterest(XchgThread* t, XchgThread::Slot* slot);
  // Fails an op whose lane is gone.
  Status LaneGoneStatus() const;
  // Closes the lane of `peer` on thread t (if it is of generation `gen`) and fails its ops.
  void CloseLane(XchgThread* t, PeerId peer, uint64_t gen, const Status& why);
  // Records that one lane of peer/gen closed; the last one raises OnPeerDown.
  void LaneClosed(PeerId peer, uint64_t gen, const Status& why);
  // Hands the fds to the xchg threads as generation `gen` of `peer`; marks it up.
  void InstallLanes(PeerId peer, LaneSet set);

  // Client side of the handshake for every lane.
  Result<LaneSet> DialLanes(const std::string& address);
  Status DialLane(const std::string& address, int lane, LaneSet* set);
  void ListenLoop();
  void AcceptOne(int fd);
  void ReconnectLoop();
  void ScheduleReconnect(Peer* p) REQUIRES(peers_mu_);

  // Validates a post and picks the lane's thread. Returns the peer's generation.
  Status PreparePost(PeerId peer, int* lane, uint64_t* gen);
  Status CheckLocal(const MemoryRegion& local, uint64_t offset, uint64_t length) const;

  // Constant after construction / Init:
  const TransportOptions options_;
  TransportHandler* const handler_;  // must outlive this
  uint64_t incarnation_ = 0;
  LaneEnv lane_env_;

  RegionTable regions_;
  TransportCounters counters_;

  std::vector<std::unique_ptr<XchgThread>> xchg_;
  int listen_fd_ = -1;
  int listen_wake_fd_ = -1;  // eventfd that wakes the listener on shutdown
  uint16_t bound_port_ = 0;
  std::thread listener_;
  std::thread reconnector_;
  std::atomic<bool> started_{false};
  std::atomic<bool> shutting_down_{false};
  Mutex lifecycle_mu_;  // serializes Start/Shutdown
  // One Connect per address at a time: two racing dials to one peer would each install a
  // lane set, closing the other's, and both ends' reconnects would then fight forever.
  Mutex connect_mu_;
  std::map<std::string, std::shared_ptr<Mutex>> connecting_ GUARDED_BY(connect_mu_);

  mutable Mutex peers_mu_;
  CondVar peers_cv_;  // lanes closed / reconnect due / shutdown
  std::map<PeerId, Peer> peers_ GUARDED_BY(peers_mu_);
  PeerId next_peer_id_ GUARDED_BY(peers_mu_) = 1;
  std::multimap<MonoTime, PeerId> reconnect_queue_ GUARDED_BY(peers_mu_);
  // Accepted lanes waiting for the rest of their set, keyed by (name, incarnation).
  std::map<std::pair<std::string, uint64_t>, std::pair<MonoTime, LaneSet>> assembling_
      GUARDED_BY(peers_mu_);
};

}  // namespace nova::transport
