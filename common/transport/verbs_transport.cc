// The verbs backend. Design notes (the header has the overview):
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
// Posted-op bookkeeping per lane (xchg thread only):
//  1. `ops` holds every accepted op in submission order; `post_index` is the first op not
//     fully posted (a Send may be posted fragment by fragment as send buffers free up);
//  2. every posted WR gets wr_id = a per-lane sequence number and a record in `fifo`;
//  3. a send-queue completion for sequence S retires every record before S as successful
//     (an unsignaled WR that had failed would have produced its own completion earlier) and
//     S with the completion's status;
//  4. the WR being retired always belongs to ops.front(): ops are posted in order and an op
//     leaves `ops` only when fully posted (or the lane failed) and all its WRs retired, so
//     completions run in submission order, exactly once.
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
#include "common/transport/verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "common/coding.h"
#include "common/transport/handshake.h"

namespace nova::transport {

namespace {

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

Status VerbsError(const std::string& what, int err) {
  if (err == ENOMEM) {
    return Status::ResourceExhausted(what + ": " + std::strerror(err) +
                                     " (is the locked-memory limit, ulimit -l, too low?)");
  }
  return Status::FromErrno(what, err);
}

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void WakeFd(int fd) {
  const uint64_t one = 1;
  (void)!write(fd, &one, sizeof(one));
}

void DrainFd(int fd) {
  uint64_t v;
  (void)!read(fd, &v, sizeof(v));
}

Status ParseHostPort(const std::string& address, std::string* host, uint16_t* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::InvalidArgument("address '" + address + "' is not host:port");
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  char* end = nullptr;
  const unsigned long p = std::strtoul(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p > 65535) {
    return Status::InvalidArgument("address '" + address + "' has a bad port");
  }
  *port = static_cast<uint16_t>(p);
  return Status::OK();
}

Status ResolveAddress(const std::string& host, uint16_t port, bool passive,
                      sockaddr_storage* out, socklen_t* out_len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string port_str = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::InvalidArgument("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *out_len = res->ai_addrlen;
  freeaddrinfo(res);
  return Status::OK();
}

// Maps a failed work completion to the Status its op completes with.
Status WcStatusToStatus(const ibv_wc& wc, const char* op, const std::string& peer) {
  const std::string msg = std::string(op) + " to " + peer +
                          " failed: " + ibv_wc_status_str(wc.status) + " (vendor error " +
                          std::to_string(wc.vendor_err) + ")";
  switch (wc.status) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
      return Status::PermissionDenied(msg + ": the rkey, bounds or access flags were refused");
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
      return Status::OutOfRange(msg);
    default:
      return Status::NetworkError(msg);
  }
}

// Private data of a CM reject: why we refused, so the initiator's Connect returns it.
std::string EncodeRejectReason(const Status& why) {
  std::string out;
  PutFixed32(&out, kConnectMagic);
  Status(why.code(), why.message().substr(0, kRejectReasonChars)).EncodeTo(&out);
  return out;
}

// A control frame announcing (add) or withdrawing a remotely accessible region.
std::string EncodeRegionFrame(const MemoryRegion& m, bool add) {
  std::string out(1, static_cast<char>(add ? kCtlRegionAdd : kCtlRegionDel));
  PutFixed32(&out, m.rkey);
  if (add) {
    PutFixed64(&out, reinterpret_cast<uint64_t>(m.base));
    PutFixed64(&out, m.length);
    PutFixed32(&out, m.access);
  }
  return out;
}

// librdmacm opens every RDMA device once per process, so all transports of a process share
// one ibv_context and its single async-event queue: whichever transport reads an event
// routes it here to the transport owning the QP. Process-wide because the device context
// is; it holds no state beyond the QP -> owner map.
class QpRegistry {
 public:
  using Handler = void (*)(void* owner, uint32_t qp_num, int event_type);
  static QpRegistry& Get() {
    static QpRegistry* registry = new QpRegistry();  // never destroyed: used at exit
    return *registry;
  }
  void Add(ibv_qp* qp, void* owner, Handler h) {
    std::lock_guard<std::mutex> l(mu_);
    owners_[qp] = {owner, h};
  }
  void Remove(ibv_qp* qp) {
    std::lock_guard<std::mutex> l(mu_);
    owners_.erase(qp);
  }
  // REQUIRES: the event is not yet acked (so the QP cannot be destroyed meanwhile).
  void Dispatch(const ibv_async_event& ev) {
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR: {
        std::lock_guard<std::mutex> l(mu_);
        auto it = owners_.find(ev.element.qp);
        if (it != owners_.end()) {
          it->second.second(it->second.first, ev.element.qp->qp_num, ev.event_type);
        }
        return;
      }
      case IBV_EVENT_DEVICE_FATAL:
        LOG(ERROR) << "RDMA device reported a fatal error; its connections will fail";
        return;
      case IBV_EVENT_PORT_ERR:
        LOG(WARNING) << "RDMA port " << ev.element.port_num << " went down";
        return;
      default:
        VLOG(1) << "RDMA async event " << ibv_event_type_str(ev.event_type);
        return;
    }
  }

 private:
  std::mutex mu_;
  std::unordered_map<ibv_qp*, std::pair<void*, Handler>> owners_;  // GUARDED_BY(mu_)
};

}  // namespace

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

  // cm thread only.
  bool torn_down = false;
  bool abandon_sent = false;
  MonoTime torn_down_at;

  // GUARDED_BY(VerbsTransport::mu_).
  Session* session = nullptr;  // outlives the lane; null for an unauthenticated acceptor lane
  bool failed = false;

  // Ops accepted by Submit and not yet completed: bounds the backlog (any thread).
  std::atomic<size_t> queued{0};

  // xchg thread only (initialised by the cm thread before hand-over).
  std::deque<std::unique_ptr<Op>> ops;
  size_t post_index = 0;
  std::deque<WrRecord> fifo;
  uint64_t next_seq = 0;
  int unsignaled = 0;
  std::vector<uint32_t> free_slots;
  int posted_recvs = 0;
  std::string reassembly;
  bool reassembling = false;
  uint8_t reassembly_kind = 0;  // kFragKinds bits of the message being reassembled
  HsState hs = HsState::kAwaitHello;
  std::string nonce_local, nonce_remote;
  Status pending_refusal;  // initiator: the acceptor failed our check; fail after its Verdict
  std::string peer_name, peer_address;  // from the handshake
  uint64_t peer_incarnation = 0;
  bool authenticated = false;
  PeerId peer_id = kInvalidPeer;
  bool failing = false;
  Status fail_status;
  bool fail_status_provisional = false;  // from a bare flush; the cm thread may name the cause
  bool cm_teardown_seen = false;  // the QP is in ERR: no more posts, everything will flush
  bool drained = false;
  bool dirty = false;             // queued in XchgThread::dirty for posting
};

// One attempt to bring up all lanes between us and one peer. GUARDED_BY(mu_).
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

// A remote node, by name, for the life of the transport. GUARDED_BY(mu_).
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

struct VerbsTransport::XchgThread {
  int index = 0;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  int wake_fd = -1;
  std::thread thread;
  int lane_count = 0;  // cm thread only: QPs on this CQ

  std::mutex mu;
  std::vector<XchgCommand> commands;  // GUARDED_BY(mu)
  bool stop = false;                  // GUARDED_BY(mu)

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

std::unique_ptr<Transport> NewVerbsTransport(const TransportOptions& options,
                                             TransportHandler* handler) {
  return std::make_unique<VerbsTransport>(options, handler);
}

VerbsTransport::VerbsTransport(const TransportOptions& options, TransportHandler* handler)
    : options_(options), handler_(handler), incarnation_(RandomU64()) {}

VerbsTransport::~VerbsTransport() { Shutdown(); }

// ---------------------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------------------

Status VerbsTransport::Init() {
  std::lock_guard<std::mutex> l(mu_);
  if (initialized_ || shutting_down_) return Status::IllegalState("Init() called twice");
  if (options_.xchg_threads < 1 || options_.xchg_threads > kMaxXchgThreads) {
    return Status::InvalidArgument("xchg_threads must be in [1, " +
                                   std::to_string(kMaxXchgThreads) + "]");
  }
  if (options_.cluster_secret.empty()) {
    return Status::InvalidArgument("cluster_secret must not be empty");
  }
  if (options_.node_name.empty()) return Status::InvalidArgument("node_name must not be empty");
  if (options_.max_message_bytes == 0 || options_.connect_timeout_ms <= 0) {
    return Status::InvalidArgument("max_message_bytes and connect_timeout_ms must be positive");
  }

  int num_devices = 0;
  ibv_device** devices = ibv_get_device_list(&num_devices);
  const bool have_device = devices != nullptr && num_devices > 0;
  if (devices != nullptr) ibv_free_device_list(devices);
  if (!have_device) {
    return Status::Unavailable(
        "no RDMA device found (ibv_get_device_list returned none); use the tcp backend");
  }

  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr) return VerbsError("rdma_create_event_channel", errno);
  if (rdma_create_id(channel_, &listen_id_, nullptr, RDMA_PS_TCP) != 0) {
    listen_id_ = nullptr;
    return VerbsError("rdma_create_id", errno);
  }
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  NOVA_RETURN_NOT_OK(
      ResolveAddress(options_.listen_host, options_.listen_port, true, &addr, &addr_len));
  if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&addr)) != 0) {
    return VerbsError("rdma_bind_addr(" + options_.listen_host + ":" +
                          std::to_string(options_.listen_port) + ")",
                      errno)
        .Prepend("is the listen address on an RDMA-capable interface?");
  }
  ctx_ = listen_id_->verbs;
  if (ctx_ == nullptr) {  // bound to a wildcard address: use the first device
    int n = 0;
    ibv_context** contexts = rdma_get_devices(&n);
    if (contexts != nullptr && n > 0) ctx_ = contexts[0];
    if (contexts != nullptr) rdma_free_devices(contexts);
    if (ctx_ == nullptr) return Status::Unavailable("no RDMA device is usable through librdmacm");
  }

  ibv_device_attr attr{};
  if (const int rc = ibv_query_device(ctx_, &attr); rc != 0) {
    return VerbsError("ibv_query_device", rc);
  }
  max_rd_atomic_ = static_cast<uint8_t>(std::min<int>(attr.max_qp_rd_atom, kMaxRdAtomic));
  max_init_rd_atomic_ =
      static_cast<uint8_t>(std::min<int>(attr.max_qp_init_rd_atom, kMaxRdAtomic));
  pd_ = ibv_alloc_pd(ctx_);
  if (pd_ == nullptr) return VerbsError("ibv_alloc_pd", errno);

  // Each lane can have kSendQueueDepth signaled sends and kRecvBuffersPerQp receives
  // outstanding; the CQ must hold all of them or it overflows and breaks every QP on it.
  constexpr int kCqesPerLane = kSendQueueDepth + kRecvBuffersPerQp;
  const int cq_entries = std::min(attr.max_cqe, kMaxLanesPerXchgThread * kCqesPerLane);
  max_lanes_per_thread_ = cq_entries / kCqesPerLane;
  if (max_lanes_per_thread_ < 1) return Status::Unavailable("RDMA device CQs are too small");
  const int vectors = std::max(ctx_->num_comp_vectors, 1);
  for (int k = 0; k < options_.xchg_threads; ++k) {
    auto x = std::make_unique<XchgThread>();
    x->index = k;
    x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (x->wake_fd < 0) return VerbsError("eventfd", errno);
    x->channel = ibv_create_comp_channel(ctx_);
    xchg_.push_back(std::move(x));
    XchgThread* xp = xchg_.back().get();
    if (xp->channel == nullptr) return VerbsError("ibv_create_comp_channel", errno);
    SetNonBlocking(xp->channel->fd);
    xp->cq = ibv_create_cq(ctx_, cq_entries, xp, xp->channel, k % vectors);
    if (xp->cq == nullptr) return VerbsError("ibv_create_cq", errno);
  }
  cm_wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (cm_wake_fd_ < 0) return VerbsError("eventfd", errno);
  initialized_ = true;
  return Status::OK();
}

Status VerbsTransport::Start() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!initialized_) return Status::IllegalState("Start() before a successful Init()");
    if (started_ || shutting_down_) return Status::IllegalState("Start() called twice");
  }
  if (rdma_listen(listen_id_, kListenBacklog) != 0) return VerbsError("rdma_listen", errno);
  listen_port_ = ntohs(rdma_get_src_port(listen_id_));
  SetNonBlocking(channel_->fd);
  SetNonBlocking(ctx_->async_fd);
  std::lock_guard<std::mutex> l(mu_);
  for (auto& x : xchg_) x->thread = std::thread([this, xp = x.get()] { XchgLoop(xp); });
  cm_thread_ = std::thread([this] { CmLoop(); });
  started_ = true;
  return Status::OK();
}

void VerbsTransport::Shutdown() {
  std::lock_guard<std::mutex> shutdown_lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  bool started = false;
  {
    std::unique_lock<std::mutex> l(mu_);
    shutting_down_ = true;
    started = started_;
    const Status why = Status::Aborted("transport shutting down");
    std::vector<Session*> live;
    for (auto& [serial, s] : sessions_) live.push_back(s.get());
    for (Session* s : live) FailSessionLocked(s, why);  // may erase only `s` itself
    for (auto& [lane, deadline] : orphans_) FailLaneLocked(lanes_[lane], why);
    for (auto& [id, p] : peers_) p->reconnect_at.reset();
    if (started) {
      auto drained = [this] { return lanes_.empty(); };
      if (!cv_.wait_for(l, kShutdownDrainTimeout, drained)) {
        PushCm({CmCommand::Type::kAbandonAll, nullptr, why});
        if (!cv_.wait_for(l, kDrainTimeout, drained)) {
          LOG(ERROR) << lanes_.size() << " RDMA lanes did not drain; freeing them anyway";
        }
      }
    }
  }
  if (started) {
    {
      std::lock_guard<std::mutex> l(cm_mu_);
      cm_stop_ = true;
    }
    WakeFd(cm_wake_fd_);
    cm_thread_.join();
    for (auto& x : xchg_) {
      {
        std::lock_guard<std::mutex> l(x->mu);
        x->stop = true;
      }
      WakeFd(x->wake_fd);
      x->thread.join();
    }
  }
  // No other thread of ours runs now. Free leftovers (only if the NIC never flushed).
  std::vector<LanePtr> leftovers;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [p, lane] : lanes_) leftovers.push_back(lane);
  }
  for (const LanePtr& lane : leftovers) {
    if (lane->qp != nullptr) {
      AbandonLane(xchg_[lane->index].get(), lane, Status::Aborted("transport shutting down"));
    }
    DestroyLane(lane);
  }
  for (auto& x : xchg_) RunXchgCommands(x.get());  // late completions and OnPeerDown calls
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  listen_id_ = nullptr;
  for (auto& x : xchg_) {
    if (x->cq != nullptr && ibv_destroy_cq(x->cq) != 0) LOG(ERROR) << "ibv_destroy_cq failed";
    if (x->channel != nullptr) ibv_destroy_comp_channel(x->channel);
    if (x->wake_fd >= 0) close(x->wake_fd);
    x->cq = nullptr;
    x->channel = nullptr;
    x->wake_fd = -1;
  }
  {
    std::lock_guard<std::mutex> v(verbs_mu_);
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [id, r] : regions_) {
      if (r->mr != nullptr) ibv_dereg_mr(r->mr);
      r->mr = nullptr;
    }
    if (pd_ != nullptr && ibv_dealloc_pd(pd_) != 0) LOG(ERROR) << "ibv_dealloc_pd failed";
    pd_ = nullptr;
  }
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  channel_ = nullptr;
  if (cm_wake_fd_ >= 0) close(cm_wake_fd_);
  cm_wake_fd_ = -1;
}

// ---------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------

std::string VerbsTransport::listen_address() const {
  const std::string& h = options_.listen_host;
  const bool v6 = h.find(':') != std::string::npos;
  return (v6 ? "[" + h + "]" : h) + ":" + std::to_string(listen_port_);
}

Result<PeerId> VerbsTransport::Connect(const std::string& address) {
  std::string host;
  uint16_t port = 0;
  NOVA_RETURN_NOT_OK(ParseHostPort(address, &host, &port));
  sockaddr_storage dst{};
  socklen_t dst_len = 0;
  NOVA_RETURN_NOT_OK(ResolveAddress(host, port, false, &dst, &dst_len));  // DNS: not under mu_

  std::unique_lock<std::mutex> l(mu_);
  if (!started_ || shutting_down_) return Status::IllegalState("transport is not running");
  for (auto& [id, p] : peers_) {
    if (p->session != nullptr && (p->address == address || p->dial_address == address)) {
      return id;
    }
  }
  std::shared_ptr<Session> s;
  if (auto it = connecting_.find(address); it != connecting_.end()) {
    s = sessions_[it->second->serial];
  } else {
    s = StartSessionLocked(address, &dst, dst_len, kInvalidPeer);
  }
  const auto timeout = std::chrono::milliseconds(options_.connect_timeout_ms);
  cv_.wait_for(l, timeout, [&] { return s->state != Session::State::kConnecting; });
  if (s->state == Session::State::kUp) return s->peer_id;
  if (s->state == Session::State::kConnecting) {
    FailSessionLocked(s.get(), Status::TimedOut("connecting to " + address + " timed out after " +
                                                std::to_string(options_.connect_timeout_ms) +
                                                " ms"));
  }
  // Lost a simultaneous-connect tie-break: the peer is up through its own connection to us.
  if (s->quiet && s->peer_id != kInvalidPeer && peers_[s->peer_id]->session != nullptr) {
    return s->peer_id;
  }
  return s->status;
}

void VerbsTransport::Disconnect(PeerId peer) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  Peer& p = *it->second;
  p.reconnect = false;
  p.reconnect_at.reset();
  const Status why = Status::Aborted("disconnected by this node");
  if (auto c = connecting_.find(p.dial_address);
      c != connecting_.end() && c->second->reconnect_of == peer) {
    c->second->quiet = true;
    FailSessionLocked(c->second, why);
  }
  if (p.session != nullptr) FailSessionLocked(p.session.get(), why);
}

bool VerbsTransport::IsUp(PeerId peer) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second->session != nullptr;
}

Result<PeerInfo> VerbsTransport::GetPeerInfo(PeerId peer) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::NotFound("unknown peer " + std::to_string(peer));
  return PeerInfo{peer, it->second->name, it->second->address};
}

Result<MemoryRegion> VerbsTransport::RegisterMemory(void* base, uint64_t length,
                                                    uint32_t access) {
  if (base == nullptr || length == 0) {
    return Status::InvalidArgument("RegisterMemory: empty region");
  }
  if ((access & ~static_cast<uint32_t>(kRemoteRead | kRemoteWrite)) != 0) {
    return Status::InvalidArgument("RegisterMemory: unknown access flags " +
                                   std::to_string(access));
  }
  std::lock_guard<std::mutex> v(verbs_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!initialized_ || shutting_down_) return Status::Unavailable("transport is not running");
  }
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = ibv_reg_mr(pd_, base, length, flags);
  if (mr == nullptr) {
    return VerbsError("ibv_reg_mr of " + std::to_string(length) + " bytes", errno);
  }
  std::lock_guard<std::mutex> l(mu_);
  auto r = std::make_unique<Region>();
  r->mr = mr;
  MemoryRegion& m = r->region;
  m.id = next_region_id_++;
  m.rkey = access == kLocalOnly ? 0 : mr->rkey;
  m.lkey = mr->lkey;
  m.base = static_cast<char*>(base);
  m.length = length;
  m.access = access;
  const MemoryRegion out = m;
  regions_[m.id] = std::move(r);
  if (out.access != kLocalOnly) AdvertiseRegionLocked(out, /*add=*/true);
  return out;
}

Status VerbsTransport::DeregisterMemory(const MemoryRegion& region) {
  std::lock_guard<std::mutex> v(verbs_mu_);  // Shutdown frees the PD only after we are done
  ibv_mr* mr = nullptr;
  {
    std::unique_lock<std::mutex> l(mu_);
    auto it = regions_.find(region.id);
    if (it == regions_.end() || it->second->region.base != region.base) {
      return Status::NotFound("memory region " + std::to_string(region.id) +
                              " is not registered");
    }
    Region* r = it->second.get();
    if (r->deregistering) {
      return Status::IllegalState("memory region " + std::to_string(region.id) +
                                  " is already being deregistered");
    }
    r->deregistering = true;  // new ops on it now fail with InvalidArgument
    if (r->region.access != kLocalOnly) AdvertiseRegionLocked(r->region, /*add=*/false);
    cv_.wait(l, [r] { return r->inflight == 0; });
    mr = r->mr;
    regions_.erase(region.id);
  }
  if (mr != nullptr) {
    if (const int rc = ibv_dereg_mr(mr); rc != 0) return VerbsError("ibv_dereg_mr", rc);
  }
  return Status::OK();
}

int VerbsTransport::PickLane(int lane) const {
  if (lane < 0) return LaneForCurrentThread(options_.xchg_threads);
  return lane < options_.xchg_threads ? lane : -1;
}

Status VerbsTransport::SubmitLocked(PeerId peer, int lane, std::unique_ptr<Op> op) {
  if (!started_ || shutting_down_) return Status::Unavailable("transport is not running");
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::InvalidArgument("unknown peer " + std::to_string(peer));
  Session* s = it->second->session.get();
  if (s == nullptr) return Status::Unavailable("peer " + it->second->name + " is down");
  if (s->resetting[lane]) {  // the lane is being re-established: keep the op, in order
    if (s->parked[lane].size() >= kMaxQueuedOpsPerLane) {
      return Status::ResourceExhausted("lane " + std::to_string(lane) + " to " +
                                       it->second->name + " has too many queued operations");
    }
    s->parked[lane].push_back(std::move(op));
    return Status::OK();
  }
  const LanePtr& l = s->lanes[lane];
  if (l->queued.load(std::memory_order_relaxed) >= kMaxQueuedOpsPerLane) {
    return Status::ResourceExhausted("lane " + std::to_string(lane) + " to " +
                                     it->second->name + " has too many queued operations");
  }
  l->queued.fetch_add(1, std::memory_order_relaxed);
  // Pushed under mu_ so that a concurrent session failure's kFailLane is queued after it.
  PushXchg(lane, {XchgCommand::Type::kSubmit, l, std::move(op), Status::OK(), nullptr});
  return Status::OK();
}

Status VerbsTransport::PinRegionLocked(const MemoryRegion& local, uint64_t offset,
                                       uint64_t length, char** addr, uint32_t* lkey) {
  if (!started_ || shutting_down_) return Status::Unavailable("transport is not running");
  auto it = regions_.find(local.id);
  if (it == regions_.end() || it->second->deregistering) {
    return Status::InvalidArgument("memory region " + std::to_string(local.id) +
                                   " is not registered with this transport");
  }
  Region& r = *it->second;
  if (r.region.base != local.base || r.region.length != local.length) {
    return Status::InvalidArgument("memory region " + std::to_string(local.id) +
                                   " does not match its registration");
  }
  if (offset > r.region.length || !r.region.Contains(r.region.base + offset, length)) {
    return Status::InvalidArgument("local range [" + std::to_string(offset) + ", +" +
                                   std::to_string(length) + ") is outside memory region " +
                                   std::to_string(local.id) + " of " +
                                   std::to_string(r.region.length) + " bytes");
  }
  *addr = r.region.base + offset;
  *lkey = r.mr->lkey;
  r.inflight++;
  return Status::OK();
}

void VerbsTransport::ReleaseRegion(uint32_t region_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = regions_.find(region_id);
  if (it != regions_.end() && --it->second->inflight == 0) cv_.notify_all();
}

Status VerbsTransport::Send(PeerId peer, std::string_view msg, Completion done, int lane) {
  if (msg.size() > options_.max_message_bytes) {
    return Status::InvalidArgument("message of " + std::to_string(msg.size()) +
                                   " bytes exceeds max_message_bytes " +
                                   std::to_string(options_.max_message_bytes));
  }
  const int k = PickLane(lane);
  if (k < 0) return Status::InvalidArgument("lane " + std::to_string(lane) + " out of range");
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::kSend;
  op->payload.assign(msg.data(), msg.size());
  op->done = std::move(done);
  {
    std::lock_guard<std::mutex> l(mu_);
    NOVA_RETURN_NOT_OK(SubmitLocked(peer, k, std::move(op)));
  }
  stats_.sends++;
  stats_.bytes_sent += msg.size();
  return Status::OK();
}

Status VerbsTransport::Write(PeerId peer, const MemoryRegion& local, uint64_t local_offset,
                             uint64_t length, RemoteAddr remote, std::optional<uint32_t> imm,
                             Completion done, int lane) {
  if (length > std::min(options_.max_transfer_bytes, kMaxVerbsTransferBytes)) {
    return Status::InvalidArgument("write of " + std::to_string(length) +
                                   " bytes exceeds the largest transfer");
  }
  const int k = PickLane(lane);
  if (k < 0) return Status::InvalidArgument("lane " + std::to_string(lane) + " out of range");
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::kWrite;
  op->length = length;
  op->remote = remote;
  op->imm = imm;
  op->done = std::move(done);
  op->region_id = local.id;
  {
    std::lock_guard<std::mutex> l(mu_);
    NOVA_RETURN_NOT_OK(PinRegionLocked(local, local_offset, length, &op->local, &op->lkey));
    if (Status st = SubmitLocked(peer, k, std::move(op)); !st.ok()) {
      if (--regions_[local.id]->inflight == 0) cv_.notify_all();
      return st;
    }
  }
  stats_.writes++;
  stats_.bytes_written += length;
  return Status::OK();
}

Status VerbsTransport::Read(PeerId peer, RemoteAddr remote, uint64_t length,
                            const MemoryRegion& local, uint64_t local_offset, Completion done,
                            int lane) {
  if (length > std::min(options_.max_transfer_bytes, kMaxVerbsTransferBytes)) {
    return Status::InvalidArgument("read of " + std::to_string(length) +
                                   " bytes exceeds the largest transfer");
  }
  const int k = PickLane(lane);
  if (k < 0) return Status::InvalidArgument("lane " + std::to_string(lane) + " out of range");
  auto op = std::make_unique<Op>();
  op->kind = Op::Kind::kRead;
  op->length = length;
  op->remote = remote;
  op->done = std::move(done);
  op->region_id = local.id;
  {
    std::lock_guard<std::mutex> l(mu_);
    NOVA_RETURN_NOT_OK(PinRegionLocked(local, local_offset, length, &op->local, &op->lkey));
    if (Status st = SubmitLocked(peer, k, std::move(op)); !st.ok()) {
      if (--regions_[local.id]->inflight == 0) cv_.notify_all();
      return st;
    }
  }
  stats_.reads++;
  stats_.bytes_read += length;
  return Status::OK();
}

TransportStats VerbsTransport::GetStats() const {
  TransportStats s;
  s.sends = stats_.sends.load();
  s.writes = stats_.writes.load();
  s.reads = stats_.reads.load();
  s.bytes_sent = stats_.bytes_sent.load();
  s.bytes_written = stats_.bytes_written.load();
  s.bytes_read = stats_.bytes_read.load();
  s.failed_ops = stats_.failed_ops.load();
  s.rejected_remote_ops = stats_.rejected_remote_ops.load();
  s.auth_failures = stats_.auth_failures.load();
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [id, p] : peers_) s.peers_up += p->session != nullptr ? 1 : 0;
  return s;
}

// ---------------------------------------------------------------------------------------
// Peers and sessions
// ---------------------------------------------------------------------------------------

std::shared_ptr<VerbsTransport::Session> VerbsTransport::NewSessionLocked(bool initiator) {
  auto s = std::make_shared<Session>();
  s->serial = next_session_serial_++;
  s->initiator = initiator;
  s->deadline = MonoNow() + std::chrono::milliseconds(options_.connect_timeout_ms);
  s->lanes.resize(options_.xchg_threads);
  s->resetting.assign(options_.xchg_threads, 0);
  s->reset_deadline.resize(options_.xchg_threads);
  s->parked.resize(options_.xchg_threads);
  sessions_[s->serial] = s;
  return s;
}

VerbsTransport::LanePtr VerbsTransport::NewInitiatorLaneLocked(Session* s, int index,
                                                               const std::string& address,
                                                               const void* sockaddr,
                                                               uint32_t sockaddr_len) {
  auto lane = std::make_shared<Lane>(index, /*initiator=*/true);
  lane->remote = address;
  std::memcpy(&lane->dst, sockaddr, std::min<size_t>(sockaddr_len, sizeof(lane->dst)));
  lane->hs = HsState::kAwaitEstablished;
  lane->initiator_serial = s->serial;
  lane->session = s;
  s->lanes[index] = lane;
  s->live_lanes++;
  lanes_[lane.get()] = lane;
  return lane;
}

std::shared_ptr<VerbsTransport::Session> VerbsTransport::StartSessionLocked(
    const std::string& address, const void* sockaddr, uint32_t sockaddr_len,
    PeerId reconnect_of) {
  std::shared_ptr<Session> s = NewSessionLocked(/*initiator=*/true);
  s->address = address;
  s->reconnect_of = reconnect_of;
  connecting_[address] = s.get();
  for (int k = 0; k < options_.xchg_threads; ++k) {
    NewInitiatorLaneLocked(s.get(), k, address, sockaddr, sockaddr_len);
  }
  // Lane 0 first; the others once it authenticated, so a refusal costs one handshake.
  PushCm({CmCommand::Type::kStartLane, s->lanes[0], Status::OK()});
  return s;
}

void VerbsTransport::FailLane(const LanePtr& lane, const Status& why) {
  std::lock_guard<std::mutex> l(mu_);
  FailLaneLocked(lane, why);
}

void VerbsTransport::FailLaneLocked(const LanePtr& lane, const Status& why) {
  if (lane->failed) return;
  lane->failed = true;
  if (lane->session != nullptr) {
    FailSessionLocked(lane->session, why);
  } else {
    PushCm({CmCommand::Type::kTeardown, lane, why});
  }
}

void VerbsTransport::ResetLane(const LanePtr& lane, const Status& why) {
  std::lock_guard<std::mutex> l(mu_);
  ResetLaneLocked(lane, why);
}

void VerbsTransport::ResetLaneLocked(const LanePtr& lane, const Status& why) {
  Session* s = lane->session;
  const int k = lane->index;
  if (lane->failed) return;
  if (s == nullptr || s->state != Session::State::kUp || s->lanes[k] != lane ||
      shutting_down_) {
    FailLaneLocked(lane, why);  // nothing to keep alive: a plain failure
    return;
  }
  LOG(WARNING) << "lane " << k << " with " << s->peer_name << " broke (" << why.ToString()
               << "); re-establishing it";
  lane->failed = true;
  PushCm({CmCommand::Type::kTeardown, lane, why});
  s->resetting[k] = 1;
  s->reset_deadline[k] = MonoNow() + std::chrono::milliseconds(options_.connect_timeout_ms);
  if (s->initiator) {
    LanePtr fresh = NewInitiatorLaneLocked(s, k, lane->remote, &lane->dst, sizeof(lane->dst));
    PushCm({CmCommand::Type::kStartLane, fresh, Status::OK()});
  }  // the acceptor waits for the initiator to re-dial (CheckDeadlines bounds the wait)
}

void VerbsTransport::FlushParkedLocked(Session* s, int k) {
  const LanePtr& lane = s->lanes[k];
  for (auto& op : s->parked[k]) {
    if (!op->internal) lane->queued.fetch_add(1, std::memory_order_relaxed);
    PushXchg(k, {XchgCommand::Type::kSubmit, lane, std::move(op), Status::OK(), nullptr});
  }
  s->parked[k].clear();
}

void VerbsTransport::SubmitControlLocked(Session* s, std::string frame) {
  auto op = std::make_unique<Op>();
  op->internal = true;
  op->frag_flags = kFragControl;
  op->payload = std::move(frame);
  if (s->resetting[0]) {
    s->parked[0].push_back(std::move(op));
  } else {
    PushXchg(0, {XchgCommand::Type::kSubmit, s->lanes[0], std::move(op), Status::OK(), nullptr});
  }
}

void VerbsTransport::AdvertiseRegionLocked(const MemoryRegion& m, bool add) {
  if (!started_ || shutting_down_) return;
  const std::string frame = EncodeRegionFrame(m, add);
  for (auto& [id, p] : peers_) {
    if (p->session != nullptr) SubmitControlLocked(p->session.get(), frame);
  }
}

void VerbsTransport::FailSessionLocked(Session* s, const Status& why) {
  if (s->state == Session::State::kFailed) return;
  s->was_up = s->state == Session::State::kUp;
  s->state = Session::State::kFailed;
  s->status = s->refusal.ok() ? why : s->refusal;
  if (auto it = peers_.find(s->peer_id); it != peers_.end() && it->second->session.get() == s) {
    it->second->session.reset();
    it->second->remote_regions.clear();  // a reconnected peer advertises afresh
    s->report_down = !s->quiet;
    LOG(INFO) << "peer " << it->second->name << " is down: " << why.ToString();
  }
  if (auto it = connecting_.find(s->address); s->initiator && it != connecting_.end() &&
                                              it->second == s) {
    connecting_.erase(it);
  }
  if (auto it = accepting_.find(s->peer_name); !s->initiator && it != accepting_.end() &&
                                               it->second == s) {
    accepting_.erase(it);
  }
  for (int k = 0; k < options_.xchg_threads; ++k) {
    for (auto& op : s->parked[k]) {
      PushXchg(k, {XchgCommand::Type::kFailOp, nullptr, std::move(op), why, nullptr});
    }
    s->parked[k].clear();
    if (const LanePtr& lane = s->lanes[k]; lane != nullptr) {
      lane->failed = true;
      PushCm({CmCommand::Type::kTeardown, lane, why});
    }
  }
  cv_.notify_all();
  if (s->live_lanes == 0) SessionGoneLocked(s);  // last: may destroy *s
}

void VerbsTransport::SessionGoneLocked(Session* s) {
  if (s->report_down) {
    const PeerId id = s->peer_id;
    const Status why = s->status;
    // Handler methods run on xchg threads (transport.h).
    PushXchg(0, {XchgCommand::Type::kRun, nullptr, nullptr, Status::OK(),
                 [this, id, why] { handler_->OnPeerDown(id, why); }});
  }
  const PeerId target = s->was_up ? s->peer_id : s->reconnect_of;
  auto it = peers_.find(target);
  if (!shutting_down_ && !s->quiet && it != peers_.end() &&
      options_.reconnect_initial_backoff_ms > 0) {
    Peer& p = *it->second;
    if (p.reconnect && p.session == nullptr && !p.reconnect_at.has_value() &&
        connecting_.count(p.dial_address) == 0) {
      const int initial = options_.reconnect_initial_backoff_ms;
      p.backoff_ms = s->was_up ? initial
                               : std::min(std::max(p.backoff_ms * 2, initial),
                                          std::max(options_.reconnect_max_backoff_ms, initial));
      p.reconnect_at = MonoNow() + std::chrono::milliseconds(p.backoff_ms);
    }
  }
  sessions_.erase(s->serial);  // may destroy *s
}

VerbsTransport::Peer& VerbsTransport::FindOrCreatePeerLocked(const std::string& name) {
  auto it = peer_by_name_.find(name);
  if (it != peer_by_name_.end()) return *peers_[it->second];
  auto p = std::make_unique<Peer>();
  p->id = next_peer_id_++;
  p->name = name;
  Peer& ref = *p;
  peer_by_name_[name] = p->id;
  peers_[p->id] = std::move(p);
  return ref;
}

void VerbsTransport::SessionUpLocked(Session* s, Callbacks* after_unlock) {
  Peer& p = *peers_[s->peer_id];
  bool announce = true;
  if (p.session != nullptr && p.session.get() != s) {
    Session* old = p.session.get();
    const bool same_direction = old->initiator == s->initiator;
    // Simultaneous connects in both directions: both ends keep the connection initiated by
    // the node with the smaller name, so they agree without talking.
    auto initiator_name = [this](const Session* x) {
      return x->initiator ? options_.node_name : x->peer_name;
    };
    if (!same_direction && !(initiator_name(s) < initiator_name(old))) {
      s->quiet = true;
      FailSessionLocked(s, Status::NetworkError("duplicate connection with " + p.name +
                                                "; keeping the existing one"));
      return;
    }
    old->quiet = true;
    p.session.reset();
    if (same_direction) {  // the remote restarted or re-dialled: tell the application
      const PeerId id = p.id;
      after_unlock->push_back([this, id] {
        handler_->OnPeerDown(id, Status::NetworkError("connection replaced by a new one"));
      });
    } else {
      announce = false;  // a silent swap: the peer never stopped being up
    }
    FailSessionLocked(old, Status::NetworkError("replaced by a newer connection with " + p.name));
  }
  s->state = Session::State::kUp;
  p.session = sessions_[s->serial];
  p.address = s->peer_address;
  p.backoff_ms = 0;
  p.reconnect_at.reset();
  if (s->initiator) {
    p.reconnect = true;
    p.dial_address = s->address;
    p.dial = s->lanes[0]->dst;
    if (auto it = connecting_.find(s->address); it != connecting_.end() && it->second == s) {
      connecting_.erase(it);
    }
  } else if (auto it = accepting_.find(s->peer_name);
             it != accepting_.end() && it->second == s) {
    accepting_.erase(it);
  }
  for (auto& [id, r] : regions_) {  // tell the peer what it may access (see file comment)
    if (r->region.access != kLocalOnly && !r->deregistering) {
      SubmitControlLocked(s, EncodeRegionFrame(r->region, /*add=*/true));
    }
  }
  LOG(INFO) << "peer " << p.name << " (" << p.address << ") is up, "
            << (s->initiator ? "connected" : "accepted") << ", " << s->lanes.size() << " lanes";
  if (announce) {
    const PeerInfo info{p.id, p.name, p.address};
    after_unlock->push_back([this, info] { handler_->OnPeerUp(info); });
  }
  cv_.notify_all();
}

Result<PeerId> VerbsTransport::LaneAuthenticated(const LanePtr& lane, Callbacks* after_unlock) {
  std::lock_guard<std::mutex> l(mu_);
  if (lane->failed || shutting_down_) return Status::Aborted("connection is closing");
  const int k = lane->index;
  Peer& p = FindOrCreatePeerLocked(lane->peer_name);
  Session* s = lane->session;
  if (lane->initiator) {
    if (s->state == Session::State::kUp) {  // a lane we re-dialled after a reset
      if (s->peer_name != lane->peer_name || s->lanes[k] != lane) {
        return Status::NetworkError("re-established lane " + std::to_string(k) + " to " +
                                    s->address + " reached " + lane->peer_name);
      }
      s->resetting[k] = 0;
      FlushParkedLocked(s, k);
      return p.id;
    }
    if (s->state != Session::State::kConnecting) return Status::Aborted("connection is closing");
    if (s->peer_name.empty()) {
      s->peer_name = lane->peer_name;
      s->peer_address = lane->peer_address;
      s->peer_id = p.id;
    } else if (s->peer_name != lane->peer_name) {
      return Status::NetworkError("lanes to " + s->address + " reached different nodes (" +
                                  s->peer_name + ", " + lane->peer_name + ")");
    }
    if (k == 0) {
      for (int j = 1; j < options_.xchg_threads; ++j) {
        PushCm({CmCommand::Type::kStartLane, s->lanes[j], Status::OK()});
      }
    }
  } else {
    orphans_.erase(lane.get());
    Session* up = p.session.get();
    if (up != nullptr && !up->initiator && up->incarnation == lane->peer_incarnation &&
        up->remote_serial == lane->initiator_serial) {
      // The initiator re-dialled lane k of an Up session: swap it in.
      if (const LanePtr& old = up->lanes[k]; old != nullptr && !old->failed) {
        old->failed = true;
        PushCm({CmCommand::Type::kTeardown, old,
                Status::NetworkError("lane replaced by a re-established connection")});
      }
      up->lanes[k] = lane;
      lane->session = up;
      up->live_lanes++;
      up->resetting[k] = 0;
      FlushParkedLocked(up, k);
      return p.id;
    }
    auto it = accepting_.find(lane->peer_name);
    s = it == accepting_.end() ? nullptr : it->second;
    if (s != nullptr && (s->incarnation != lane->peer_incarnation ||
                         s->remote_serial != lane->initiator_serial || s->lanes[k] != nullptr)) {
      FailSessionLocked(s, Status::NetworkError("superseded by a newer connection attempt from " +
                                                lane->peer_name));
      s = nullptr;
    }
    if (s == nullptr) {
      s = NewSessionLocked(/*initiator=*/false).get();
      s->peer_name = lane->peer_name;
      s->peer_address = lane->peer_address;
      s->incarnation = lane->peer_incarnation;
      s->remote_serial = lane->initiator_serial;
      s->peer_id = p.id;
      accepting_[s->peer_name] = s;
    }
    s->lanes[k] = lane;
    lane->session = s;
    s->live_lanes++;
  }
  if (++s->authenticated == options_.xchg_threads) SessionUpLocked(s, after_unlock);
  if (s->state == Session::State::kFailed) return s->status;
  return p.id;
}

// ---------------------------------------------------------------------------------------
// cm thread
// ---------------------------------------------------------------------------------------

void VerbsTransport::PushCm(CmCommand c) {
  bool wake;
  {
    std::lock_guard<std::mutex> l(cm_mu_);
    wake = cm_commands_.empty();
    cm_commands_.push_back(std::move(c));
  }
  if (wake) WakeFd(cm_wake_fd_);
}

void VerbsTransport::CmLoop() {
  while (true) {
    pollfd fds[] = {{channel_->fd, POLLIN, 0}, {ctx_->async_fd, POLLIN, 0},
                    {cm_wake_fd_, POLLIN, 0}};
    (void)poll(fds, 3, kCmTickMs);
    if (fds[2].revents & POLLIN) DrainFd(cm_wake_fd_);
    {
      std::lock_guard<std::mutex> l(cm_mu_);
      if (cm_stop_) return;
    }
    // Async events first: a QP access error should be known before a DISCONNECTED that it
    // caused at the peer is handled (DISCONNECTED also checks the QP state, see below).
    ProcessAsyncEvents();
    RunCmCommands();
    ProcessCmEvents();
    CheckDeadlines();
  }
}

void VerbsTransport::RunCmCommands() {
  std::vector<CmCommand> cmds;
  {
    std::lock_guard<std::mutex> l(cm_mu_);
    cmds.swap(cm_commands_);
  }
  for (CmCommand& c : cmds) {
    switch (c.type) {
      case CmCommand::Type::kStartLane:
        StartLane(c.lane);
        break;
      case CmCommand::Type::kTeardown:
        TeardownLane(c.lane, c.status);
        break;
      case CmCommand::Type::kDrained:
        DestroyLane(c.lane);
        break;
      case CmCommand::Type::kQpError: {
        LanePtr lane;
        {
          std::lock_guard<std::mutex> l(mu_);
          for (auto& [p, candidate] : lanes_) {
            if (candidate->qp != nullptr && candidate->qp_num == c.qp_num) lane = candidate;
          }
        }
        if (lane != nullptr && c.reset) {
          ResetLane(lane, c.status);
        } else if (lane != nullptr) {
          FailLane(lane, c.status);
        }
        break;
      }
      case CmCommand::Type::kAbandonAll: {
        std::vector<LanePtr> all;
        {
          std::lock_guard<std::mutex> l(mu_);
          for (auto& [p, lane] : lanes_) all.push_back(lane);
        }
        for (const LanePtr& lane : all) {
          TeardownLane(lane, c.status);
          if (lane->qp != nullptr && !lane->abandon_sent) {
            lane->abandon_sent = true;
            PushXchg(lane->index, {XchgCommand::Type::kAbandon, lane, nullptr, c.status, nullptr});
          }
        }
        break;
      }
    }
  }
}

void VerbsTransport::ProcessCmEvents() {
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(channel_, &event) == 0) {
    // Copy what we need and ack at once: rdma_destroy_id (which we may call while handling
    // the event) blocks until every event of that id is acked.
    const rdma_cm_event ev = *event;
    char priv[kMaxCmPrivateDataBytes] = {};
    size_t priv_len = 0;
    if ((ev.event == RDMA_CM_EVENT_CONNECT_REQUEST || ev.event == RDMA_CM_EVENT_REJECTED) &&
        ev.param.conn.private_data != nullptr) {
      priv_len = std::min<size_t>(ev.param.conn.private_data_len, sizeof(priv));
      std::memcpy(priv, ev.param.conn.private_data, priv_len);
    }
    rdma_ack_cm_event(event);
    HandleCmEvent(ev, priv, priv_len);
  }
}

void VerbsTransport::HandleCmEvent(const rdma_cm_event& ev, const char* private_data,
                                   size_t private_len) {
  if (ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
    OnConnectRequest(ev.id, ev.param.conn, private_data, private_len);
    return;
  }
  LanePtr lane;
  if (ev.id->context != nullptr) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = lanes_.find(static_cast<Lane*>(ev.id->context));
    if (it != lanes_.end()) lane = it->second;
  }
  if (lane == nullptr) {
    if (ev.id == listen_id_ && ev.event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      LOG(ERROR) << "the RDMA device of listener " << listen_address() << " was removed";
    }
    return;
  }
  if (lane->torn_down) return;
  const std::string what = std::string(rdma_event_str(ev.event)) + " (status " +
                           std::to_string(ev.status) + ")";
  switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(lane->id, options_.connect_timeout_ms) != 0) {
        FailLane(lane, VerbsError("rdma_resolve_route to " + lane->remote, errno));
      }
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (lane->id->verbs != ctx_) {
        FailLane(lane, Status::Unavailable("the route to " + lane->remote +
                                           " uses another RDMA device than our listener"));
        return;
      }
      if (Status st = CreateQp(lane.get()); !st.ok()) {
        FailLane(lane, st.Prepend("connecting to " + lane->remote));
        return;
      }
      char priv[kConnectPrivateDataBytes];
      EncodeFixed32(priv + kPrivMagic, kConnectMagic);
      EncodeFixed16(priv + kPrivVersion, kVerbsWireVersion);
      EncodeFixed16(priv + kPrivLane, static_cast<uint16_t>(lane->index));
      EncodeFixed16(priv + kPrivLanes, static_cast<uint16_t>(options_.xchg_threads));
      EncodeFixed64(priv + kPrivSession, lane->initiator_serial);
      rdma_conn_param param{};
      param.private_data = priv;
      param.private_data_len = sizeof(priv);
      param.responder_resources = max_rd_atomic_;
      param.initiator_depth = max_init_rd_atomic_;
      param.retry_count = kRetryCount;
      param.rnr_retry_count = kRnrRetryForever;
      if (rdma_connect(lane->id, &param) != 0) {
        FailLane(lane, VerbsError("rdma_connect to " + lane->remote, errno));
      }
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      if (lane->initiator) {
        PushXchg(lane->index, {XchgCommand::Type::kEstablished, lane, nullptr, Status::OK(), nullptr});
      }
      return;
    case RDMA_CM_EVENT_REJECTED: {
      Status why = Status::NetworkError("connection to " + lane->remote + " refused: " + what);
      std::string_view reason(private_data, private_len);
      uint32_t magic = 0;
      Status carried;
      if (GetFixed32(&reason, &magic) && magic == kConnectMagic &&
          Status::DecodeFrom(&reason, &carried) && !carried.ok()) {
        why = carried.Prepend(lane->remote + " refused the connection");
      }
      FailLane(lane, why);
      return;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      FailLane(lane, Status::NetworkError("cannot connect to " + lane->remote + ": " + what));
      return;
    case RDMA_CM_EVENT_DISCONNECTED: {
      // librdmacm leaves our QP alone on DISCONNECTED: if it is in ERR already, the peer
      // closed this lane because a one-sided op broke it, not because it went away.
      const Status why =
          Status::NetworkError("connection with " + lane->remote + " lost: " + what);
      ibv_qp_attr attr{};
      ibv_qp_init_attr init{};
      if (lane->qp != nullptr && ibv_query_qp(lane->qp, &attr, IBV_QP_STATE, &init) == 0 &&
          attr.qp_state == IBV_QPS_ERR) {
        ResetLane(lane, why);
      } else {
        FailLane(lane, why);
      }
      return;
    }
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
    case RDMA_CM_EVENT_ADDR_CHANGE:
      FailLane(lane, Status::NetworkError("connection with " + lane->remote + " lost: " + what));
      return;
    default:
      return;  // TIMEWAIT_EXIT etc.: nothing to do
  }
}

void VerbsTransport::OnConnectRequest(rdma_cm_id* id, const rdma_conn_param& req,
                                      const char* private_data, size_t private_len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  const sockaddr* src = rdma_get_peer_addr(id);
  if (src->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(src)->sin_addr, ip, sizeof(ip));
  } else if (src->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(src)->sin6_addr, ip, sizeof(ip));
  }
  // Refusals carry their reason in the reject's private data (see EncodeRejectReason).
  auto refuse = [&](const Status& why) {
    LOG(WARNING) << "refusing RDMA connection from " << ip << ": " << why.ToString();
    const std::string reason = EncodeRejectReason(why);
    rdma_reject(id, reason.data(), static_cast<uint8_t>(reason.size()));
    rdma_destroy_id(id);
  };
  if (private_len < kConnectPrivateDataBytes ||
      DecodeFixed32(private_data + kPrivMagic) != kConnectMagic) {
    refuse(Status::InvalidArgument("not a Nova-LSM transport"));
    return;
  }
  const uint16_t version = DecodeFixed16(private_data + kPrivVersion);
  const uint16_t index = DecodeFixed16(private_data + kPrivLane);
  const uint16_t lanes = DecodeFixed16(private_data + kPrivLanes);
  const uint64_t serial = DecodeFixed64(private_data + kPrivSession);
  if (version != kVerbsWireVersion) {
    refuse(Status::NotSupported("peer speaks verbs wire version " + std::to_string(version) +
                                ", we speak " + std::to_string(kVerbsWireVersion)));
    return;
  }
  if (lanes != options_.xchg_threads || index >= lanes) {
    refuse(Status::InvalidArgument("peer uses " + std::to_string(lanes) +
                                   " xchg threads, this node " +
                                   std::to_string(options_.xchg_threads)));
    return;
  }
  if (id->verbs != ctx_) {
    refuse(Status::Unavailable("request arrived on another RDMA device than our listener's"));
    return;
  }
  if (xchg_[index]->lane_count >= max_lanes_per_thread_) {
    refuse(Status::ResourceExhausted("too many connections"));
    return;
  }
  auto lane = std::make_shared<Lane>(index, /*initiator=*/false);
  lane->id = id;
  lane->remote = ip;
  lane->initiator_serial = serial;
  id->context = lane.get();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutting_down_ || orphans_.size() >= kMaxUnauthenticatedLanes) {
      refuse(shutting_down_ ? Status::Unavailable("shutting down")
                            : Status::ResourceExhausted("too many unauthenticated connections"));
      return;
    }
    lanes_[lane.get()] = lane;
    orphans_[lane.get()] = MonoNow() + std::chrono::milliseconds(options_.connect_timeout_ms);
  }
  if (Status st = CreateQp(lane.get()); !st.ok()) {
    LOG(WARNING) << "cannot accept RDMA connection from " << ip << ": " << st.ToString();
    rdma_reject(id, nullptr, 0);
    FailLane(lane, st);
    return;
  }
  rdma_conn_param param{};
  param.responder_resources = std::min(req.initiator_depth, max_rd_atomic_);
  param.initiator_depth = std::min(req.responder_resources, max_init_rd_atomic_);
  param.rnr_retry_count = kRnrRetryForever;
  if (rdma_accept(id, &param) != 0) FailLane(lane, VerbsError("rdma_accept", errno));
}

void VerbsTransport::ProcessAsyncEvents() {
  ibv_async_event ev;
  while (ibv_get_async_event(ctx_, &ev) == 0) {
    QpRegistry::Get().Dispatch(ev);
    ibv_ack_async_event(&ev);
  }
}

void VerbsTransport::OnQpAsyncEvent(void* self, uint32_t qp_num, int event_type) {
  auto* t = static_cast<VerbsTransport*>(self);
  Status why;
  const bool refused_op =
      event_type == IBV_EVENT_QP_ACCESS_ERR || event_type == IBV_EVENT_QP_REQ_ERR;
  if (event_type == IBV_EVENT_QP_ACCESS_ERR) {
    // A peer's one-sided op hit a bad rkey, bounds or access flags: the NIC refused it and
    // put the QP into the error state.
    t->stats_.rejected_remote_ops++;
    LOG(WARNING) << "refused a peer's RDMA operation (bad rkey, bounds or access) on QP "
                 << qp_num << "; resetting that connection";
    why = Status::NetworkError("peer issued an RDMA operation we refused; connection reset");
  } else {
    why = Status::NetworkError(std::string("QP error: ") +
                               ibv_event_type_str(static_cast<ibv_event_type>(event_type)));
  }
  t->PushCm({CmCommand::Type::kQpError, nullptr, why, qp_num, refused_op});
}

void VerbsTransport::CheckDeadlines() {
  std::vector<LanePtr> expired, slow_drains;
  {
    std::lock_guard<std::mutex> l(mu_);
    const MonoTime now = MonoNow();
    for (auto& [lane, deadline] : orphans_) {
      if (deadline <= now) expired.push_back(lanes_[lane]);
    }
    std::vector<Session*> late;
    for (auto& [serial, s] : sessions_) {
      bool overdue = s->state == Session::State::kConnecting && s->deadline <= now;
      for (int k = 0; k < options_.xchg_threads && s->state == Session::State::kUp; ++k) {
        overdue |= s->resetting[k] && s->reset_deadline[k] <= now;
      }
      if (overdue) late.push_back(s.get());
    }
    for (Session* s : late) {
      FailSessionLocked(s, Status::TimedOut(
                               "connection set-up with " +
                               (s->initiator ? s->address : s->peer_name) + " did not finish in " +
                               std::to_string(options_.connect_timeout_ms) + " ms"));
    }
    for (auto& [id, p] : peers_) {
      if (!p->reconnect_at.has_value() || *p->reconnect_at > now || shutting_down_) continue;
      p->reconnect_at.reset();
      if (p->session == nullptr && p->reconnect && connecting_.count(p->dial_address) == 0) {
        VLOG(1) << "reconnecting to " << p->name << " at " << p->dial_address;
        StartSessionLocked(p->dial_address, &p->dial, sizeof(p->dial), p->id);
      }
    }
    for (auto& [p, lane] : lanes_) {
      if (lane->torn_down && lane->qp != nullptr && !lane->abandon_sent &&
          now - lane->torn_down_at > kDrainTimeout) {
        slow_drains.push_back(lane);
      }
    }
  }
  for (const LanePtr& lane : expired) {
    FailLane(lane, Status::TimedOut("handshake from " + lane->remote + " did not finish in time"));
  }
  for (const LanePtr& lane : slow_drains) {
    LOG(WARNING) << "RDMA lane to " << lane->remote << " did not flush; abandoning it";
    lane->abandon_sent = true;
    PushXchg(lane->index, {XchgCommand::Type::kAbandon, lane, nullptr,
                           Status::NetworkError("connection with " + lane->remote + " failed"),
                           nullptr});
  }
}

void VerbsTransport::StartLane(const LanePtr& lane) {
  if (lane->torn_down) return;
  if (rdma_create_id(channel_, &lane->id, lane.get(), RDMA_PS_TCP) != 0) {
    lane->id = nullptr;
    FailLane(lane, VerbsError("rdma_create_id", errno));
    return;
  }
  if (rdma_resolve_addr(lane->id, nullptr, reinterpret_cast<sockaddr*>(&lane->dst),
                        options_.connect_timeout_ms) != 0) {
    FailLane(lane, VerbsError("rdma_resolve_addr(" + lane->remote + ")", errno));
  }
}

Status VerbsTransport::CreateQp(Lane* lane) {
  XchgThread& x = *xchg_[lane->index];
  if (x.lane_count >= max_lanes_per_thread_) {
    return Status::ResourceExhausted("xchg thread " + std::to_string(lane->index) +
                                     " already serves its maximum of " +
                                     std::to_string(max_lanes_per_thread_) + " connections");
  }
  constexpr size_t kBytes = (kRecvBuffersPerQp + kSendBuffersPerQp) * kRecvBufferBytes;
  lane->buf.reset(static_cast<char*>(std::aligned_alloc(kBufferAlignment, kBytes)));
  if (lane->buf == nullptr) return Status::ResourceExhausted("out of memory for lane buffers");
  const int access = IBV_ACCESS_LOCAL_WRITE;  // an int: ibv_reg_mr is a macro that masks it
  lane->buf_mr = ibv_reg_mr(pd_, lane->buf.get(), kBytes, access);
  if (lane->buf_mr == nullptr) return VerbsError("ibv_reg_mr of lane buffers", errno);

  ibv_qp_init_attr attr{};
  attr.send_cq = x.cq;
  attr.recv_cq = x.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;  // selective signalling
  attr.cap.max_send_wr = kSendQueueDepth;
  attr.cap.max_recv_wr = kRecvBuffersPerQp;
  attr.cap.max_send_sge = kMaxSendSge;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = kRequestedInlineBytes;
  if (rdma_create_qp(lane->id, pd_, &attr) != 0) {
    attr.cap.max_inline_data = 0;  // some devices support no inline data at all
    if (rdma_create_qp(lane->id, pd_, &attr) != 0) return VerbsError("rdma_create_qp", errno);
  }
  lane->qp = lane->id->qp;
  lane->qp_num = lane->qp->qp_num;
  lane->max_inline = attr.cap.max_inline_data;
  QpRegistry::Get().Add(lane->qp, this, &VerbsTransport::OnQpAsyncEvent);
  x.lane_count++;
  for (int i = kSendBuffersPerQp - 1; i >= 0; --i) lane->free_slots.push_back(i);

  ibv_recv_wr wrs[kRecvBuffersPerQp];
  ibv_sge sges[kRecvBuffersPerQp];
  for (int i = 0; i < kRecvBuffersPerQp; ++i) {
    sges[i] = {reinterpret_cast<uintptr_t>(lane->RecvBuffer(i)),
               static_cast<uint32_t>(kRecvBufferBytes), lane->buf_mr->lkey};
    wrs[i] = {};
    wrs[i].wr_id = kRecvWrIdFlag | static_cast<uint64_t>(i);
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].next = i + 1 < kRecvBuffersPerQp ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(lane->qp, wrs, &bad); rc != 0) {
    // Nothing reached the xchg thread yet: undo here (flushes of the posted part are
    // removed from the CQ when the QP is destroyed).
    QpRegistry::Get().Remove(lane->qp);
    rdma_destroy_qp(lane->id);
    lane->qp = nullptr;
    x.lane_count--;
    return VerbsError("ibv_post_recv", rc);
  }
  lane->posted_recvs = kRecvBuffersPerQp;
  // Hand the lane to its xchg thread before connecting, so it knows the QP number by the
  // time the first completion can arrive.
  PushXchg(lane->index, {XchgCommand::Type::kAddLane, lane->shared_from_this(), nullptr,
                         Status::OK(), nullptr});
  return Status::OK();
}

void VerbsTransport::TeardownLane(const LanePtr& lane, const Status& why) {
  if (lane->torn_down) return;
  lane->torn_down = true;
  lane->torn_down_at = MonoNow();
  if (lane->qp == nullptr) {  // never reached its xchg thread
    DestroyLane(lane);
    return;
  }
  // rdma_disconnect sends a DREQ (the peer sees DISCONNECTED) and moves the QP to ERR; it
  // fails harmlessly when the connection was never established, so force ERR as well:
  // from now on every outstanding WR completes with a flush error.
  if (lane->id != nullptr) (void)rdma_disconnect(lane->id);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  (void)ibv_modify_qp(lane->qp, &attr, IBV_QP_STATE);
  PushXchg(lane->index, {XchgCommand::Type::kFailLane, lane, nullptr, why, nullptr});
}

void VerbsTransport::DestroyLane(const LanePtr& lane) {
  if (lane->qp != nullptr) {
    QpRegistry::Get().Remove(lane->qp);
    rdma_destroy_qp(lane->id);
    lane->qp = nullptr;
    xchg_[lane->index]->lane_count--;
  }
  if (lane->buf_mr != nullptr) ibv_dereg_mr(lane->buf_mr);
  lane->buf_mr = nullptr;
  if (lane->id != nullptr) rdma_destroy_id(lane->id);
  lane->id = nullptr;
  std::lock_guard<std::mutex> l(mu_);
  lanes_.erase(lane.get());
  orphans_.erase(lane.get());
  if (Session* s = lane->session; s != nullptr) {
    lane->session = nullptr;
    if (--s->live_lanes == 0 && s->state == Session::State::kFailed) SessionGoneLocked(s);
  }
  cv_.notify_all();
}

// ---------------------------------------------------------------------------------------
// xchg threads
// ---------------------------------------------------------------------------------------

void VerbsTransport::PushXchg(int thread, XchgCommand c) {
  XchgThread& x = *xchg_[thread];
  bool wake;
  {
    std::lock_guard<std::mutex> l(x.mu);
    wake = x.commands.empty();
    x.commands.push_back(std::move(c));
  }
  if (wake) WakeFd(x.wake_fd);
}

void VerbsTransport::XchgLoop(XchgThread* x) {
  ibv_wc wcs[kPollBatch];
  MonoTime last_work = MonoNow();
  while (true) {
    bool stop, worked;
    {
      std::lock_guard<std::mutex> l(x->mu);
      stop = x->stop;
      worked = !x->commands.empty();
    }
    RunXchgCommands(x);
    int n = ibv_poll_cq(x->cq, kPollBatch, wcs);
    for (int i = 0; i < n; ++i) HandleWc(x, wcs[i]);
    std::vector<LanePtr> dirty;
    dirty.swap(x->dirty);
    for (const LanePtr& lane : dirty) {
      lane->dirty = false;
      PostLane(lane.get());
    }
    if (worked || n > 0 || !dirty.empty()) {
      last_work = MonoNow();
      continue;
    }
    if (stop) return;  // only once the command queue and the CQ are empty
    if (MonoNow() - last_work < kIdleSpin) continue;
    // Sleep until a completion or a command arrives. Re-poll after arming: a completion
    // that arrived before ibv_req_notify_cq raises no event.
    if (ibv_req_notify_cq(x->cq, 0) != 0) {
      LOG(ERROR) << "ibv_req_notify_cq failed";
    }
    n = ibv_poll_cq(x->cq, kPollBatch, wcs);
    if (n > 0) {
      for (int i = 0; i < n; ++i) HandleWc(x, wcs[i]);
      last_work = MonoNow();
      continue;
    }
    pollfd fds[] = {{x->channel->fd, POLLIN, 0}, {x->wake_fd, POLLIN, 0}};
    (void)poll(fds, 2, kXchgMaxSleepMs);
    if (fds[0].revents & POLLIN) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (ibv_get_cq_event(x->channel, &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
    }
    if (fds[1].revents & POLLIN) DrainFd(x->wake_fd);
    last_work = MonoNow();
  }
}

void VerbsTransport::RunXchgCommands(XchgThread* x) {
  std::vector<XchgCommand> cmds;
  {
    std::lock_guard<std::mutex> l(x->mu);
    cmds.swap(x->commands);
  }
  for (XchgCommand& c : cmds) RunXchgCommand(x, c);
}

void VerbsTransport::RunXchgCommand(XchgThread* x, XchgCommand& c) {
  Lane* lane = c.lane.get();
  switch (c.type) {
    case XchgCommand::Type::kAddLane:
      x->lanes[lane->qp_num] = c.lane;
      return;
    case XchgCommand::Type::kEstablished:
      if (!lane->failing && lane->hs == HsState::kAwaitEstablished) StartHandshake(x, c.lane);
      return;
    case XchgCommand::Type::kSubmit:
      if (lane->failing) {
        CompleteOp(lane, std::move(c.op), lane->fail_status);
        return;
      }
      lane->ops.push_back(std::move(c.op));
      if (!lane->dirty) {
        lane->dirty = true;
        x->dirty.push_back(c.lane);
      }
      return;
    case XchgCommand::Type::kFailLane:
      lane->cm_teardown_seen = true;
      if (lane->fail_status_provisional) {  // the cm thread knows the real cause
        lane->fail_status = c.status;
        lane->fail_status_provisional = false;
      }
      MarkFailing(lane, c.status);
      MaybeDrained(x, c.lane);
      return;
    case XchgCommand::Type::kAbandon:
      AbandonLane(x, c.lane, c.status);
      return;
    case XchgCommand::Type::kRun:
      c.fn();
      return;
    case XchgCommand::Type::kFailOp:
      CompleteOp(nullptr, std::move(c.op), c.status);
      return;
  }
}

void VerbsTransport::HandleWc(XchgThread* x, const ibv_wc& wc) {
  auto it = x->lanes.find(wc.qp_num);
  if (it == x->lanes.end()) {
    RunXchgCommands(x);  // a kAddLane may still be queued
    it = x->lanes.find(wc.qp_num);
    if (it == x->lanes.end()) {
      VLOG(1) << "completion for unknown QP " << wc.qp_num;
      return;
    }
  }
  const LanePtr lane = it->second;
  if (wc.wr_id & kRecvWrIdFlag) {
    HandleRecvWc(x, lane, wc);
  } else {
    HandleSendWc(x, lane, wc);
  }
  MaybeDrained(x, lane);
}

void VerbsTransport::HandleSendWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc) {
  Lane* l = lane.get();
  auto retire_front = [this, l](const Status& st) {
    const Lane::WrRecord r = l->fifo.front();
    l->fifo.pop_front();
    if (r.slot >= 0) l->free_slots.push_back(static_cast<uint32_t>(r.slot));
    if (!st.ok() && r.op->status.ok()) r.op->status = st;
    r.op->wrs_outstanding--;
    CompleteFrontOps(l);
  };
  // Unsignaled WRs before this one completed successfully: one that had failed would have
  // produced its own (earlier) completion.
  while (!l->fifo.empty() && l->fifo.front().seq < wc.wr_id) retire_front(Status::OK());
  if (l->fifo.empty() || l->fifo.front().seq != wc.wr_id) {
    LOG(ERROR) << "completion for unknown work request " << wc.wr_id << " on lane to "
               << l->remote;
    return;
  }
  Status st;
  bool reset = false;  // the QP broke because of this op, not because the peer went away
  switch (wc.status) {
    case IBV_WC_SUCCESS:
      break;
    case IBV_WC_WR_FLUSH_ERR:
      st = l->failing ? l->fail_status
                      : Status::NetworkError("connection with " + l->remote + " broke");
      reset = true;
      break;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR:
      st = ClassifyWcError(l, wc, *l->fifo.front().op);
      reset = true;
      break;
    default:  // retries exceeded and the like: the peer or the path is gone
      st = ClassifyWcError(l, wc, *l->fifo.front().op);
      break;
  }
  if (!st.ok() && !l->failing) {
    // Decide the lane's fate before completing the op, so that an op its completion posts
    // already sees the lane as resetting (and is parked) rather than failing with it.
    if (wc.status != IBV_WC_WR_FLUSH_ERR) LOG(WARNING) << st.ToString();
    BreakLane(lane,
              Status::NetworkError("connection with " + l->remote +
                                   " reset after an earlier error: " + st.message()),
              reset);
    l->fail_status_provisional = wc.status == IBV_WC_WR_FLUSH_ERR;
  }
  retire_front(st);
  if (!l->dirty) {  // send buffers and queue slots were freed
    l->dirty = true;
    x->dirty.push_back(lane);
  }
}

Status VerbsTransport::ClassifyWcError(Lane* lane, const ibv_wc& wc, const Op& op) {
  const std::string what = std::string(op.Name()) + " to " + lane->remote + " failed: " +
                           ibv_wc_status_str(wc.status) + " (vendor error " +
                           std::to_string(wc.vendor_err) + ")";
  const bool one_sided = op.kind != Op::Kind::kSend;
  if (!one_sided || (wc.status != IBV_WC_REM_ACCESS_ERR && wc.status != IBV_WC_REM_INV_REQ_ERR)) {
    return WcStatusToStatus(wc, op.Name(), lane->remote);
  }
  // The NIC says only "refused": name the reason from what the peer advertised.
  std::lock_guard<std::mutex> l(mu_);
  auto pit = peers_.find(lane->peer_id);
  if (pit == peers_.end()) return Status::PermissionDenied(what);
  auto rit = pit->second->remote_regions.find(op.remote.rkey);
  if (rit == pit->second->remote_regions.end()) {
    return Status::PermissionDenied(what + ": rkey " + std::to_string(op.remote.rkey) +
                                    " is not registered at the peer");
  }
  const Peer::RemoteRegion& r = rit->second;
  const uint64_t addr = op.remote.addr;
  if (addr < r.addr || op.length > r.length || addr - r.addr > r.length - op.length) {
    return Status::OutOfRange(what + ": [" + std::to_string(addr) + ", +" +
                              std::to_string(op.length) + ") is outside the peer's region of " +
                              std::to_string(r.length) + " bytes at " + std::to_string(r.addr));
  }
  const uint32_t needed = op.kind == Op::Kind::kRead ? kRemoteRead : kRemoteWrite;
  if ((r.access & needed) == 0) {
    return Status::PermissionDenied(what + ": the peer's region does not allow remote " +
                                    (op.kind == Op::Kind::kRead ? "reads" : "writes"));
  }
  return Status::PermissionDenied(what + ": refused by the peer (region deregistered?)");
}

void VerbsTransport::HandleRecvWc(XchgThread* x, const LanePtr& lane, const ibv_wc& wc) {
  Lane* l = lane.get();
  l->posted_recvs--;
  const auto slot = static_cast<uint32_t>(wc.wr_id & ~kRecvWrIdFlag);
  if (wc.status != IBV_WC_SUCCESS) {
    if (!l->failing) {
      // A bare flush means the NIC moved the QP to ERR, as it does on a peer's refused
      // one-sided op: reset the lane (the async event names the cause, if it was that).
      const bool flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
      BreakLane(lane,
                Status::NetworkError("receive from " + l->remote +
                                     " failed: " + ibv_wc_status_str(wc.status)),
                /*reset=*/flushed);
      l->fail_status_provisional = flushed;
    }
    return;
  }
  if (l->failing) return;  // do not re-post: the lane is draining
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    if (!RepostRecv(l, slot)) return;
    if (!l->authenticated) {
      ProtocolViolation(lane, "RDMA write with immediate before authentication");
      return;
    }
    handler_->OnWriteWithImm(l->peer_id, ntohl(wc.imm_data), wc.byte_len);
    return;
  }
  if (wc.opcode != IBV_WC_RECV || wc.byte_len < kFragmentHeaderBytes) {
    ProtocolViolation(lane, "malformed receive");
    return;
  }
  const char* buf = l->RecvBuffer(slot);
  const auto header = static_cast<uint8_t>(buf[0]);
  const uint8_t kind = header & kFragKinds;
  if ((header & ~(kFragMore | kFragKinds)) != 0 || kind == kFragKinds) {
    ProtocolViolation(lane, "unknown fragment flags");
    return;
  }
  // Handshake frames only before authentication, everything else only after.
  if ((kind == kFragHandshake) == l->authenticated ||
      (l->reassembling && l->reassembly_kind != kind)) {
    ProtocolViolation(lane, kind == kFragHandshake ? "handshake frame after authentication"
                                                   : "frame before authentication");
    return;
  }
  const size_t limit = kind == kFragHandshake ? kMaxHandshakeMessageBytes
                       : kind == kFragControl ? kMaxControlMessageBytes
                                              : options_.max_message_bytes;
  const size_t len = wc.byte_len - kFragmentHeaderBytes;
  if (l->reassembly.size() + len > limit) {
    ProtocolViolation(lane, "message larger than " + std::to_string(limit) + " bytes");
    return;
  }
  l->reassembly.append(buf + kFragmentHeaderBytes, len);
  l->reassembling = true;
  l->reassembly_kind = kind;
  if (!RepostRecv(l, slot)) return;
  if (header & kFragMore) return;
  std::string msg;
  msg.swap(l->reassembly);
  l->reassembling = false;
  if (kind == kFragHandshake) {
    HandleHandshake(x, lane, msg);
  } else if (kind == kFragControl) {
    HandleControl(lane, msg);
  } else {
    handler_->OnMessage(l->peer_id, msg);
  }
}

void VerbsTransport::HandleControl(const LanePtr& lane, const std::string& msg) {
  std::string_view in(msg);
  uint32_t rkey = 0, access = 0;
  uint64_t addr = 0, length = 0;
  if (in.empty()) return ProtocolViolation(lane, "empty control frame");
  const auto type = static_cast<uint8_t>(in.front());
  in.remove_prefix(1);
  if (!GetFixed32(&in, &rkey)) return ProtocolViolation(lane, "malformed control frame");
  std::lock_guard<std::mutex> l(mu_);
  auto it = peers_.find(lane->peer_id);
  if (it == peers_.end()) return;
  if (type == kCtlRegionAdd) {
    if (!GetFixed64(&in, &addr) || !GetFixed64(&in, &length) || !GetFixed32(&in, &access) ||
        !in.empty()) {
      VLOG(1) << "malformed region advert from " << lane->remote;
      return;
    }
    it->second->remote_regions[rkey] = {addr, length, access};
  } else if (type == kCtlRegionDel) {
    it->second->remote_regions.erase(rkey);
  } else {
    VLOG(1) << "ignoring control frame of unknown type " << int{type};  // a newer peer
  }
}

bool VerbsTransport::RepostRecv(Lane* lane, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(lane->RecvBuffer(slot)),
              static_cast<uint32_t>(kRecvBufferBytes), lane->buf_mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = kRecvWrIdFlag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_recv(lane->qp, &wr, &bad); rc != 0) {
    BreakLane(lane->shared_from_this(),
              VerbsError("ibv_post_recv on the connection with " + lane->remote, rc),
              /*reset=*/false);
    return false;
  }
  lane->posted_recvs++;
  return true;
}

void VerbsTransport::ProtocolViolation(const LanePtr& lane, const std::string& what) {
  LOG(WARNING) << "protocol violation by " << lane->remote << ": " << what
               << "; closing the connection";
  BreakLane(lane, Status::Corruption("protocol violation by " + lane->remote + ": " + what),
            /*reset=*/false);
}

// ----- handshake (handshake.h), one message per SEND exchange, on the lane's xchg thread ----

void VerbsTransport::StartHandshake(XchgThread* x, const LanePtr& lane) {
  Lane* l = lane.get();
  l->nonce_local = RandomNonce();
  Hello hello;
  hello.node_name = options_.node_name;
  hello.listen_address = listen_address();
  hello.incarnation = incarnation_;
  hello.lane = static_cast<uint16_t>(l->index);
  hello.lanes = static_cast<uint16_t>(options_.xchg_threads);
  hello.nonce = l->nonce_local;
  l->hs = HsState::kAwaitChallenge;
  SendInternal(x, lane, EncodeHello(hello), nullptr);
}

void VerbsTransport::SendInternal(XchgThread* x, const LanePtr& lane, std::string frame,
                                  Completion done) {
  auto op = std::make_unique<Op>();
  op->internal = true;
  op->frag_flags = kFragHandshake;
  op->payload = std::move(frame);
  op->done = std::move(done);
  if (lane->failing) {
    CompleteOp(lane.get(), std::move(op), lane->fail_status);
    return;
  }
  lane->ops.push_back(std::move(op));
  if (!lane->dirty) {
    lane->dirty = true;
    x->dirty.push_back(lane);
  }
}

void VerbsTransport::RefuseLane(XchgThread* x, const LanePtr& lane, const Status& why) {
  lane->hs = HsState::kRefusing;
  // Close only once the Verdict left, so the initiator learns why.
  SendInternal(x, lane, EncodeVerdict(why),
               [this, lane, why](const Status&) { FailLane(lane, why); });
}

void VerbsTransport::HandleHandshake(XchgThread* x, const LanePtr& lane, const std::string& msg) {
  Lane* l = lane.get();
  const std::string& secret = options_.cluster_secret;
  const auto index = static_cast<uint16_t>(l->index);
  auto fail = [&](const Status& why) { BreakLane(lane, why, /*reset=*/false); };
  Callbacks after;
  switch (l->hs) {
    case HsState::kAwaitHello: {
      Hello h;
      Status st = DecodeHello(msg, &h);
      if (st.ok() && (h.lane != index || h.lanes != options_.xchg_threads)) {
        st = Status::InvalidArgument("hello for lane " + std::to_string(h.lane) + " of " +
                                     std::to_string(h.lanes) + " on our lane " +
                                     std::to_string(index) + " of " +
                                     std::to_string(options_.xchg_threads));
      }
      if (st.ok() && h.node_name.empty()) st = Status::InvalidArgument("empty node name");
      if (!st.ok()) return RefuseLane(x, lane, st);
      l->peer_name = h.node_name;
      l->peer_address = h.listen_address;
      l->peer_incarnation = h.incarnation;
      l->nonce_remote = h.nonce;
      l->nonce_local = RandomNonce();
      Challenge c{options_.node_name, listen_address(), l->nonce_local,
                  AcceptorMac(secret, index, h.nonce, l->nonce_local)};
      l->hs = HsState::kAwaitResponse;
      return SendInternal(x, lane, EncodeChallenge(c), nullptr);
    }
    case HsState::kAwaitResponse: {
      Response r;
      Status st = DecodeResponse(msg, &r);
      if (st.ok() && !MacEquals(r.mac, InitiatorMac(secret, index, l->nonce_local,
                                                    l->nonce_remote))) {
        stats_.auth_failures++;
        LOG(WARNING) << "refusing connection from '" << l->peer_name << "' at " << l->remote
                     << ": it does not know the cluster secret";
        st = Status::PermissionDenied("authentication failed: cluster secret mismatch");
      }
      if (!st.ok()) return RefuseLane(x, lane, st);
      Result<PeerId> peer = LaneAuthenticated(lane, &after);
      if (!peer.ok()) {
        RefuseLane(x, lane, peer.status());
      } else {
        l->authenticated = true;
        l->peer_id = *peer;
        l->hs = HsState::kDone;
        SendInternal(x, lane, EncodeVerdict(Status::OK()), nullptr);  // before any app op
      }
      break;
    }
    case HsState::kAwaitChallenge: {
      Challenge c;
      Status st = DecodeChallenge(msg, &c);
      if (!st.ok()) {
        // The acceptor may have answered our Hello with a refusal Verdict instead.
        const Status verdict = DecodeVerdict(msg);
        if (!verdict.ok() && !verdict.IsCorruption()) st = verdict;
        return fail(st.Prepend(l->remote + " refused the connection"));
      }
      l->peer_name = c.node_name;
      l->peer_address = c.listen_address;
      l->nonce_remote = c.nonce;
      l->hs = HsState::kAwaitVerdict;
      if (!MacEquals(c.mac, AcceptorMac(secret, index, l->nonce_local, c.nonce))) {
        // Answer anyway and close only after its Verdict, so that a listener with another
        // secret logs and counts us too.
        stats_.auth_failures++;
        LOG(WARNING) << "peer at " << l->remote << " (claiming to be '" << c.node_name
                     << "') does not know the cluster secret; closing";
        l->pending_refusal = Status::PermissionDenied(
            "peer at " + l->remote + " failed authentication: cluster secret mismatch");
        std::lock_guard<std::mutex> lock(mu_);
        if (l->session != nullptr) l->session->refusal = l->pending_refusal;
      }
      return SendInternal(x, lane,
                          EncodeResponse({InitiatorMac(secret, index, c.nonce, l->nonce_local)}),
                          nullptr);
    }
    case HsState::kAwaitVerdict: {
      if (!l->pending_refusal.ok()) return fail(l->pending_refusal);
      const Status verdict = DecodeVerdict(msg);
      if (!verdict.ok()) {
        if (verdict.IsPermissionDenied()) {
          LOG(WARNING) << "'" << l->peer_name << "' at " << l->remote
                       << " refused our cluster secret";
        }
        return fail(verdict.Prepend("'" + l->peer_name + "' at " + l->remote +
                                    " refused the connection"));
      }
      Result<PeerId> peer = LaneAuthenticated(lane, &after);
      if (!peer.ok()) {
        fail(peer.status());
      } else {
        l->authenticated = true;
        l->peer_id = *peer;
        l->hs = HsState::kDone;
      }
      break;
    }
    default:
      return ProtocolViolation(lane, "unexpected handshake frame");
  }
  for (auto& cb : after) cb();  // OnPeerUp/OnPeerDown, outside mu_
}

// ----- posting and completing ----------------------------------------------------------

void VerbsTransport::PostLane(Lane* lane) {
  while (PostChain(lane)) {
  }
}

// Posts one chain of at most kMaxPostChain WRs. Returns true if it may be called again.
bool VerbsTransport::PostChain(Lane* lane) {
  if (lane->failing) return false;
  ibv_send_wr wrs[kMaxPostChain];
  ibv_sge sges[kMaxPostChain][kMaxSendSge];
  uint8_t headers[kMaxPostChain];
  int n = 0;
  bool more = true;
  while (n < kMaxPostChain) {
    if (lane->post_index >= lane->ops.size() || lane->fifo.size() >= kSendQueueDepth) {
      more = false;
      break;
    }
    Op& op = *lane->ops[lane->post_index];
    ibv_send_wr& wr = wrs[n];
    wr = {};
    wr.sg_list = sges[n];
    int slot = -1;
    bool op_posted = true;
    if (op.kind == Op::Kind::kSend) {
      const size_t chunk = std::min(op.payload.size() - op.sent, kFragmentPayloadBytes);
      const bool last = op.sent + chunk == op.payload.size();
      const auto header = static_cast<uint8_t>(op.frag_flags | (last ? 0 : kFragMore));
      const char* data = op.payload.data() + op.sent;
      wr.opcode = IBV_WR_SEND;
      if (kFragmentHeaderBytes + chunk <= lane->max_inline) {
        // Inline: the NIC copies the bytes at post time, no send buffer needed.
        headers[n] = header;
        sges[n][0] = {reinterpret_cast<uintptr_t>(&headers[n]), kFragmentHeaderBytes, 0};
        sges[n][1] = {reinterpret_cast<uintptr_t>(data), static_cast<uint32_t>(chunk), 0};
        wr.num_sge = chunk > 0 ? 2 : 1;
        wr.send_flags = IBV_SEND_INLINE;
      } else {
        if (lane->free_slots.empty()) {
          more = false;  // resumes when a signaled completion returns buffers
          break;
        }
        slot = static_cast<int>(lane->free_slots.back());
        lane->free_slots.pop_back();
        char* b = lane->SendBuffer(slot);
        b[0] = static_cast<char>(header);
        std::memcpy(b + kFragmentHeaderBytes, data, chunk);
        sges[n][0] = {reinterpret_cast<uintptr_t>(b),
                      static_cast<uint32_t>(kFragmentHeaderBytes + chunk), lane->buf_mr->lkey};
        wr.num_sge = 1;
      }
      op.sent += chunk;
      op_posted = last;
    } else {
      if (op.kind == Op::Kind::kRead) {
        wr.opcode = IBV_WR_RDMA_READ;
      } else {
        wr.opcode = op.imm.has_value() ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        if (op.imm.has_value()) wr.imm_data = htonl(*op.imm);
        if (op.length > 0 && op.length <= lane->max_inline) wr.send_flags = IBV_SEND_INLINE;
      }
      wr.wr.rdma.remote_addr = op.remote.addr;
      wr.wr.rdma.rkey = op.remote.rkey;
      sges[n][0] = {reinterpret_cast<uintptr_t>(op.local), static_cast<uint32_t>(op.length),
                    op.lkey};
      wr.num_sge = op.length > 0 ? 1 : 0;
    }
    wr.wr_id = lane->next_seq++;
    lane->fifo.push_back({wr.wr_id, slot, &op});
    op.wrs_outstanding++;
    if (++lane->unsignaled >= kSignalInterval) {
      wr.send_flags |= IBV_SEND_SIGNALED;
      lane->unsignaled = 0;
    }
    if (n > 0) wrs[n - 1].next = &wr;
    ++n;
    if (op_posted) {
      op.fully_posted = true;
      lane->post_index++;
    }
  }
  if (n == 0) return false;
  // The last WR of every chain is signaled: posting may stop here (queue or buffers full,
  // nothing left), and unsignaled WRs never complete on their own.
  wrs[n - 1].send_flags |= IBV_SEND_SIGNALED;
  lane->unsignaled = 0;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(lane->qp, wrs, &bad);
  if (rc == 0) return more;
  // WRs from `bad` on were not posted: forget them; the lane fails and flushes the rest.
  const Status why = VerbsError("ibv_post_send to " + lane->remote, rc);
  const int first_unposted = (bad >= wrs && bad < wrs + n) ? static_cast<int>(bad - wrs) : 0;
  for (int i = n - 1; i >= first_unposted; --i) {
    const Lane::WrRecord r = lane->fifo.back();
    lane->fifo.pop_back();
    if (r.slot >= 0) lane->free_slots.push_back(static_cast<uint32_t>(r.slot));
    if (r.op->status.ok()) r.op->status = why;
    r.op->wrs_outstanding--;
  }
  // Some providers refuse posts once the NIC moved the QP to ERR (e.g. after a peer's
  // refused op): that is a lane reset, not a dead peer.
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  const bool qp_broken = ibv_query_qp(lane->qp, &attr, IBV_QP_STATE, &init) == 0 &&
                         attr.qp_state == IBV_QPS_ERR;
  BreakLane(lane->shared_from_this(), why, /*reset=*/qp_broken);
  return false;
}

void VerbsTransport::MarkFailing(Lane* lane, const Status& why) {
  if (!lane->failing) {
    lane->failing = true;
    lane->fail_status = why.ok() ? Status::NetworkError("connection closed") : why;
  }
  CompleteFrontOps(lane);
}

void VerbsTransport::BreakLane(const LanePtr& lane, const Status& why, bool reset) {
  const bool first = !lane->failing;
  if (first) {
    lane->failing = true;
    lane->fail_status = why;
    // Tell the session first: an op that a completion below posts must already see the
    // lane as resetting (parked) or its peer as down, not be queued behind the failure.
    reset ? ResetLane(lane, why) : FailLane(lane, why);
  }
  CompleteFrontOps(lane.get());
}

void VerbsTransport::CompleteFrontOps(Lane* lane) {
  while (!lane->ops.empty()) {
    Op* op = lane->ops.front().get();
    if (op->wrs_outstanding > 0 || (!op->fully_posted && !lane->failing)) return;
    const Status st = !op->status.ok() ? op->status
                      : op->fully_posted ? Status::OK()
                                         : lane->fail_status;
    std::unique_ptr<Op> done = std::move(lane->ops.front());
    lane->ops.pop_front();
    if (lane->post_index > 0) lane->post_index--;
    CompleteOp(lane, std::move(done), st);
  }
}

void VerbsTransport::CompleteOp(Lane* lane, std::unique_ptr<Op> op, const Status& s) {
  if (!op->internal) {
    if (lane != nullptr) lane->queued.fetch_sub(1, std::memory_order_relaxed);
    if (!s.ok()) stats_.failed_ops++;
  }
  if (op->region_id != 0) ReleaseRegion(op->region_id);
  if (op->done) op->done(s);
}

void VerbsTransport::MaybeDrained(XchgThread* x, const LanePtr& lane) {
  Lane* l = lane.get();
  if (l->drained || !l->failing || !l->cm_teardown_seen) return;
  if (!l->ops.empty() || !l->fifo.empty() || l->posted_recvs > 0) return;
  l->drained = true;
  x->lanes.erase(l->qp_num);
  PushCm({CmCommand::Type::kDrained, lane, Status::OK()});
}

void VerbsTransport::AbandonLane(XchgThread* x, const LanePtr& lane, const Status& why) {
  Lane* l = lane.get();
  if (l->drained) return;
  MarkFailing(l, why);
  // The NIC never flushed these: we cannot know whether they executed, so they failed.
  while (!l->fifo.empty()) {
    const Lane::WrRecord r = l->fifo.front();
    l->fifo.pop_front();
    if (r.slot >= 0) l->free_slots.push_back(static_cast<uint32_t>(r.slot));
    if (r.op->status.ok()) r.op->status = l->fail_status;
    r.op->wrs_outstanding--;
  }
  CompleteFrontOps(l);
  l->posted_recvs = 0;
  l->cm_teardown_seen = true;
  MaybeDrained(x, lane);
}

}  // namespace nova::transport
