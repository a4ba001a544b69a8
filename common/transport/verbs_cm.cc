// The connection-manager (cm) thread of VerbsTransport: librdmacm connection set-up (address
// and route resolution, connect, accept or refuse, with the lane named in the CM private
// data), QP creation with its pre-posted receives, lane teardown and destruction, device
// async events (routed through the process-wide QpRegistry) and the timers: handshake and
// connect deadlines, lane-reset deadlines, reconnect backoff and flush timeouts.
//
// Thread safety: everything here runs on the cm thread, which owns every rdma_cm_id and the
// "cm thread only" fields of Lane, except: PushCm (any thread); OnQpAsyncEvent (on whichever
// transport's cm thread read the shared device's event); DestroyLane, also from Shutdown()
// once the threads were joined. QpRegistry is thread-safe.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "common/coding.h"
#include "common/transport/verbs_internal.h"

namespace nova::transport {

namespace {

// Private data of a CM reject: why we refused, so the initiator's Connect returns it.
std::string EncodeRejectReason(const Status& why) {
  std::string out;
  PutFixed32(&out, kConnectMagic);
  Status(why.code(), why.message().substr(0, kRejectReasonChars)).EncodeTo(&out);
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
  void Add(ibv_qp* qp, void* owner, Handler h) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    owners_[qp] = {owner, h};
  }
  void Remove(ibv_qp* qp) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    owners_.erase(qp);
  }
  // REQUIRES: the event is not yet acked (so the QP cannot be destroyed meanwhile).
  void Dispatch(const ibv_async_event& ev) EXCLUDES(mu_) {
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR: {
        MutexLock l(&mu_);
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
  Mutex mu_;
  std::unordered_map<ibv_qp*, std::pair<void*, Handler>> owners_ GUARDED_BY(mu_);
};

}  // namespace

void VerbsTransport::PushCm(CmCommand c) {
  bool wake;
  {
    MutexLock l(&cm_->mu);
    wake = cm_->commands.empty();
    cm_->commands.push_back(std::move(c));
  }
  if (wake) WakeFd(cm_->wake_fd);
}

void VerbsTransport::CmLoop() {
  while (true) {
    pollfd fds[] = {
        {dev_.channel->fd, POLLIN, 0}, {dev_.ctx->async_fd, POLLIN, 0}, {cm_->wake_fd, POLLIN, 0}};
    (void)poll(fds, 3, kCmTickMs);
    if (fds[2].revents & POLLIN) DrainFd(cm_->wake_fd);
    {
      MutexLock l(&cm_->mu);
      if (cm_->stop) return;
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
    MutexLock l(&cm_->mu);
    cmds.swap(cm_->commands);
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
          MutexLock l(&mu_);
          for (auto& [p, candidate] : conns_.lanes) {
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
          MutexLock l(&mu_);
          for (auto& [p, lane] : conns_.lanes) all.push_back(lane);
        }
        for (const LanePtr& lane : all) {
          TeardownLane(lane, c.status);
          if (lane->qp != nullptr && !lane->cm.abandon_sent) {
            lane->cm.abandon_sent = true;
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
  while (rdma_get_cm_event(dev_.channel, &event) == 0) {
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
    MutexLock l(&mu_);
    auto it = conns_.lanes.find(static_cast<Lane*>(ev.id->context));
    if (it != conns_.lanes.end()) lane = it->second;
  }
  if (lane == nullptr) {
    if (ev.id == dev_.listen_id && ev.event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      LOG(ERROR) << "the RDMA device of listener " << listen_address() << " was removed";
    }
    return;
  }
  if (lane->cm.torn_down) return;
  const std::string what = std::string(rdma_event_str(ev.event)) + " (status " +
                           std::to_string(ev.status) + ")";
  switch (ev.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(lane->id, options_.connect_timeout_ms) != 0) {
        FailLane(lane, VerbsError("rdma_resolve_route to " + lane->remote, errno));
      }
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (lane->id->verbs != dev_.ctx) {
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
      param.responder_resources = dev_.max_rd_atomic;
      param.initiator_depth = dev_.max_init_rd_atomic;
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
  if (id->verbs != dev_.ctx) {
    refuse(Status::Unavailable("request arrived on another RDMA device than our listener's"));
    return;
  }
  if (xchg_[index]->lane_count >= dev_.max_lanes_per_thread) {
    refuse(Status::ResourceExhausted("too many connections"));
    return;
  }
  auto lane = std::make_shared<Lane>(index, /*initiator=*/false);
  lane->id = id;
  lane->remote = ip;
  lane->initiator_serial = serial;
  id->context = lane.get();
  {
    MutexLock l(&mu_);
    if (shutting_down_ || conns_.orphans.size() >= kMaxUnauthenticatedLanes) {
      refuse(shutting_down_ ? Status::Unavailable("shutting down")
                            : Status::ResourceExhausted("too many unauthenticated connections"));
      return;
    }
    conns_.lanes[lane.get()] = lane;
    conns_.orphans[lane.get()] = MonoNow() + std::chrono::milliseconds(options_.connect_timeout_ms);
  }
  if (Status st = CreateQp(lane.get()); !st.ok()) {
    LOG(WARNING) << "cannot accept RDMA connection from " << ip << ": " << st.ToString();
    rdma_reject(id, nullptr, 0);
    FailLane(lane, st);
    return;
  }
  rdma_conn_param param{};
  param.responder_resources = std::min(req.initiator_depth, dev_.max_rd_atomic);
  param.initiator_depth = std::min(req.responder_resources, dev_.max_init_rd_atomic);
  param.rnr_retry_count = kRnrRetryForever;
  if (rdma_accept(id, &param) != 0) FailLane(lane, VerbsError("rdma_accept", errno));
}

void VerbsTransport::ProcessAsyncEvents() {
  ibv_async_event ev;
  while (ibv_get_async_event(dev_.ctx, &ev) == 0) {
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
    MutexLock l(&mu_);
    const MonoTime now = MonoNow();
    for (auto& [lane, deadline] : conns_.orphans) {
      if (deadline <= now) expired.push_back(conns_.lanes[lane]);
    }
    std::vector<Session*> late;
    for (auto& [serial, s] : conns_.sessions) {
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
    for (auto& [id, p] : conns_.peers) {
      if (!p->reconnect_at.has_value() || *p->reconnect_at > now || shutting_down_) continue;
      p->reconnect_at.reset();
      if (p->session == nullptr && p->reconnect && conns_.connecting.count(p->dial_address) == 0) {
        VLOG(1) << "reconnecting to " << p->name << " at " << p->dial_address;
        StartSessionLocked(p->dial_address, &p->dial, sizeof(p->dial), p->id);
      }
    }
    for (auto& [p, lane] : conns_.lanes) {
      if (lane->cm.torn_down && lane->qp != nullptr && !lane->cm.abandon_sent &&
          now - lane->cm.torn_down_at > kDrainTimeout) {
        slow_drains.push_back(lane);
      }
    }
  }
  for (const LanePtr& lane : expired) {
    FailLane(lane, Status::TimedOut("handshake from " + lane->remote + " did not finish in time"));
  }
  for (const LanePtr& lane : slow_drains) {
    LOG(WARNING) << "RDMA lane to " << lane->remote << " did not flush; abandoning it";
    lane->cm.abandon_sent = true;
    PushXchg(lane->index, {XchgCommand::Type::kAbandon, lane, nullptr,
                           Status::NetworkError("connection with " + lane->remote + " failed"),
                           nullptr});
  }
}

void VerbsTransport::StartLane(const LanePtr& lane) {
  if (lane->cm.torn_down) return;
  if (rdma_create_id(dev_.channel, &lane->id, lane.get(), RDMA_PS_TCP) != 0) {
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
  if (x.lane_count >= dev_.max_lanes_per_thread) {
    return Status::ResourceExhausted("xchg thread " + std::to_string(lane->index) +
                                     " already serves its maximum of " +
                                     std::to_string(dev_.max_lanes_per_thread) + " connections");
  }
  constexpr size_t kBytes = (kRecvBuffersPerQp + kSendBuffersPerQp) * kRecvBufferBytes;
  lane->buf.reset(static_cast<char*>(std::aligned_alloc(kBufferAlignment, kBytes)));
  if (lane->buf == nullptr) return Status::ResourceExhausted("out of memory for lane buffers");
  const int access = IBV_ACCESS_LOCAL_WRITE;  // an int: ibv_reg_mr is a macro that masks it
  lane->buf_mr = ibv_reg_mr(dev_.pd, lane->buf.get(), kBytes, access);
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
  if (rdma_create_qp(lane->id, dev_.pd, &attr) != 0) {
    attr.cap.max_inline_data = 0;  // some devices support no inline data at all
    if (rdma_create_qp(lane->id, dev_.pd, &attr) != 0) return VerbsError("rdma_create_qp", errno);
  }
  lane->qp = lane->id->qp;
  lane->qp_num = lane->qp->qp_num;
  lane->max_inline = attr.cap.max_inline_data;
  QpRegistry::Get().Add(lane->qp, this, &VerbsTransport::OnQpAsyncEvent);
  x.lane_count++;
  for (int i = kSendBuffersPerQp - 1; i >= 0; --i) lane->posted.free_slots.push_back(i);

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
  lane->posted.posted_recvs = kRecvBuffersPerQp;
  // Hand the lane to its xchg thread before connecting, so it knows the QP number by the
  // time the first completion can arrive.
  PushXchg(lane->index, {XchgCommand::Type::kAddLane, lane->shared_from_this(), nullptr,
                         Status::OK(), nullptr});
  return Status::OK();
}

void VerbsTransport::TeardownLane(const LanePtr& lane, const Status& why) {
  if (lane->cm.torn_down) return;
  lane->cm.torn_down = true;
  lane->cm.torn_down_at = MonoNow();
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
  MutexLock l(&mu_);
  conns_.lanes.erase(lane.get());
  conns_.orphans.erase(lane.get());
  if (Session* s = lane->session; s != nullptr) {
    lane->session = nullptr;
    if (--s->live_lanes == 0 && s->state == Session::State::kFailed) SessionGoneLocked(s);
  }
  cv_.NotifyAll();
}

}  // namespace nova::transport
