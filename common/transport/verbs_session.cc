// Peers and sessions of VerbsTransport: starting sessions and their initiator lanes, failing
// a session or resetting one lane of it, the session's up and gone transitions (with the
// simultaneous-connect tie-break, OnPeerUp/OnPeerDown and the reconnect backoff), region
// adverts, and turning an authenticated lane into (part of) a session. The lane life cycle
// these implement is in verbs_internal.h.
//
// Thread safety: called from every thread of the transport. The *Locked methods REQUIRE(mu_);
// FailLane, ResetLane and LaneAuthenticated take mu_ themselves. None waits for another
// thread: work for the cm and xchg threads is queued with PushCm/PushXchg, and handler calls
// run outside mu_ (queued to an xchg thread, or returned in `after_unlock`).
#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "common/coding.h"
#include "common/transport/verbs_internal.h"

namespace nova::transport {

namespace {

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

}  // namespace

std::shared_ptr<VerbsTransport::Session> VerbsTransport::NewSessionLocked(bool initiator) {
  auto s = std::make_shared<Session>();
  s->serial = conns_.next_session_serial++;
  s->initiator = initiator;
  s->deadline = MonoNow() + std::chrono::milliseconds(options_.connect_timeout_ms);
  s->lanes.resize(options_.xchg_threads);
  s->resetting.assign(options_.xchg_threads, 0);
  s->reset_deadline.resize(options_.xchg_threads);
  s->parked.resize(options_.xchg_threads);
  conns_.sessions[s->serial] = s;
  return s;
}

VerbsTransport::LanePtr VerbsTransport::NewInitiatorLaneLocked(Session* s, int index,
                                                               const std::string& address,
                                                               const void* sockaddr,
                                                               uint32_t sockaddr_len) {
  auto lane = std::make_shared<Lane>(index, /*initiator=*/true);
  lane->remote = address;
  std::memcpy(&lane->dst, sockaddr, std::min<size_t>(sockaddr_len, sizeof(lane->dst)));
  lane->hs.state = HsState::kAwaitEstablished;
  lane->initiator_serial = s->serial;
  lane->session = s;
  s->lanes[index] = lane;
  s->live_lanes++;
  conns_.lanes[lane.get()] = lane;
  return lane;
}

std::shared_ptr<VerbsTransport::Session> VerbsTransport::StartSessionLocked(
    const std::string& address, const void* sockaddr, uint32_t sockaddr_len,
    PeerId reconnect_of) {
  std::shared_ptr<Session> s = NewSessionLocked(/*initiator=*/true);
  s->address = address;
  s->reconnect_of = reconnect_of;
  conns_.connecting[address] = s.get();
  for (int k = 0; k < options_.xchg_threads; ++k) {
    NewInitiatorLaneLocked(s.get(), k, address, sockaddr, sockaddr_len);
  }
  // Lane 0 first; the others once it authenticated, so a refusal costs one handshake.
  PushCm({CmCommand::Type::kStartLane, s->lanes[0], Status::OK()});
  return s;
}

void VerbsTransport::FailLane(const LanePtr& lane, const Status& why) {
  MutexLock l(&mu_);
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
  MutexLock l(&mu_);
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
  for (auto& [id, p] : conns_.peers) {
    if (p->session != nullptr) SubmitControlLocked(p->session.get(), frame);
  }
}

void VerbsTransport::FailSessionLocked(Session* s, const Status& why) {
  if (s->state == Session::State::kFailed) return;
  s->was_up = s->state == Session::State::kUp;
  s->state = Session::State::kFailed;
  s->status = s->refusal.ok() ? why : s->refusal;
  if (auto it = conns_.peers.find(s->peer_id);
      it != conns_.peers.end() && it->second->session.get() == s) {
    it->second->session.reset();
    it->second->remote_regions.clear();  // a reconnected peer advertises afresh
    s->report_down = !s->quiet;
    LOG(INFO) << "peer " << it->second->name << " is down: " << why.ToString();
  }
  if (auto it = conns_.connecting.find(s->address);
      s->initiator && it != conns_.connecting.end() && it->second == s) {
    conns_.connecting.erase(it);
  }
  if (auto it = conns_.accepting.find(s->peer_name);
      !s->initiator && it != conns_.accepting.end() && it->second == s) {
    conns_.accepting.erase(it);
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
  cv_.NotifyAll();
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
  auto it = conns_.peers.find(target);
  if (!shutting_down_ && !s->quiet && it != conns_.peers.end() &&
      options_.reconnect_initial_backoff_ms > 0) {
    Peer& p = *it->second;
    if (p.reconnect && p.session == nullptr && !p.reconnect_at.has_value() &&
        conns_.connecting.count(p.dial_address) == 0) {
      const int initial = options_.reconnect_initial_backoff_ms;
      p.backoff_ms = s->was_up ? initial
                               : std::min(std::max(p.backoff_ms * 2, initial),
                                          std::max(options_.reconnect_max_backoff_ms, initial));
      p.reconnect_at = MonoNow() + std::chrono::milliseconds(p.backoff_ms);
    }
  }
  conns_.sessions.erase(s->serial);  // may destroy *s
}

VerbsTransport::Peer& VerbsTransport::FindOrCreatePeerLocked(const std::string& name) {
  auto it = conns_.peer_by_name.find(name);
  if (it != conns_.peer_by_name.end()) return *conns_.peers[it->second];
  auto p = std::make_unique<Peer>();
  p->id = conns_.next_peer_id++;
  p->name = name;
  Peer& ref = *p;
  conns_.peer_by_name[name] = p->id;
  conns_.peers[p->id] = std::move(p);
  return ref;
}

void VerbsTransport::SessionUpLocked(Session* s, Callbacks* after_unlock) {
  Peer& p = *conns_.peers[s->peer_id];
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
  p.session = conns_.sessions[s->serial];
  p.address = s->peer_address;
  p.backoff_ms = 0;
  p.reconnect_at.reset();
  if (s->initiator) {
    p.reconnect = true;
    p.dial_address = s->address;
    p.dial = s->lanes[0]->dst;
    if (auto it = conns_.connecting.find(s->address);
        it != conns_.connecting.end() && it->second == s) {
      conns_.connecting.erase(it);
    }
  } else if (auto it = conns_.accepting.find(s->peer_name);
             it != conns_.accepting.end() && it->second == s) {
    conns_.accepting.erase(it);
  }
  for (auto& [id, r] : mem_.by_id) {  // tell the peer what it may access (see verbs_internal.h)
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
  cv_.NotifyAll();
}

Result<PeerId> VerbsTransport::LaneAuthenticated(const LanePtr& lane, Callbacks* after_unlock) {
  MutexLock l(&mu_);
  if (lane->failed || shutting_down_) return Status::Aborted("connection is closing");
  const int k = lane->index;
  Peer& p = FindOrCreatePeerLocked(lane->hs.peer_name);
  Session* s = lane->session;
  if (lane->initiator) {
    if (s->state == Session::State::kUp) {  // a lane we re-dialled after a reset
      if (s->peer_name != lane->hs.peer_name || s->lanes[k] != lane) {
        return Status::NetworkError("re-established lane " + std::to_string(k) + " to " +
                                    s->address + " reached " + lane->hs.peer_name);
      }
      s->resetting[k] = 0;
      FlushParkedLocked(s, k);
      return p.id;
    }
    if (s->state != Session::State::kConnecting) return Status::Aborted("connection is closing");
    if (s->peer_name.empty()) {
      s->peer_name = lane->hs.peer_name;
      s->peer_address = lane->hs.peer_address;
      s->peer_id = p.id;
    } else if (s->peer_name != lane->hs.peer_name) {
      return Status::NetworkError("lanes to " + s->address + " reached different nodes (" +
                                  s->peer_name + ", " + lane->hs.peer_name + ")");
    }
    if (k == 0) {
      for (int j = 1; j < options_.xchg_threads; ++j) {
        PushCm({CmCommand::Type::kStartLane, s->lanes[j], Status::OK()});
      }
    }
  } else {
    conns_.orphans.erase(lane.get());
    Session* up = p.session.get();
    if (up != nullptr && !up->initiator && up->incarnation == lane->hs.peer_incarnation &&
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
    auto it = conns_.accepting.find(lane->hs.peer_name);
    s = it == conns_.accepting.end() ? nullptr : it->second;
    if (s != nullptr && (s->incarnation != lane->hs.peer_incarnation ||
                         s->remote_serial != lane->initiator_serial || s->lanes[k] != nullptr)) {
      FailSessionLocked(s, Status::NetworkError("superseded by a newer connection attempt from " +
                                                lane->hs.peer_name));
      s = nullptr;
    }
    if (s == nullptr) {
      s = NewSessionLocked(/*initiator=*/false).get();
      s->peer_name = lane->hs.peer_name;
      s->peer_address = lane->hs.peer_address;
      s->incarnation = lane->hs.peer_incarnation;
      s->remote_serial = lane->initiator_serial;
      s->peer_id = p.id;
      conns_.accepting[s->peer_name] = s;
    }
    s->lanes[k] = lane;
    lane->session = s;
    s->live_lanes++;
  }
  if (++s->authenticated == options_.xchg_threads) SessionUpLocked(s, after_unlock);
  if (s->state == Session::State::kFailed) return s->status;
  return p.id;
}

}  // namespace nova::transport
