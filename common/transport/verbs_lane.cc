// The xchg threads of VerbsTransport: their loop and command queue, posting work requests
// (fragmenting messages into send buffers or inline sends, RDMA write/read, selective
// signalling), polling the CQ, retiring completions in order, reassembling received
// messages, region-advert control frames, and failing, draining or abandoning a lane.
// The handshake that runs on these threads is in verbs_handshake.cc.
//
// Thread safety: everything here runs on the xchg thread that owns the lane, except PushXchg
// (any thread) and Shutdown()'s final RunXchgCommands/AbandonLane after the threads were
// joined. So the per-lane bookkeeping below needs no lock; mu_ is taken only to reach
// conns_.peers (ClassifyWcError, HandleControl), mem_.by_id (ReleaseRegion) and, through
// FailLane/ResetLane, the sessions.
//
// Posted-op bookkeeping per lane (Lane::posted, xchg thread only):
//  1. `ops` holds every accepted op in submission order; `post_index` is the first op not
//     fully posted (a Send may be posted fragment by fragment as send buffers free up);
//  2. every posted WR gets wr_id = a per-lane sequence number and a record in `fifo`;
//  3. a send-queue completion for sequence S retires every record before S as successful
//     (an unsignaled WR that had failed would have produced its own completion earlier) and
//     S with the completion's status;
//  4. the WR being retired always belongs to ops.front(): ops are posted in order and an op
//     leaves `ops` only when fully posted (or the lane failed) and all its WRs retired, so
//     completions run in submission order, exactly once.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "common/coding.h"
#include "common/transport/handshake.h"
#include "common/transport/verbs_internal.h"

namespace nova::transport {

namespace {

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

}  // namespace

void VerbsTransport::PushXchg(int thread, XchgCommand c) {
  XchgThread& x = *xchg_[thread];
  bool wake;
  {
    MutexLock l(&x.mu);
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
      MutexLock l(&x->mu);
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
    MutexLock l(&x->mu);
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
      if (!lane->drain.failing && lane->hs.state == HsState::kAwaitEstablished)
        StartHandshake(x, c.lane);
      return;
    case XchgCommand::Type::kSubmit:
      if (lane->drain.failing) {
        CompleteOp(lane, std::move(c.op), lane->drain.fail_status);
        return;
      }
      lane->posted.ops.push_back(std::move(c.op));
      if (!lane->dirty) {
        lane->dirty = true;
        x->dirty.push_back(c.lane);
      }
      return;
    case XchgCommand::Type::kFailLane:
      lane->drain.cm_teardown_seen = true;
      if (lane->drain.fail_status_provisional) {  // the cm thread knows the real cause
        lane->drain.fail_status = c.status;
        lane->drain.fail_status_provisional = false;
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
    const Lane::WrRecord r = l->posted.fifo.front();
    l->posted.fifo.pop_front();
    if (r.slot >= 0) l->posted.free_slots.push_back(static_cast<uint32_t>(r.slot));
    if (!st.ok() && r.op->status.ok()) r.op->status = st;
    r.op->wrs_outstanding--;
    CompleteFrontOps(l);
  };
  // Unsignaled WRs before this one completed successfully: one that had failed would have
  // produced its own (earlier) completion.
  while (!l->posted.fifo.empty() && l->posted.fifo.front().seq < wc.wr_id)
    retire_front(Status::OK());
  if (l->posted.fifo.empty() || l->posted.fifo.front().seq != wc.wr_id) {
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
      st = l->drain.failing ? l->drain.fail_status
                            : Status::NetworkError("connection with " + l->remote + " broke");
      reset = true;
      break;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_LEN_ERR:
      st = ClassifyWcError(l, wc, *l->posted.fifo.front().op);
      reset = true;
      break;
    default:  // retries exceeded and the like: the peer or the path is gone
      st = ClassifyWcError(l, wc, *l->posted.fifo.front().op);
      break;
  }
  if (!st.ok() && !l->drain.failing) {
    // Decide the lane's fate before completing the op, so that an op its completion posts
    // already sees the lane as resetting (and is parked) rather than failing with it.
    if (wc.status != IBV_WC_WR_FLUSH_ERR) LOG(WARNING) << st.ToString();
    BreakLane(lane,
              Status::NetworkError("connection with " + l->remote +
                                   " reset after an earlier error: " + st.message()),
              reset);
    l->drain.fail_status_provisional = wc.status == IBV_WC_WR_FLUSH_ERR;
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
  MutexLock l(&mu_);
  auto pit = conns_.peers.find(lane->peer_id);
  if (pit == conns_.peers.end()) return Status::PermissionDenied(what);
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
  l->posted.posted_recvs--;
  const auto slot = static_cast<uint32_t>(wc.wr_id & ~kRecvWrIdFlag);
  if (wc.status != IBV_WC_SUCCESS) {
    if (!l->drain.failing) {
      // A bare flush means the NIC moved the QP to ERR, as it does on a peer's refused
      // one-sided op: reset the lane (the async event names the cause, if it was that).
      const bool flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
      BreakLane(lane,
                Status::NetworkError("receive from " + l->remote +
                                     " failed: " + ibv_wc_status_str(wc.status)),
                /*reset=*/flushed);
      l->drain.fail_status_provisional = flushed;
    }
    return;
  }
  if (l->drain.failing) return;  // do not re-post: the lane is draining
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
  if ((kind == kFragHandshake) == l->authenticated || (l->rx.active && l->rx.kind != kind)) {
    ProtocolViolation(lane, kind == kFragHandshake ? "handshake frame after authentication"
                                                   : "frame before authentication");
    return;
  }
  const size_t limit = kind == kFragHandshake ? kMaxHandshakeMessageBytes
                       : kind == kFragControl ? kMaxControlMessageBytes
                                              : options_.max_message_bytes;
  const size_t len = wc.byte_len - kFragmentHeaderBytes;
  if (l->rx.bytes.size() + len > limit) {
    ProtocolViolation(lane, "message larger than " + std::to_string(limit) + " bytes");
    return;
  }
  l->rx.bytes.append(buf + kFragmentHeaderBytes, len);
  l->rx.active = true;
  l->rx.kind = kind;
  if (!RepostRecv(l, slot)) return;
  if (header & kFragMore) return;
  std::string msg;
  msg.swap(l->rx.bytes);
  l->rx.active = false;
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
  MutexLock l(&mu_);
  auto it = conns_.peers.find(lane->peer_id);
  if (it == conns_.peers.end()) return;
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
  lane->posted.posted_recvs++;
  return true;
}

void VerbsTransport::ProtocolViolation(const LanePtr& lane, const std::string& what) {
  LOG(WARNING) << "protocol violation by " << lane->remote << ": " << what
               << "; closing the connection";
  BreakLane(lane, Status::Corruption("protocol violation by " + lane->remote + ": " + what),
            /*reset=*/false);
}

// ----- posting and completing ----------------------------------------------------------

void VerbsTransport::PostLane(Lane* lane) {
  while (PostChain(lane)) {
  }
}

// Posts one chain of at most kMaxPostChain WRs. Returns true if it may be called again.
bool VerbsTransport::PostChain(Lane* lane) {
  if (lane->drain.failing) return false;
  ibv_send_wr wrs[kMaxPostChain];
  ibv_sge sges[kMaxPostChain][kMaxSendSge];
  uint8_t headers[kMaxPostChain];
  int n = 0;
  bool more = true;
  while (n < kMaxPostChain) {
    if (lane->posted.post_index >= lane->posted.ops.size() ||
        lane->posted.fifo.size() >= kSendQueueDepth) {
      more = false;
      break;
    }
    Op& op = *lane->posted.ops[lane->posted.post_index];
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
        if (lane->posted.free_slots.empty()) {
          more = false;  // resumes when a signaled completion returns buffers
          break;
        }
        slot = static_cast<int>(lane->posted.free_slots.back());
        lane->posted.free_slots.pop_back();
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
    wr.wr_id = lane->posted.next_seq++;
    lane->posted.fifo.push_back({wr.wr_id, slot, &op});
    op.wrs_outstanding++;
    if (++lane->posted.unsignaled >= kSignalInterval) {
      wr.send_flags |= IBV_SEND_SIGNALED;
      lane->posted.unsignaled = 0;
    }
    if (n > 0) wrs[n - 1].next = &wr;
    ++n;
    if (op_posted) {
      op.fully_posted = true;
      lane->posted.post_index++;
    }
  }
  if (n == 0) return false;
  // The last WR of every chain is signaled: posting may stop here (queue or buffers full,
  // nothing left), and unsignaled WRs never complete on their own.
  wrs[n - 1].send_flags |= IBV_SEND_SIGNALED;
  lane->posted.unsignaled = 0;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(lane->qp, wrs, &bad);
  if (rc == 0) return more;
  // WRs from `bad` on were not posted: forget them; the lane fails and flushes the rest.
  const Status why = VerbsError("ibv_post_send to " + lane->remote, rc);
  const int first_unposted = (bad >= wrs && bad < wrs + n) ? static_cast<int>(bad - wrs) : 0;
  for (int i = n - 1; i >= first_unposted; --i) {
    const Lane::WrRecord r = lane->posted.fifo.back();
    lane->posted.fifo.pop_back();
    if (r.slot >= 0) lane->posted.free_slots.push_back(static_cast<uint32_t>(r.slot));
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
  if (!lane->drain.failing) {
    lane->drain.failing = true;
    lane->drain.fail_status = why.ok() ? Status::NetworkError("connection closed") : why;
  }
  CompleteFrontOps(lane);
}

void VerbsTransport::BreakLane(const LanePtr& lane, const Status& why, bool reset) {
  const bool first = !lane->drain.failing;
  if (first) {
    lane->drain.failing = true;
    lane->drain.fail_status = why;
    // Tell the session first: an op that a completion below posts must already see the
    // lane as resetting (parked) or its peer as down, not be queued behind the failure.
    reset ? ResetLane(lane, why) : FailLane(lane, why);
  }
  CompleteFrontOps(lane.get());
}

void VerbsTransport::CompleteFrontOps(Lane* lane) {
  while (!lane->posted.ops.empty()) {
    Op* op = lane->posted.ops.front().get();
    if (op->wrs_outstanding > 0 || (!op->fully_posted && !lane->drain.failing)) return;
    const Status st = !op->status.ok()   ? op->status
                      : op->fully_posted ? Status::OK()
                                         : lane->drain.fail_status;
    std::unique_ptr<Op> done = std::move(lane->posted.ops.front());
    lane->posted.ops.pop_front();
    if (lane->posted.post_index > 0) lane->posted.post_index--;
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
  if (l->drain.drained || !l->drain.failing || !l->drain.cm_teardown_seen) return;
  if (!l->posted.ops.empty() || !l->posted.fifo.empty() || l->posted.posted_recvs > 0) return;
  l->drain.drained = true;
  x->lanes.erase(l->qp_num);
  PushCm({CmCommand::Type::kDrained, lane, Status::OK()});
}

void VerbsTransport::AbandonLane(XchgThread* x, const LanePtr& lane, const Status& why) {
  Lane* l = lane.get();
  if (l->drain.drained) return;
  MarkFailing(l, why);
  // The NIC never flushed these: we cannot know whether they executed, so they failed.
  while (!l->posted.fifo.empty()) {
    const Lane::WrRecord r = l->posted.fifo.front();
    l->posted.fifo.pop_front();
    if (r.slot >= 0) l->posted.free_slots.push_back(static_cast<uint32_t>(r.slot));
    if (r.op->status.ok()) r.op->status = l->drain.fail_status;
    r.op->wrs_outstanding--;
  }
  CompleteFrontOps(l);
  l->posted.posted_recvs = 0;
  l->drain.cm_teardown_seen = true;
  MaybeDrained(x, lane);
}

}  // namespace nova::transport
