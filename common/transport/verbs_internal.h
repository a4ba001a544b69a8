// Private to the verbs backend; included only by verbs_*.cc, never part of an interface.
// Holds the design notes, the wire format and resource-bound constants, a few helpers shared
// by the pieces, and the definitions of VerbsTransport's private structs (Op, Lane, Session,
// Peer, Region, XchgCommand, XchgThread, CmCommand, CmThread).
//
// Thread safety: the constants and helpers are thread-safe; each struct field says which
// thread owns it or which lock guards it.
//
// Code layout (all members of VerbsTransport):
//  - verbs_transport.cc: construction, Init/Start/Shutdown and the public Transport API;
//  - verbs_session.cc: peers and sessions;
//  - verbs_cm.cc: the cm thread (rdma_cm events, QPs, device async events, timers);
//  - verbs_lane.cc: the xchg threads (posting, polling, completions, fragments);
//  - verbs_handshake.cc: the per-lane handshake, on the lane's xchg thread.
//
// Design notes of the verbs backend (verbs_transport.h has the overview):
//
// Threads:
//  - the cm thread owns every rdma_cm_id: it runs librdmacm connection set-up, creates and
//    destroys QPs, reads device async events and fires timers (handshake/connect deadlines,
//    reconnect backoff, flush timeouts). It never posts work requests.
//  - xchg thread k owns lane k of every peer: it posts every send-queue WR, re-posts
//    receives, polls its CQ and runs the handshake, the handler and the completions. Other
//    threads reach it only through its command queue.
//
// Lane life cycle (lane = one RC QP):
//  1. created (initiator: by Connect or a reconnect timer; acceptor: CONNECT_REQUEST, whose
//     private data names the lane); the cm thread creates the QP on xchg thread k's CQ,
//     pre-posts kRecvBuffersPerQp receives and hands the lane to the xchg thread (kAddLane)
//     before rdma_connect/rdma_accept, so no completion can arrive for an unknown QP;
//  2. handshake over SEND/RECV (handshake.h), then the lane is authenticated; a peer is Up
//     when all its lanes are (its Session is Up);
//  3. a lane whose QP broke under an Up session because of a one-sided op (a refused rkey,
//     bounds or access: completion error or async QP access error, a flush, or DISCONNECTED
//     while our QP is already in ERR) is *reset*: its outstanding ops fail, ops posted
//     meanwhile are parked in the Session, the initiator re-dials that lane (same session
//     serial in the CM private data, so the acceptor swaps it in) and the parked ops go to
//     the new QP. The peer stays Up; the acceptor gives the initiator connect_timeout_ms;
//  4. any other failure (DISCONNECTED with a healthy QP, connect errors, transport retries
//     exceeded, protocol violation, timeout) fails the whole Session;
//  5. tearing a lane down: rdma_disconnect + QP->ERR on the cm thread, then kFailLane on its
//     xchg thread, which waits for the flush completions of every outstanding WR (the NIC
//     reports every WR of a QP in error, even unsignaled ones), completes the ops and reports
//     the lane drained; only then does the cm thread destroy the QP and the id, so a QP
//     number is never reused while completions for it may still be in the CQ;
//  6. when the last lane of a failed Session is destroyed: OnPeerDown (if it was the peer's
//     Up session) and, for peers we connected to, a reconnect after a backoff.
//
// Error classification: the NIC reports every refused one-sided op as REM_ACCESS_ERR. To
// return OutOfRange vs PermissionDenied like the tcp backend, each side advertises its
// remotely accessible regions to its peers (control frames on lane 0) and the initiator
// classifies a refused op against that table. The table only names the error; the NIC
// alone decides what is allowed.
//
// Wire format (DO NOT CHANGE without bumping kVerbsWireVersion):
//  - CM private data of a connect request: fixed32 magic, fixed16 version, fixed16 lane,
//    fixed16 lanes, fixed64 initiator session serial; of a reject: fixed32 magic, Status;
//  - every SEND carries a one-byte fragment header (kFragMore plus at most one kind flag,
//    kFragHandshake or kFragControl) followed by at most kRecvBufferBytes - 1 payload
//    bytes; a message is the concatenation of fragments up to the first without kFragMore
//    (RC delivers a QP's SENDs in order);
//  - control frames: byte type, then for kCtlRegionAdd: fixed32 rkey, fixed64 addr,
//    fixed64 length, fixed32 access; for kCtlRegionDel: fixed32 rkey;
//  - WRITE_WITH_IMM carries the caller's immediate in network byte order.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "common/transport/verbs_transport.h"

namespace nova::transport {

// --- On the wire. DO NOT CHANGE without bumping kVerbsWireVersion. ---
constexpr uint32_t kConnectMagic = 0x4e4f5641;  // "NOVA": tells our requests from strangers'
constexpr uint16_t kVerbsWireVersion = 1;
// Connect-request private data layout (byte offsets).
constexpr size_t kPrivMagic = 0;    // fixed32 kConnectMagic
constexpr size_t kPrivVersion = 4;  // fixed16 kVerbsWireVersion
constexpr size_t kPrivLane = 6;     // fixed16 lane index
constexpr size_t kPrivLanes = 8;    // fixed16 lanes (xchg threads) of the initiator
constexpr size_t kPrivSession = 10;  // fixed64 initiator session serial
constexpr size_t kConnectPrivateDataBytes = 18;
// Size of every pre-posted receive buffer, hence the largest SEND a peer may post.
constexpr size_t kRecvBufferBytes = 8192;
constexpr size_t kFragmentHeaderBytes = 1;
constexpr uint8_t kFragMore = 0x01;       // more fragments of this message follow
constexpr uint8_t kFragHandshake = 0x02;  // a handshake frame, not application data
constexpr uint8_t kFragControl = 0x04;    // a transport control frame (region adverts)
constexpr uint8_t kFragKinds = kFragHandshake | kFragControl;
constexpr uint8_t kCtlRegionAdd = 1;
constexpr uint8_t kCtlRegionDel = 2;
constexpr size_t kMaxControlMessageBytes = 64;
// IB carries 148 bytes of private data in a REJ; keep the reason well inside that.
constexpr size_t kRejectPrivateDataBytes = 128;
constexpr size_t kRejectReasonChars = 96;
// magic + status code + one-byte varint length + the truncated reason.
static_assert(sizeof(uint32_t) + 1 + 1 + kRejectReasonChars <= kRejectPrivateDataBytes);
constexpr size_t kFragmentPayloadBytes = kRecvBufferBytes - kFragmentHeaderBytes;

// --- Local resource bounds. ---
// Receives pre-posted per QP; a sender that outruns them is RNR-retried, never dropped.
constexpr int kRecvBuffersPerQp = 64;
// Registered send buffers per QP: bounds the copies of in-flight fragments.
constexpr int kSendBuffersPerQp = 32;
// WRs posted and not yet retired per QP (the QP's max_send_wr).
constexpr int kSendQueueDepth = 256;
// Selective signalling: one signaled WR per this many (plus the last of every chain).
constexpr int kSignalInterval = 16;
// WRs linked into one ibv_post_send call.
constexpr int kMaxPostChain = 32;
// Large enough for any CM private data (its length field is one byte).
constexpr size_t kMaxCmPrivateDataBytes = 256;
constexpr int kMaxSendSge = 2;  // inline sends: header byte + payload
constexpr uint32_t kRequestedInlineBytes = 256;
// One CQ serves lane k of every peer; its size bounds how many peers a thread can hold.
constexpr int kMaxLanesPerXchgThread = 256;
constexpr int kMaxXchgThreads = 64;
// Bounds accepted-but-not-completed ops per lane so a stalled peer cannot exhaust memory.
constexpr size_t kMaxQueuedOpsPerLane = 1 << 16;
// Connections that have not finished the handshake: bounds what strangers can pin.
constexpr size_t kMaxUnauthenticatedLanes = 256;
// The largest single RDMA transfer the IB spec allows (2^31 bytes).
constexpr uint64_t kMaxVerbsTransferBytes = 1ull << 31;
constexpr uint8_t kMaxRdAtomic = 16;     // cap on outstanding RDMA READs per QP
constexpr uint8_t kRetryCount = 7;       // transport retries before IBV_WC_RETRY_EXC_ERR
constexpr uint8_t kRnrRetryForever = 7;  // IB encoding of "retry RNR NAKs forever"
constexpr int kListenBacklog = 128;
constexpr int kPollBatch = 32;
constexpr uint64_t kRecvWrIdFlag = 1ull << 63;  // wr_id of receives; sends use sequence numbers
constexpr size_t kBufferAlignment = 4096;       // lane buffers are page-aligned for the NIC
// An xchg thread spins this long after its last work before sleeping on the CQ channel.
constexpr auto kIdleSpin = std::chrono::microseconds(50);
constexpr int kXchgMaxSleepMs = 100;  // safety net against a lost CQ notification
constexpr int kCmTickMs = 20;         // granularity of deadlines and reconnect timers
// How long a failed lane may wait for its flush completions before we give up on the NIC.
constexpr auto kDrainTimeout = std::chrono::seconds(2);
constexpr auto kShutdownDrainTimeout = std::chrono::seconds(5);

enum class HsState : uint8_t {
  kAwaitEstablished,  // initiator: until RDMA_CM_EVENT_ESTABLISHED
  kAwaitHello,        // acceptor
  kAwaitChallenge,    // initiator
  kAwaitResponse,     // acceptor
  kAwaitVerdict,      // initiator
  kRefusing,          // acceptor: our refusal Verdict is in flight
  kDone,
};

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// A Status for a failed verbs or rdma_cm call that set `err` (an errno value).
inline Status VerbsError(const std::string& what, int err) {
  if (err == ENOMEM) {
    return Status::ResourceExhausted(what + ": " + std::strerror(err) +
                                     " (is the locked-memory limit, ulimit -l, too low?)");
  }
  return Status::FromErrno(what, err);
}

// Wakes the thread that polls eventfd `fd`.
inline void WakeFd(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

// Resets eventfd `fd` after a wake-up.
inline void DrainFd(int fd) {
  uint64_t v;
  (void)!read(fd, &v, sizeof(v));
}

// An operation accepted for a lane. Owned by the lane's xchg thread once handed over.
struct VerbsTransport::Op {
  enum class Kind : uint8_t { kSend, kWrite, kRead };
  Kind kind = Kind::kSend;
  bool internal = false;   // a handshake or control frame: not in stats or the lane backlog
  uint8_t frag_flags = 0;  // kFragHandshake / kFragControl for internal frames
  std::string payload;     // kSend: the copied message
  size_t sent = 0;         // kSend: payload bytes already posted
  char* local = nullptr;   // one-sided: local address, inside a pinned region
  uint32_t lkey = 0;
  uint64_t length = 0;
  RemoteAddr remote;
  std::optional<uint32_t> imm;
  uint32_t region_id = 0;  // one-sided: region pinned until completion
  Completion done;
  Status status;           // first error seen by one of its WRs
  int wrs_outstanding = 0;
  bool fully_posted = false;

  const char* Name() const {
    return kind == Kind::kSend ? "send" : kind == Kind::kWrite ? "RDMA write" : "RDMA read";
  }
};

struct VerbsTransport::Lane : std::enable_shared_from_this<Lane> {
  struct WrRecord {
    uint64_t seq;
    int slot;  // send buffer used, or -1
    Op* op;
  };
  Lane(int i, bool init) : index(i), initiator(init) {}
  char* RecvBuffer(uint32_t slot) const { return buf.get() + slot * kRecvBufferBytes; }
  char* SendBuffer(uint32_t slot) const {
    return buf.get() + (kRecvBuffersPerQp + slot) * kRecvBufferBytes;
  }

  // Constant after creation.
  const int index;
  const bool initiator;
  std::string remote;  // for messages: the dialled address or the connecting IP
  sockaddr_storage dst{};  // initiator: where to connect
  uint64_t initiator_serial = 0;  // the initiating session's serial (acceptor: from the CM)

  // Set by the cm thread before the lane is handed to its xchg thread, then constant until
  // the cm thread destroys them (after the xchg thread reported the lane drained).
  rdma_cm_id* id = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t qp_num = 0;
  ibv_mr* buf_mr = nullptr;
  std::unique_ptr<char, FreeDeleter> buf;  // receive slots, then send slots
  uint32_t max_inline = 0;

  // The cm thread's view of the lane's teardown. cm thread only.
  struct CmState {
    bool torn_down = false;
    bool abandon_sent = false;
    MonoTime torn_down_at;
  };
  CmState cm;

  // Guarded by VerbsTransport::mu_ (a comment: the analysis cannot name another object's lock).
  Session* session = nullptr;  // outlives the lane; null for an unauthenticated acceptor lane
  bool failed = false;

  // Ops accepted by Submit and not yet completed: bounds the backlog (any thread).
  std::atomic<size_t> queued{0};

  // The rest belongs to the xchg thread (initialised by the cm thread before hand-over).

  // Posted work: the op FIFO, the WR records, send buffers and receives (the invariants are
  // in verbs_lane.cc).
  struct Posting {
    std::deque<std::unique_ptr<Op>> ops;
    size_t post_index = 0;
    std::deque<WrRecord> fifo;
    uint64_t next_seq = 0;
    int unsignaled = 0;
    std::vector<uint32_t> free_slots;
    int posted_recvs = 0;
  };
  Posting posted;
  // The message whose fragments are arriving.
  struct Reassembly {
    std::string bytes;
    bool active = false;
    uint8_t kind = 0;  // kFragKinds bits of the message being reassembled
  };
  Reassembly rx;
  // The handshake (verbs_handshake.cc), and who it found at the other end.
  struct Handshake {
    HsState state = HsState::kAwaitHello;
    std::string nonce_local, nonce_remote;
    Status pending_refusal;  // initiator: the acceptor failed our check; fail after its Verdict
    std::string peer_name, peer_address;
    uint64_t peer_incarnation = 0;
  };
  Handshake hs;
  bool authenticated = false;
  PeerId peer_id = kInvalidPeer;
  // Failing and draining (the life cycle's steps 5 and 6).
  struct Drain {
    bool failing = false;
    Status fail_status;
    bool fail_status_provisional = false;  // from a bare flush; the cm thread may name the cause
    bool cm_teardown_seen = false;         // the QP is in ERR: no more posts, everything will flush
    bool drained = false;
  };
  Drain drain;
  bool dirty = false;  // queued in XchgThread::dirty for posting
};

// One attempt to bring up all lanes between us and one peer. Guarded by VerbsTransport::mu_
// (held in its ConnTable).
struct VerbsTransport::Session {
  enum class State : uint8_t { kConnecting, kUp, kFailed };
  uint64_t serial = 0;
  bool initiator = false;
  std::string address;               // initiator: the dialled address
  PeerId reconnect_of = kInvalidPeer;  // initiator: the peer this attempt reconnects
  std::string peer_name, peer_address;
  uint64_t incarnation = 0;          // acceptor: the initiator's process incarnation
  uint64_t remote_serial = 0;        // acceptor: the initiator's session serial
  PeerId peer_id = kInvalidPeer;     // set when a lane authenticates
  std::vector<LanePtr> lanes;        // by lane index; acceptor slots fill as lanes arrive
  // Up sessions: lane k's QP broke and is being re-established; ops wait in parked[k].
  std::vector<uint8_t> resetting;
  std::vector<MonoTime> reset_deadline;
  std::vector<std::deque<std::unique_ptr<Op>>> parked;
  int authenticated = 0;
  int live_lanes = 0;                // lanes attached and not yet destroyed
  State state = State::kConnecting;
  Status status;
  // Set when our side refused the peer during the handshake: the reason the session fails
  // with, even if the peer's disconnect is noticed first.
  Status refusal;
  bool was_up = false;
  bool quiet = false;        // replaced or lost a tie-break: no OnPeerDown, no reconnect
  bool report_down = false;  // it was the peer's Up session when it failed
  MonoTime deadline;
};

// A remote node, by name, for the life of the transport. Guarded by VerbsTransport::mu_ (held
// in its ConnTable).
struct VerbsTransport::Peer {
  PeerId id = kInvalidPeer;
  std::string name, address;
  std::shared_ptr<Session> session;  // the Up session, or null while down
  bool reconnect = false;            // we connected to it and it was not Disconnect()ed
  std::string dial_address;
  sockaddr_storage dial{};
  int backoff_ms = 0;
  std::optional<MonoTime> reconnect_at;
  // What the peer advertised as remotely accessible, by rkey: names refused ops' errors.
  struct RemoteRegion {
    uint64_t addr = 0, length = 0;
    uint32_t access = 0;
  };
  std::unordered_map<uint32_t, RemoteRegion> remote_regions;
};

struct VerbsTransport::Region {
  ibv_mr* mr = nullptr;
  MemoryRegion region;
  int inflight = 0;  // our posted one-sided ops using it
  bool deregistering = false;
};

struct VerbsTransport::XchgCommand {
  enum class Type : uint8_t {
    kAddLane, kEstablished, kSubmit, kFailLane, kAbandon, kRun,
    kFailOp,  // complete a parked op that never reached a lane
  };
  Type type;
  LanePtr lane;
  std::unique_ptr<Op> op;
  Status status;
  std::function<void()> fn;
};

// One xchg thread: its CQ (lane k of every peer), its command queue and the lanes it owns.
// Thread safety: `commands` and `stop` are guarded by `mu`; the CQ, channel and wake fd are
// constant between Init() and Shutdown(); the rest belongs to the thread named beside it.
struct VerbsTransport::XchgThread {
  int index = 0;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  int wake_fd = -1;
  std::thread thread;
  int lane_count = 0;  // cm thread only: QPs on this CQ

  Mutex mu;
  std::vector<XchgCommand> commands GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;

  // This xchg thread only.
  std::unordered_map<uint32_t, LanePtr> lanes;  // by QP number
  std::vector<LanePtr> dirty;                   // lanes with something to post
};

struct VerbsTransport::CmCommand {
  enum class Type : uint8_t { kStartLane, kTeardown, kDrained, kQpError, kAbandonAll };
  Type type;
  LanePtr lane;
  Status status;
  uint32_t qp_num = 0;
  bool reset = false;  // kQpError: the QP broke from a refused op (reset the lane only)
};

// The connection-manager thread and its command queue (verbs_cm.cc): other threads hand it
// lanes to start, tear down or destroy through PushCm, which wakes it through `wake_fd`.
// Thread safety: `commands` and `stop` are guarded by `mu`; `wake_fd` is constant between
// Init() and Shutdown(); `thread` is touched only by Start() and Shutdown().
struct VerbsTransport::CmThread {
  int wake_fd = -1;
  std::thread thread;

  Mutex mu;
  std::vector<CmCommand> commands GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
};

}  // namespace nova::transport
