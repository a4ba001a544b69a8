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
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
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
  struct CmCommand;
  using LanePtr = std::shared_ptr<Lane>;
  using Callbacks = std::vector<std::function<void()>>;

  // --- public-API helpers (verbs_transport.cc) ---
  int PickLane(int lane) const;
  // Hands `op` to lane `lane` of `peer`. On error `op` is dropped without running its done.
  Status SubmitLocked(PeerId peer, int lane, std::unique_ptr<Op> op);  // REQUIRES(mu_)
  Status PinRegionLocked(const MemoryRegion& local, uint64_t offset, uint64_t length,
                         char** addr, uint32_t* lkey);  // REQUIRES(mu_)
  void ReleaseRegion(uint32_t region_id);               // EXCLUDES(mu_)

  // --- peers and sessions (verbs_session.cc), all REQUIRES(mu_) unless noted ---
  std::shared_ptr<Session> NewSessionLocked(bool initiator);
  LanePtr NewInitiatorLaneLocked(Session* s, int index, const std::string& address,
                                 const void* sockaddr, uint32_t sockaddr_len);
  std::shared_ptr<Session> StartSessionLocked(const std::string& address, const void* sockaddr,
                                              uint32_t sockaddr_len, PeerId reconnect_of);
  // Any failure of `lane` fails its whole session (peer down).
  void FailLane(const LanePtr& lane, const Status& why);  // EXCLUDES(mu_); any thread
  void FailLaneLocked(const LanePtr& lane, const Status& why);
  // `lane`'s QP broke because of a refused one-sided op: replace only that lane if its
  // session is Up (see the life cycle in verbs_internal.h), else as FailLane.
  void ResetLane(const LanePtr& lane, const Status& why);  // EXCLUDES(mu_); any thread
  void ResetLaneLocked(const LanePtr& lane, const Status& why);
  void FlushParkedLocked(Session* s, int lane);
  void SubmitControlLocked(Session* s, std::string frame);
  void AdvertiseRegionLocked(const MemoryRegion& region, bool add);
  void FailSessionLocked(Session* s, const Status& why);
  void SessionGoneLocked(Session* s);
  void SessionUpLocked(Session* s, Callbacks* after_unlock);
  Peer& FindOrCreatePeerLocked(const std::string& name);
  // Called on the lane's xchg thread when the lane's handshake succeeded. Returns the PeerId
  // messages on this lane are delivered for, or why the lane must be refused.
  Result<PeerId> LaneAuthenticated(const LanePtr& lane, Callbacks* after_unlock);  // EXCLUDES

  // --- cm thread (verbs_cm.cc) ---
  void CmLoop();
  void PushCm(CmCommand c);
  void RunCmCommands();
  void ProcessCmEvents();
  void HandleCmEvent(const rdma_cm_event& ev, const char* private_data, size_t private_len);
  void OnConnectRequest(rdma_cm_id* id, const rdma_conn_param& param, const char* private_data,
                        size_t private_len);
  void ProcessAsyncEvents();
  void CheckDeadlines();
  void StartLane(const LanePtr& lane);
  Status CreateQp(Lane* lane);
  void TeardownLane(const LanePtr& lane, const Status& why);
  void DestroyLane(const LanePtr& lane);
  static void OnQpAsyncEvent(void* self, uint32_t qp_num, int event_type);

  // --- xchg threads (verbs_lane.cc; the handshake in verbs_handshake.cc) ---
  void XchgLoop(XchgThread* x);
  void PushXchg(int thread, XchgCommand c);
  void RunXchgCommands(XchgThread* x);
  void RunXchgCommand(XchgThread* x, XchgCommand& c);
  void HandleWc(XchgThread* x, const ibv_wc& wc);
  void HandleSendWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc);
  void HandleRecvWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc);
  Status ClassifyWcError(Lane* lane, const ibv_wc& wc, const Op& op);  // EXCLUDES(mu_)
  void HandleControl(const LanePtr& lane, const std::string& msg);
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
  void BreakLane(const LanePtr& lane, const Status& why, bool reset);
  void CompleteFrontOps(Lane* lane);
  void CompleteOp(Lane* lane, std::unique_ptr<Op> op, const Status& s);
  void MaybeDrained(XchgThread* x, const LanePtr& lane);
  void AbandonLane(XchgThread* x, const LanePtr& lane, const Status& why);

  // Constant after construction.
  const TransportOptions options_;
  TransportHandler* const handler_;  // must outlive this
  const uint64_t incarnation_;

  // Constant after Init() (verbs objects are destroyed only by Shutdown()).
  ibv_context* ctx_ = nullptr;          // owned by librdmacm (one per device per process)
  ibv_pd* pd_ = nullptr;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  uint8_t max_rd_atomic_ = 0;           // responder resources we grant
  uint8_t max_init_rd_atomic_ = 0;      // outstanding RDMA READs we issue per QP
  int max_lanes_per_thread_ = 0;        // bounded so a shared CQ can never overflow
  std::vector<std::unique_ptr<XchgThread>> xchg_;
  uint16_t listen_port_ = 0;            // host order; set by Start() before any thread
  int cm_wake_fd_ = -1;
  std::thread cm_thread_;

  // Lock order: shutdown_mu_ -> verbs_mu_ -> mu_ -> {XchgThread::mu, cm_mu_}. The
  // process-wide QP registry lock (verbs_cm.cc) may be held while taking cm_mu_.
  // Nothing takes mu_ while holding XchgThread::mu or cm_mu_.
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // GUARDED_BY(shutdown_mu_)
  // Serializes ibv_reg_mr/ibv_dereg_mr with Shutdown()'s ibv_dealloc_pd, without holding
  // mu_ (and so blocking the data path) while the kernel pins or unpins memory.
  std::mutex verbs_mu_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // signalled on session state, region and lane-count changes
  bool initialized_ = false;    // GUARDED_BY(mu_)
  bool started_ = false;        // GUARDED_BY(mu_)
  bool shutting_down_ = false;  // GUARDED_BY(mu_)
  PeerId next_peer_id_ = 1;     // GUARDED_BY(mu_)
  uint64_t next_session_serial_ = 1;                        // GUARDED_BY(mu_)
  uint32_t next_region_id_ = 1;                             // GUARDED_BY(mu_)
  std::map<PeerId, std::unique_ptr<Peer>> peers_;           // GUARDED_BY(mu_)
  std::map<std::string, PeerId> peer_by_name_;              // GUARDED_BY(mu_)
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;   // GUARDED_BY(mu_), live ones
  std::map<std::string, Session*> connecting_;  // GUARDED_BY(mu_), by dialled address
  std::map<std::string, Session*> accepting_;   // GUARDED_BY(mu_), by peer name
  std::map<Lane*, LanePtr> lanes_;              // GUARDED_BY(mu_), every lane not destroyed
  std::map<Lane*, MonoTime> orphans_;  // GUARDED_BY(mu_), accepted, unauthenticated: deadline
  std::map<uint32_t, std::unique_ptr<Region>> regions_;     // GUARDED_BY(mu_)

  std::mutex cm_mu_;
  std::vector<CmCommand> cm_commands_;  // GUARDED_BY(cm_mu_)
  bool cm_stop_ = false;                // GUARDED_BY(cm_mu_)

  TransportCounters stats_;
};

}  // namespace nova::transport
