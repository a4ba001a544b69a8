// VerbsTransport's public face: construction, Init/Start/Shutdown and the Transport API
// (Connect/Disconnect, peer queries, memory registration, Send/Write/Read, stats). The API
// validates its arguments, pins local regions and hands each op to the xchg thread of its
// lane; peers and sessions are in verbs_session.cc, the threads in verbs_cm.cc and
// verbs_lane.cc, the design notes in verbs_internal.h.
//
// Thread safety: every method here may be called from any thread (but see verbs_transport.h
// for the blocking ones); shared state is guarded by mu_, in the lock order written in
// verbs_transport.h. Shutdown() joins the cm and xchg threads and then runs their final
// clean-up (AbandonLane, DestroyLane, RunXchgCommands) on its own thread.
#include "common/transport/verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/transport/handshake.h"
#include "common/transport/verbs_internal.h"

namespace nova::transport {

namespace {

void SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
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

}  // namespace

std::unique_ptr<Transport> NewVerbsTransport(const TransportOptions& options,
                                             TransportHandler* handler) {
  return std::make_unique<VerbsTransport>(options, handler);
}

VerbsTransport::VerbsTransport(const TransportOptions& options, TransportHandler* handler)
    : options_(options),
      handler_(handler),
      incarnation_(RandomU64()),
      cm_(std::make_unique<CmThread>()) {}

VerbsTransport::~VerbsTransport() { Shutdown(); }

// ---------------------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------------------

Status VerbsTransport::Init() {
  MutexLock l(&mu_);
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

  dev_.channel = rdma_create_event_channel();
  if (dev_.channel == nullptr) return VerbsError("rdma_create_event_channel", errno);
  if (rdma_create_id(dev_.channel, &dev_.listen_id, nullptr, RDMA_PS_TCP) != 0) {
    dev_.listen_id = nullptr;
    return VerbsError("rdma_create_id", errno);
  }
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  NOVA_RETURN_NOT_OK(
      ResolveAddress(options_.listen_host, options_.listen_port, true, &addr, &addr_len));
  if (rdma_bind_addr(dev_.listen_id, reinterpret_cast<sockaddr*>(&addr)) != 0) {
    return VerbsError("rdma_bind_addr(" + options_.listen_host + ":" +
                          std::to_string(options_.listen_port) + ")",
                      errno)
        .Prepend("is the listen address on an RDMA-capable interface?");
  }
  dev_.ctx = dev_.listen_id->verbs;
  if (dev_.ctx == nullptr) {  // bound to a wildcard address: use the first device
    int n = 0;
    ibv_context** contexts = rdma_get_devices(&n);
    if (contexts != nullptr && n > 0) dev_.ctx = contexts[0];
    if (contexts != nullptr) rdma_free_devices(contexts);
    if (dev_.ctx == nullptr)
      return Status::Unavailable("no RDMA device is usable through librdmacm");
  }

  ibv_device_attr attr{};
  if (const int rc = ibv_query_device(dev_.ctx, &attr); rc != 0) {
    return VerbsError("ibv_query_device", rc);
  }
  dev_.max_rd_atomic = static_cast<uint8_t>(std::min<int>(attr.max_qp_rd_atom, kMaxRdAtomic));
  dev_.max_init_rd_atomic =
      static_cast<uint8_t>(std::min<int>(attr.max_qp_init_rd_atom, kMaxRdAtomic));
  dev_.pd = ibv_alloc_pd(dev_.ctx);
  if (dev_.pd == nullptr) return VerbsError("ibv_alloc_pd", errno);

  // Each lane can have kSendQueueDepth signaled sends and kRecvBuffersPerQp receives
  // outstanding; the CQ must hold all of them or it overflows and breaks every QP on it.
  constexpr int kCqesPerLane = kSendQueueDepth + kRecvBuffersPerQp;
  const int cq_entries = std::min(attr.max_cqe, kMaxLanesPerXchgThread * kCqesPerLane);
  dev_.max_lanes_per_thread = cq_entries / kCqesPerLane;
  if (dev_.max_lanes_per_thread < 1) return Status::Unavailable("RDMA device CQs are too small");
  const int vectors = std::max(dev_.ctx->num_comp_vectors, 1);
  for (int k = 0; k < options_.xchg_threads; ++k) {
    auto x = std::make_unique<XchgThread>();
    x->index = k;
    x->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (x->wake_fd < 0) return VerbsError("eventfd", errno);
    x->channel = ibv_create_comp_channel(dev_.ctx);
    xchg_.push_back(std::move(x));
    XchgThread* xp = xchg_.back().get();
    if (xp->channel == nullptr) return VerbsError("ibv_create_comp_channel", errno);
    SetNonBlocking(xp->channel->fd);
    xp->cq = ibv_create_cq(dev_.ctx, cq_entries, xp, xp->channel, k % vectors);
    if (xp->cq == nullptr) return VerbsError("ibv_create_cq", errno);
  }
  cm_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (cm_->wake_fd < 0) return VerbsError("eventfd", errno);
  initialized_ = true;
  return Status::OK();
}

Status VerbsTransport::Start() {
  {
    MutexLock l(&mu_);
    if (!initialized_) return Status::IllegalState("Start() before a successful Init()");
    if (started_ || shutting_down_) return Status::IllegalState("Start() called twice");
  }
  if (rdma_listen(dev_.listen_id, kListenBacklog) != 0) return VerbsError("rdma_listen", errno);
  dev_.listen_port = ntohs(rdma_get_src_port(dev_.listen_id));
  SetNonBlocking(dev_.channel->fd);
  SetNonBlocking(dev_.ctx->async_fd);
  MutexLock l(&mu_);
  for (auto& x : xchg_) x->thread = std::thread([this, xp = x.get()] { XchgLoop(xp); });
  cm_->thread = std::thread([this] { CmLoop(); });
  started_ = true;
  return Status::OK();
}

void VerbsTransport::Shutdown() {
  MutexLock shutdown_lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  bool started = false;
  {
    MutexLock l(&mu_);
    shutting_down_ = true;
    started = started_;
    const Status why = Status::Aborted("transport shutting down");
    std::vector<Session*> live;
    for (auto& [serial, s] : conns_.sessions) live.push_back(s.get());
    for (Session* s : live) FailSessionLocked(s, why);  // may erase only `s` itself
    for (auto& [lane, deadline] : conns_.orphans) FailLaneLocked(conns_.lanes[lane], why);
    for (auto& [id, p] : conns_.peers) p->reconnect_at.reset();
    if (started) {
      auto drained = [this]() REQUIRES(mu_) { return conns_.lanes.empty(); };
      if (!cv_.WaitFor(&l, kShutdownDrainTimeout, drained)) {
        PushCm({CmCommand::Type::kAbandonAll, nullptr, why});
        if (!cv_.WaitFor(&l, kDrainTimeout, drained)) {
          LOG(ERROR) << conns_.lanes.size() << " RDMA lanes did not drain; freeing them anyway";
        }
      }
    }
  }
  if (started) {
    {
      MutexLock l(&cm_->mu);
      cm_->stop = true;
    }
    WakeFd(cm_->wake_fd);
    cm_->thread.join();
    for (auto& x : xchg_) {
      {
        MutexLock l(&x->mu);
        x->stop = true;
      }
      WakeFd(x->wake_fd);
      x->thread.join();
    }
  }
  // No other thread of ours runs now. Free leftovers (only if the NIC never flushed).
  std::vector<LanePtr> leftovers;
  {
    MutexLock l(&mu_);
    for (auto& [p, lane] : conns_.lanes) leftovers.push_back(lane);
  }
  for (const LanePtr& lane : leftovers) {
    if (lane->qp != nullptr) {
      AbandonLane(xchg_[lane->index].get(), lane, Status::Aborted("transport shutting down"));
    }
    DestroyLane(lane);
  }
  for (auto& x : xchg_) RunXchgCommands(x.get());  // late completions and OnPeerDown calls
  if (dev_.listen_id != nullptr) rdma_destroy_id(dev_.listen_id);
  dev_.listen_id = nullptr;
  for (auto& x : xchg_) {
    if (x->cq != nullptr && ibv_destroy_cq(x->cq) != 0) LOG(ERROR) << "ibv_destroy_cq failed";
    if (x->channel != nullptr) ibv_destroy_comp_channel(x->channel);
    if (x->wake_fd >= 0) close(x->wake_fd);
    x->cq = nullptr;
    x->channel = nullptr;
    x->wake_fd = -1;
  }
  {
    MutexLock v(&verbs_mu_);
    MutexLock l(&mu_);
    for (auto& [id, r] : mem_.by_id) {
      if (r->mr != nullptr) ibv_dereg_mr(r->mr);
      r->mr = nullptr;
    }
    if (dev_.pd != nullptr && ibv_dealloc_pd(dev_.pd) != 0) LOG(ERROR) << "ibv_dealloc_pd failed";
    dev_.pd = nullptr;
  }
  if (dev_.channel != nullptr) rdma_destroy_event_channel(dev_.channel);
  dev_.channel = nullptr;
  if (cm_->wake_fd >= 0) close(cm_->wake_fd);
  cm_->wake_fd = -1;
}

// ---------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------

std::string VerbsTransport::listen_address() const {
  const std::string& h = options_.listen_host;
  const bool v6 = h.find(':') != std::string::npos;
  return (v6 ? "[" + h + "]" : h) + ":" + std::to_string(dev_.listen_port);
}

Result<PeerId> VerbsTransport::Connect(const std::string& address) {
  std::string host;
  uint16_t port = 0;
  NOVA_RETURN_NOT_OK(ParseHostPort(address, &host, &port));
  sockaddr_storage dst{};
  socklen_t dst_len = 0;
  NOVA_RETURN_NOT_OK(ResolveAddress(host, port, false, &dst, &dst_len));  // DNS: not under mu_

  MutexLock l(&mu_);
  if (!started_ || shutting_down_) return Status::IllegalState("transport is not running");
  for (auto& [id, p] : conns_.peers) {
    if (p->session != nullptr && (p->address == address || p->dial_address == address)) {
      return id;
    }
  }
  std::shared_ptr<Session> s;
  if (auto it = conns_.connecting.find(address); it != conns_.connecting.end()) {
    s = conns_.sessions[it->second->serial];
  } else {
    s = StartSessionLocked(address, &dst, dst_len, kInvalidPeer);
  }
  const auto timeout = std::chrono::milliseconds(options_.connect_timeout_ms);
  cv_.WaitFor(&l, timeout, [&] { return s->state != Session::State::kConnecting; });
  if (s->state == Session::State::kUp) return s->peer_id;
  if (s->state == Session::State::kConnecting) {
    FailSessionLocked(s.get(), Status::TimedOut("connecting to " + address + " timed out after " +
                                                std::to_string(options_.connect_timeout_ms) +
                                                " ms"));
  }
  // Lost a simultaneous-connect tie-break: the peer is up through its own connection to us.
  if (s->quiet && s->peer_id != kInvalidPeer && conns_.peers[s->peer_id]->session != nullptr) {
    return s->peer_id;
  }
  return s->status;
}

void VerbsTransport::Disconnect(PeerId peer) {
  MutexLock l(&mu_);
  auto it = conns_.peers.find(peer);
  if (it == conns_.peers.end()) return;
  Peer& p = *it->second;
  p.reconnect = false;
  p.reconnect_at.reset();
  const Status why = Status::Aborted("disconnected by this node");
  if (auto c = conns_.connecting.find(p.dial_address);
      c != conns_.connecting.end() && c->second->reconnect_of == peer) {
    c->second->quiet = true;
    FailSessionLocked(c->second, why);
  }
  if (p.session != nullptr) FailSessionLocked(p.session.get(), why);
}

bool VerbsTransport::IsUp(PeerId peer) const {
  MutexLock l(&mu_);
  auto it = conns_.peers.find(peer);
  return it != conns_.peers.end() && it->second->session != nullptr;
}

Result<PeerInfo> VerbsTransport::GetPeerInfo(PeerId peer) const {
  MutexLock l(&mu_);
  auto it = conns_.peers.find(peer);
  if (it == conns_.peers.end()) return Status::NotFound("unknown peer " + std::to_string(peer));
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
  MutexLock v(&verbs_mu_);
  {
    MutexLock l(&mu_);
    if (!initialized_ || shutting_down_) return Status::Unavailable("transport is not running");
  }
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* mr = ibv_reg_mr(dev_.pd, base, length, flags);
  if (mr == nullptr) {
    return VerbsError("ibv_reg_mr of " + std::to_string(length) + " bytes", errno);
  }
  MutexLock l(&mu_);
  auto r = std::make_unique<Region>();
  r->mr = mr;
  MemoryRegion& m = r->region;
  m.id = mem_.next_id++;
  m.rkey = access == kLocalOnly ? 0 : mr->rkey;
  m.lkey = mr->lkey;
  m.base = static_cast<char*>(base);
  m.length = length;
  m.access = access;
  const MemoryRegion out = m;
  mem_.by_id[m.id] = std::move(r);
  if (out.access != kLocalOnly) AdvertiseRegionLocked(out, /*add=*/true);
  return out;
}

Status VerbsTransport::DeregisterMemory(const MemoryRegion& region) {
  MutexLock v(&verbs_mu_);  // Shutdown frees the PD only after we are done
  ibv_mr* mr = nullptr;
  {
    MutexLock l(&mu_);
    auto it = mem_.by_id.find(region.id);
    if (it == mem_.by_id.end() || it->second->region.base != region.base) {
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
    cv_.Wait(&l, [r] { return r->inflight == 0; });
    mr = r->mr;
    mem_.by_id.erase(region.id);
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
  auto it = conns_.peers.find(peer);
  if (it == conns_.peers.end())
    return Status::InvalidArgument("unknown peer " + std::to_string(peer));
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
  auto it = mem_.by_id.find(local.id);
  if (it == mem_.by_id.end() || it->second->deregistering) {
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

void VerbsTransport::ReleaseRegionLocked(uint32_t region_id) {
  auto it = mem_.by_id.find(region_id);
  if (it != mem_.by_id.end() && --it->second->inflight == 0) cv_.NotifyAll();
}

void VerbsTransport::ReleaseRegion(uint32_t region_id) {
  MutexLock l(&mu_);
  ReleaseRegionLocked(region_id);
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
    MutexLock l(&mu_);
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
    MutexLock l(&mu_);
    NOVA_RETURN_NOT_OK(PinRegionLocked(local, local_offset, length, &op->local, &op->lkey));
    if (Status st = SubmitLocked(peer, k, std::move(op)); !st.ok()) {
      ReleaseRegionLocked(local.id);
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
    MutexLock l(&mu_);
    NOVA_RETURN_NOT_OK(PinRegionLocked(local, local_offset, length, &op->local, &op->lkey));
    if (Status st = SubmitLocked(peer, k, std::move(op)); !st.ok()) {
      ReleaseRegionLocked(local.id);
      return st;
    }
  }
  stats_.reads++;
  stats_.bytes_read += length;
  return Status::OK();
}

TransportStats VerbsTransport::GetStats() const {
  TransportStats s = stats_.Snapshot();
  MutexLock l(&mu_);
  for (auto& [id, p] : conns_.peers) s.peers_up += p->session != nullptr ? 1 : 0;
  return s;
}

}  // namespace nova::transport
