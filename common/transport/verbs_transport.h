// The `verbs` backend of the exchange transport: rdma-core RC queue pairs.
//
// Connection set-up uses librdmacm (one cm thread); the data path uses libibverbs directly:
//  - one protection domain (of the device the listener is bound to) for every QP and every
//    registered region;
//  - lane k of a peer is one RC QP whose send and receive completions go to the CQ of xchg
//    thread k. The xchg thread is the only thread that posts to or polls that QP, so the
//    per-QP bookkeeping (posted-op FIFO, send buffers, reassembly, handshake) needs no lock;
//    application threads hand operations over through the thread's command queue;
//  - after a QP is established, the handshake of handshake.h runs over SEND/RECV on it;
//  - Send copies the message into registered send buffers (or posts it inline when it fits),
//    splitting messages larger than a receive buffer into fragments with a one-byte header;
//  - Write/Read are RDMA_WRITE(_WITH_IMM)/RDMA_READ straight from/to the caller's region;
//  - selective signalling: only every 16th WR, and the last WR of each posted chain, is
//    signaled; a signaled completion retires every earlier WR of that QP in order.
// verbs_internal.h has the lane life cycle, the wire format and the design notes, and says
// which verbs_*.cc file holds which part; verbs_lane.cc has the posted-op invariants.
//
// Differences from the tcp backend, all forced by RDMA hardware:
//  - A one-sided op that the target's NIC refuses (bad rkey, out of bounds, access flags)
//    puts the QPs of that lane at both ends into the error state. The op fails with
//    PermissionDenied or OutOfRange (named from the regions the peer advertised), the other
//    ops in flight on that lane fail with NetworkError, and the lane is re-established
//    underneath: the peer stays up and ops posted meanwhile wait and then run in order.
//  - Messages to a peer land in its pre-posted receive buffers; a slow receiver
//    back-pressures the sender through RNR retries instead of socket buffers.
//  - Connect() dials lane 0, authenticates, then dials the other lanes.
//
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "common/transport/transport_counters.h"

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_wc;
struct rdma_cm_id;
struct rdma_event_channel;
struct rdma_cm_event;
struct rdma_conn_param;

namespace nova::transport {

// Returns a verbs Transport. Its Init() fails with Status::Unavailable("no RDMA device ...")
// when ibv_get_device_list finds no device. `handler` must outlive the transport.
std::unique_ptr<Transport> NewVerbsTransport(const TransportOptions& options,
                                             TransportHandler* handler);

// An rdma-core implementation of Transport. Create it with NewVerbsTransport.
//
// Thread safety: all public methods are thread-safe. Shutdown() and DeregisterMemory() block
// and therefore must not be called from a handler method or a completion callback.
class VerbsTransport final : public Transport {
 public:
  // `handler` must outlive the transport. Cannot fail; see Init().
  VerbsTransport(const TransportOptions& options, TransportHandler* handler);
  // Calls Shutdown().
  ~VerbsTransport() override;

  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  // Validates options, opens the device, binds the listen address (without listening yet),
  // allocates the protection domain and one CQ per xchg thread. Returns Unavailable when no
  // RDMA device exists, InvalidArgument for bad options, IOError for verbs/rdma_cm failures.
  Status Init() override;
  // Starts listening and starts the cm thread and the xchg threads.
  // REQUIRES: Init() succeeded; called once.
  Status Start() override;
  // Fails every outstanding op with Aborted, disconnects every peer, joins the threads and
  // frees every verbs object (QPs, CQs, channels, MRs, PD, cm ids, event channel) in
  // dependency order. Idempotent.
  void Shutdown() override;

  std::string listen_address() const override;
  const TransportOptions& options() const override { return options_; }

  // See Transport. Errors: InvalidArgument (bad address, lane-count mismatch),
  // PermissionDenied (cluster secret), NetworkError (refused, unreachable, lost), TimedOut,
  // IllegalState (not started or shut down).
  Result<PeerId> Connect(const std::string& address) override;
  // See Transport. The peer's handler sees OnPeerDown(Aborted).
  void Disconnect(PeerId peer) override;
  bool IsUp(PeerId peer) const override;
  Result<PeerInfo> GetPeerInfo(PeerId peer) const override;

  // The region is registered with IBV_ACCESS_LOCAL_WRITE plus REMOTE_READ/REMOTE_WRITE per
  // `access`; rkey/lkey come from the ibv_mr (rkey is 0 for kLocalOnly). Remotely accessible
  // regions are advertised to peers (only to name refused ops' errors). Errors:
  // InvalidArgument, ResourceExhausted (locked-memory limit), IOError, Unavailable.
  // Blocks while the kernel pins the memory: not for handlers or completions.
  Result<MemoryRegion> RegisterMemory(void* base, uint64_t length, uint32_t access) override;
  // Withdraws the advertisement, waits until none of our posted ops uses the region, then
  // deregisters it. Returns NotFound for an unknown region. Not for handlers or completions.
  Status DeregisterMemory(const MemoryRegion& region) override;

  // See Transport. Not posted (done never runs): InvalidArgument (too large, bad lane, unknown
  // peer, local range outside `local`), Unavailable (peer down, not running),
  // ResourceExhausted (too many ops queued on the lane). Completions: OK, PermissionDenied or
  // OutOfRange (refused by the peer's NIC), NetworkError, Aborted (shutdown).
  Status Send(PeerId peer, std::string_view msg, Completion done, int lane = -1) override;
  Status Write(PeerId peer, const MemoryRegion& local, uint64_t local_offset, uint64_t length,
               RemoteAddr remote, std::optional<uint32_t> imm, Completion done,
               int lane = -1) override;
  Status Read(PeerId peer, RemoteAddr remote, uint64_t length, const MemoryRegion& local,
              uint64_t local_offset, Completion done, int lane = -1) override;

  TransportStats GetStats() const override;

 private:
  struct Op;
  struct Lane;
  struct Session;
  struct Peer;
  struct Region;
  struct XchgThread;
  struct XchgCommand;
  struct CmThread;
  struct CmCommand;
  using LanePtr = std::shared_ptr<Lane>;
  using Callbacks = std::vector<std::function<void()>>;

  // --- public-API helpers (verbs_transport.cc) ---
  int PickLane(int lane) const;
  // Hands `op` to lane `lane` of `peer`. On error `op` is dropped without running its done.
  Status SubmitLocked(PeerId peer, int lane, std::unique_ptr<Op> op) REQUIRES(mu_);
  Status PinRegionLocked(const MemoryRegion& local, uint64_t offset, uint64_t length, char** addr,
                         uint32_t* lkey) REQUIRES(mu_);
  // Undoes PinRegionLocked.
  void ReleaseRegionLocked(uint32_t region_id) REQUIRES(mu_);
  void ReleaseRegion(uint32_t region_id) EXCLUDES(mu_);

  // --- peers and sessions (verbs_session.cc) ---
  std::shared_ptr<Session> NewSessionLocked(bool initiator) REQUIRES(mu_);
  LanePtr NewInitiatorLaneLocked(Session* s, int index, const std::string& address,
                                 const void* sockaddr, uint32_t sockaddr_len) REQUIRES(mu_);
  std::shared_ptr<Session> StartSessionLocked(const std::string& address, const void* sockaddr,
                                              uint32_t sockaddr_len, PeerId reconnect_of)
      REQUIRES(mu_);
  // Any failure of `lane` fails its whole session (peer down).
  void FailLane(const LanePtr& lane, const Status& why) EXCLUDES(mu_);  // any thread
  void FailLaneLocked(const LanePtr& lane, const Status& why) REQUIRES(mu_);
  // `lane`'s QP broke because of a refused one-sided op: replace only that lane if its
  // session is Up (see the life cycle in verbs_internal.h), else as FailLane.
  void ResetLane(const LanePtr& lane, const Status& why) EXCLUDES(mu_);  // any thread
  void ResetLaneLocked(const LanePtr& lane, const Status& why) REQUIRES(mu_);
  void FlushParkedLocked(Session* s, int lane) REQUIRES(mu_);
  void SubmitControlLocked(Session* s, std::string frame) REQUIRES(mu_);
  void AdvertiseRegionLocked(const MemoryRegion& region, bool add) REQUIRES(mu_);
  void FailSessionLocked(Session* s, const Status& why) REQUIRES(mu_);
  void SessionGoneLocked(Session* s) REQUIRES(mu_);
  void SessionUpLocked(Session* s, Callbacks* after_unlock) REQUIRES(mu_);
  Peer& FindOrCreatePeerLocked(const std::string& name) REQUIRES(mu_);
  // Called on the lane's xchg thread when the lane's handshake succeeded. Returns the PeerId
  // messages on this lane are delivered for, or why the lane must be refused.
  Result<PeerId> LaneAuthenticated(const LanePtr& lane, Callbacks* after_unlock) EXCLUDES(mu_);

  // --- cm thread (verbs_cm.cc) ---
  void CmLoop();
  void PushCm(CmCommand c);
  void RunCmCommands() EXCLUDES(mu_);
  void ProcessCmEvents();
  void HandleCmEvent(const rdma_cm_event& ev, const char* private_data, size_t private_len)
      EXCLUDES(mu_);
  void OnConnectRequest(rdma_cm_id* id, const rdma_conn_param& param, const char* private_data,
                        size_t private_len);
  void ProcessAsyncEvents();
  void CheckDeadlines() EXCLUDES(mu_);
  void StartLane(const LanePtr& lane);
  Status CreateQp(Lane* lane);
  void TeardownLane(const LanePtr& lane, const Status& why);
  void DestroyLane(const LanePtr& lane) EXCLUDES(mu_);
  static void OnQpAsyncEvent(void* self, uint32_t qp_num, int event_type);

  // --- xchg threads (verbs_lane.cc; the handshake in verbs_handshake.cc) ---
  void XchgLoop(XchgThread* x);
  void PushXchg(int thread, XchgCommand c);
  void RunXchgCommands(XchgThread* x);
  void RunXchgCommand(XchgThread* x, XchgCommand& c);
  void HandleWc(XchgThread* x, const ibv_wc& wc);
  void HandleSendWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc);
  void HandleRecvWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc);
  Status ClassifyWcError(Lane* lane, const ibv_wc& wc, const Op& op) EXCLUDES(mu_);
  void HandleControl(const LanePtr& lane, const std::string& msg) EXCLUDES(mu_);
  void HandleHandshake(XchgThread* x, const LanePtr& lane, const std::string& msg);
  void StartHandshake(XchgThread* x, const LanePtr& lane);
  void SendInternal(XchgThread* x, const LanePtr& lane, std::string frame, Completion done);
  void RefuseLane(XchgThread* x, const LanePtr& lane, const Status& why);
  void ProtocolViolation(const LanePtr& lane, const std::string& what);
  void PostLane(Lane* lane);
  bool PostChain(Lane* lane);
  bool RepostRecv(Lane* lane, uint32_t slot);
  void MarkFailing(Lane* lane, const Status& why);
  // Stops posting on `lane`, reports it (ResetLane if `reset`, else FailLane) and then
  // completes what can be completed.
  void BreakLane(const LanePtr& lane, const Status& why, bool reset) EXCLUDES(mu_);
  void CompleteFrontOps(Lane* lane);
  void CompleteOp(Lane* lane, std::unique_ptr<Op> op, const Status& s) EXCLUDES(mu_);
  void MaybeDrained(XchgThread* x, const LanePtr& lane);
  void AbandonLane(XchgThread* x, const LanePtr& lane, const Status& why);

  // The device: the verbs objects every QP and region shares and what Init() learnt of the
  // device. One job: own what Init() opened, until Shutdown() frees it.
  // Thread safety: written only by Init() and Start() (before any thread of ours runs) and
  // by Shutdown() (after they were joined); constant, and so readable without a lock, between.
  struct Device {
    ibv_context* ctx = nullptr;             // owned by librdmacm (one per device per process)
    ibv_pd* pd = nullptr;                   // for every QP and every registered region
    rdma_event_channel* channel = nullptr;  // the cm thread's rdma_cm events
    rdma_cm_id* listen_id = nullptr;
    uint8_t max_rd_atomic = 0;       // responder resources we grant
    uint8_t max_init_rd_atomic = 0;  // outstanding RDMA READs we issue per QP
    int max_lanes_per_thread = 0;    // bounded so a shared CQ can never overflow
    uint16_t listen_port = 0;        // host order; set by Start() before any thread
  };

  // The peers and the connection attempts to them (sessions), and every lane not yet
  // destroyed. One job: who we are connected to and how far each attempt got; the life
  // cycle it records is in verbs_internal.h.
  // Thread safety: guarded as a whole by mu_ (VerbsTransport::conns_ is GUARDED_BY(mu_)).
  struct ConnTable {
    PeerId next_peer_id = 1;
    uint64_t next_session_serial = 1;
    std::map<PeerId, std::unique_ptr<Peer>> peers;
    std::map<std::string, PeerId> peer_by_name;
    std::map<uint64_t, std::shared_ptr<Session>> sessions;  // live ones
    std::map<std::string, Session*> connecting;  // initiated, not yet Up, by dialled address
    std::map<std::string, Session*> accepting;   // accepted, not yet Up, by peer name
    std::map<Lane*, LanePtr> lanes;              // every lane not destroyed
    std::map<Lane*, MonoTime> orphans;           // accepted, not authenticated: handshake deadline
  };

  // Our registered memory regions. One job: which regions exist, and how many of our posted
  // one-sided ops use each (DeregisterMemory waits for none).
  // Thread safety: guarded as a whole by mu_ (VerbsTransport::mem_ is GUARDED_BY(mu_)), so
  // that pinning a region and handing its op to a lane take one lock, not two.
  struct RegionSet {
    uint32_t next_id = 1;
    std::map<uint32_t, std::unique_ptr<Region>> by_id;
  };

  // Constant after construction.
  const TransportOptions options_;
  TransportHandler* const handler_;  // must outlive this
  const uint64_t incarnation_;

  Device dev_;
  // Constant after Init(): one per xchg thread, each with its own command lock.
  std::vector<std::unique_ptr<XchgThread>> xchg_;
  // Started by Start(), joined by Shutdown(); its command queue has its own lock.
  std::unique_ptr<CmThread> cm_;

  // Lock order: shutdown_mu_ -> verbs_mu_ -> mu_ -> {XchgThread::mu, CmThread::mu}. The
  // process-wide QP registry lock (verbs_cm.cc) may be held while taking CmThread::mu.
  // Nothing takes mu_ while holding XchgThread::mu or CmThread::mu.
  Mutex shutdown_mu_ ACQUIRED_BEFORE(verbs_mu_);
  bool shut_down_ GUARDED_BY(shutdown_mu_) = false;
  // Serializes ibv_reg_mr/ibv_dereg_mr with Shutdown()'s ibv_dealloc_pd, without holding
  // mu_ (and so blocking the data path) while the kernel pins or unpins memory.
  Mutex verbs_mu_ ACQUIRED_BEFORE(mu_);

  mutable Mutex mu_;
  CondVar cv_;  // signalled on session state, region and lane-count changes
  bool initialized_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  ConnTable conns_ GUARDED_BY(mu_);
  RegionSet mem_ GUARDED_BY(mu_);

  TransportCounters stats_;
};

}  // namespace nova::transport
