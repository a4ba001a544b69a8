// The per-lane handshake of VerbsTransport (handshake.h): Hello, Challenge, Response and
// Verdict, one message per SEND exchange over the lane's QP (as kFragHandshake frames),
// driven by Lane::hs and ending in LaneAuthenticated() or a refusal whose Verdict tells the
// other side why.
//
// Thread safety: runs only on the lane's xchg thread, so the lane's handshake state needs no
// lock; mu_ is taken only to record a refusal in the session (and by LaneAuthenticated).
#include <glog/logging.h>

#include "common/transport/handshake.h"
#include "common/transport/verbs_internal.h"

namespace nova::transport {

void VerbsTransport::StartHandshake(XchgThread* x, const LanePtr& lane) {
  Lane* l = lane.get();
  l->hs.nonce_local = RandomNonce();
  Hello hello;
  hello.node_name = options_.node_name;
  hello.listen_address = listen_address();
  hello.incarnation = incarnation_;
  hello.lane = static_cast<uint16_t>(l->index);
  hello.lanes = static_cast<uint16_t>(options_.xchg_threads);
  hello.nonce = l->hs.nonce_local;
  l->hs.state = HsState::kAwaitChallenge;
  SendInternal(x, lane, EncodeHello(hello), nullptr);
}

void VerbsTransport::SendInternal(XchgThread* x, const LanePtr& lane, std::string frame,
                                  Completion done) {
  auto op = std::make_unique<Op>();
  op->internal = true;
  op->frag_flags = kFragHandshake;
  op->payload = std::move(frame);
  op->done = std::move(done);
  if (lane->drain.failing) {
    CompleteOp(lane.get(), std::move(op), lane->drain.fail_status);
    return;
  }
  lane->posted.ops.push_back(std::move(op));
  if (!lane->dirty) {
    lane->dirty = true;
    x->dirty.push_back(lane);
  }
}

void VerbsTransport::RefuseLane(XchgThread* x, const LanePtr& lane, const Status& why) {
  lane->hs.state = HsState::kRefusing;
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
  switch (l->hs.state) {
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
      l->hs.peer_name = h.node_name;
      l->hs.peer_address = h.listen_address;
      l->hs.peer_incarnation = h.incarnation;
      l->hs.nonce_remote = h.nonce;
      l->hs.nonce_local = RandomNonce();
      Challenge c{options_.node_name, listen_address(), l->hs.nonce_local,
                  AcceptorMac(secret, index, h.nonce, l->hs.nonce_local)};
      l->hs.state = HsState::kAwaitResponse;
      return SendInternal(x, lane, EncodeChallenge(c), nullptr);
    }
    case HsState::kAwaitResponse: {
      Response r;
      Status st = DecodeResponse(msg, &r);
      if (st.ok() &&
          !MacEquals(r.mac, InitiatorMac(secret, index, l->hs.nonce_local, l->hs.nonce_remote))) {
        stats_.auth_failures++;
        LOG(WARNING) << "refusing connection from '" << l->hs.peer_name << "' at " << l->remote
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
        l->hs.state = HsState::kDone;
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
      l->hs.peer_name = c.node_name;
      l->hs.peer_address = c.listen_address;
      l->hs.nonce_remote = c.nonce;
      l->hs.state = HsState::kAwaitVerdict;
      if (!MacEquals(c.mac, AcceptorMac(secret, index, l->hs.nonce_local, c.nonce))) {
        // Answer anyway and close only after its Verdict, so that a listener with another
        // secret logs and counts us too.
        stats_.auth_failures++;
        LOG(WARNING) << "peer at " << l->remote << " (claiming to be '" << c.node_name
                     << "') does not know the cluster secret; closing";
        l->hs.pending_refusal = Status::PermissionDenied(
            "peer at " + l->remote + " failed authentication: cluster secret mismatch");
        MutexLock lock(&mu_);
        if (l->session != nullptr) l->session->refusal = l->hs.pending_refusal;
      }
      return SendInternal(x, lane,
                          EncodeResponse({InitiatorMac(secret, index, c.nonce, l->hs.nonce_local)}),
                          nullptr);
    }
    case HsState::kAwaitVerdict: {
      if (!l->hs.pending_refusal.ok()) return fail(l->hs.pending_refusal);
      const Status verdict = DecodeVerdict(msg);
      if (!verdict.ok()) {
        if (verdict.IsPermissionDenied()) {
          LOG(WARNING) << "'" << l->hs.peer_name << "' at " << l->remote
                       << " refused our cluster secret";
        }
        return fail(verdict.Prepend("'" + l->hs.peer_name + "' at " + l->remote +
                                    " refused the connection"));
      }
      Result<PeerId> peer = LaneAuthenticated(lane, &after);
      if (!peer.ok()) {
        fail(peer.status());
      } else {
        l->authenticated = true;
        l->peer_id = *peer;
        l->hs.state = HsState::kDone;
      }
      break;
    }
    default:
      return ProtocolViolation(lane, "unexpected handshake frame");
  }
  for (auto& cb : after) cb();  // OnPeerUp/OnPeerDown, outside mu_
}

}  // namespace nova::transport
