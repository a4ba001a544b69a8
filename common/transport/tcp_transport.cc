#include "common/transport/tcp_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <glog/logging.h>

#include "common/transport/handshake.h"
#include "common/transport/tcp_socket.h"

namespace nova::transport {

namespace {

constexpr int kMaxXchgThreads = 64;
constexpr int kMaxEvents = 64;
constexpr size_t kMaxNodeNameBytes = 255;
// Frames carry lengths in 32 bits.
constexpr uint64_t kMaxFrameLength = UINT32_MAX;
constexpr int kListenPollMs = 1000;

void WakeFd(int fd) {
  uint64_t one = 1;
  ssize_t r = ::write(fd, &one, sizeof(one));
  (void)r;  // an eventfd write only fails if the counter overflows: already awake
}

void DrainFd(int fd) {
  uint64_t v;
  ssize_t r = ::read(fd, &v, sizeof(v));
  (void)r;
}

}  // namespace

TcpTransport::TcpTransport(const TransportOptions& options, TransportHandler* handler)
    : options_(options), handler_(handler) {}

TcpTransport::~TcpTransport() { Shutdown(); }

Status TcpTransport::Init() {
  if (handler_ == nullptr) return Status::InvalidArgument("transport needs a handler");
  if (options_.xchg_threads < 1 || options_.xchg_threads > kMaxXchgThreads) {
    return Status::InvalidArgument("xchg_threads must be in [1, " +
                                   std::to_string(kMaxXchgThreads) + "], got " +
                                   std::to_string(options_.xchg_threads));
  }
  if (options_.cluster_secret.empty()) {
    return Status::InvalidArgument("cluster secret is empty (set --cluster_secret_file)");
  }
  if (options_.node_name.empty() || options_.node_name.size() > kMaxNodeNameBytes) {
    return Status::InvalidArgument("node name must be 1.." + std::to_string(kMaxNodeNameBytes) +
                                   " bytes");
  }
  if (options_.max_message_bytes > kMaxFrameLength ||
      options_.max_transfer_bytes > kMaxFrameLength) {
    return Status::InvalidArgument("max_message_bytes and max_transfer_bytes must fit 32 bits");
  }
  incarnation_ = RandomU64();
  lane_env_.regions = &regions_;
  lane_env_.handler = handler_;
  lane_env_.counters = &counters_;
  lane_env_.limits.max_message_bytes = options_.max_message_bytes;
  lane_env_.limits.max_transfer_bytes = options_.max_transfer_bytes;
  return Status::OK();
}

Status TcpTransport::Start() {
  MutexLock lock(&lifecycle_mu_);
  if (started_) return Status::IllegalState("transport already started");
  if (lane_env_.handler == nullptr) return Status::IllegalState("Start() before Init()");
  auto fd = ListenTcp(options_.listen_host, options_.listen_port, &bound_port_);
  if (!fd.ok()) return fd.status().Prepend("transport listen");
  listen_fd_ = fd.value();
  listen_wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (listen_wake_fd_ < 0) return Status::FromErrno("eventfd", errno);
  for (int i = 0; i < options_.xchg_threads; ++i) {
    auto t = std::make_unique<XchgThread>();
    t->index = i;
    t->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    t->event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->epoll_fd < 0 || t->event_fd < 0) return Status::FromErrno("epoll/eventfd", errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kInvalidPeer;  // the task queue's eventfd
    if (::epoll_ctl(t->epoll_fd, EPOLL_CTL_ADD, t->event_fd, &ev) != 0) {
      return Status::FromErrno("epoll_ctl", errno);
    }
    xchg_.push_back(std::move(t));
  }
  for (auto& t : xchg_) {
    XchgThread* raw = t.get();
    t->thread = std::thread([this, raw] { XchgLoop(raw); });
  }
  listener_ = std::thread([this] { ListenLoop(); });
  reconnector_ = std::thread([this] { ReconnectLoop(); });
  started_ = true;
  LOG(INFO) << "tcp transport " << options_.node_name << " listening on " << listen_address()
            << " with " << options_.xchg_threads << " xchg threads";
  return Status::OK();
}

void TcpTransport::Shutdown() {
  MutexLock lock(&lifecycle_mu_);
  if (!started_ || shutting_down_.exchange(true)) return;
  WakeFd(listen_wake_fd_);
  listener_.join();
  {
    MutexLock plock(&peers_mu_);
    peers_cv_.NotifyAll();
  }
  reconnector_.join();
  for (auto& t : xchg_) {
    PostTask(t->index, [](XchgThread& x) { x.stop = true; });
  }
  for (auto& t : xchg_) t->thread.join();
  {
    MutexLock plock(&peers_mu_);
    for (auto& [key, entry] : assembling_) {
      for (int fd : entry.second.fds) {
        if (fd >= 0) ::close(fd);
      }
    }
    assembling_.clear();
    for (auto& [id, p] : peers_) p.state = PeerState::kClosed;
  }
  for (auto& t : xchg_) {
    ::close(t->epoll_fd);
    ::close(t->event_fd);
  }
  ::close(listen_fd_);
  ::close(listen_wake_fd_);
}

std::string TcpTransport::listen_address() const {
  return options_.listen_host + ":" + std::to_string(bound_port_);
}

// ---------------------------------------------------------------------------------------
// Exchange threads

void TcpTransport::PostTask(int lane, Task task) {
  XchgThread* t = xchg_[lane].get();
  MutexLock lock(&t->mu);
  if (t->exited) {
    // The thread is gone (shutdown): run the task here; it finds no lanes and fails its op.
    task(*t);
    return;
  }
  const bool was_empty = t->tasks.empty();
  t->tasks.push_back(std::move(task));
  lock.Unlock();
  if (was_empty) WakeFd(t->event_fd);
}

void TcpTransport::RunTasks(XchgThread* t) {
  std::vector<Task> tasks;
  {
    MutexLock lock(&t->mu);
    tasks.swap(t->tasks);
  }
  for (auto& task : tasks) task(*t);
}

void TcpTransport::XchgLoop(XchgThread* t) {
  PinCurrentThreadToLane(t->index);
  epoll_event events[kMaxEvents];
  int timeout_ms = -1;  // until the oldest deferred acknowledgment is due
  while (!t->stop) {
    int n = ::epoll_wait(t->epoll_fd, events, kMaxEvents, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "epoll_wait failed on xchg thread " << t->index << ": " << std::strerror(errno);
      break;
    }
    for (int i = 0; i < n; ++i) {
      const PeerId peer = events[i].data.u64;
      if (peer == kInvalidPeer) {
        DrainFd(t->event_fd);
        RunTasks(t);
        continue;
      }
      auto it = t->lanes.find(peer);
      if (it == t->lanes.end()) continue;  // closed earlier in this batch
      TcpLane* lane = it->second.lane.get();
      const uint64_t gen = lane->generation();
      Status s;
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        s = it->second.reading ? lane->OnReadable()
                               : Status::NetworkError("connection failed before it was up");
      }
      if (s.ok() && (events[i].events & EPOLLOUT)) s = lane->Flush();
      if (!s.ok()) {
        CloseLane(t, peer, gen, s);
      } else {
        t->dirty.push_back(peer);
      }
    }
    FlushDirty(t);
    timeout_ms = ReleaseDueAcks(t);
  }
  // Shutting down: everything still pending fails. (Deferred acknowledgments are dropped:
  // flushing them would also send requests that never went out, which are then reported
  // failed though the peer may carry them out; the peer fails its own pending SENDs as it
  // would for any lane that goes down.)
  std::vector<std::pair<PeerId, uint64_t>> open;
  for (auto& [peer, slot] : t->lanes) open.emplace_back(peer, slot.lane->generation());
  for (auto& [peer, gen] : open) CloseLane(t, peer, gen, Status::Aborted("transport shut down"));
  MutexLock lock(&t->mu);
  t->exited = true;
  for (auto& task : t->tasks) task(*t);
  t->tasks.clear();
}

int TcpTransport::ReleaseDueAcks(XchgThread* t) {
  const MonoTime now = MonoNow();
  MonoTime next = MonoTime::max();
  for (auto& [peer, slot] : t->lanes) {
    TcpLane* lane = slot.lane.get();
    if (!lane->HasDeferredAcks()) continue;
    const MonoTime due = lane->deferred_since() + kAckDelay;
    if (due <= now) {
      lane->ReleaseDeferredAcks();
      t->dirty.push_back(peer);
    } else {
      next = std::min(next, due);
    }
  }
  FlushDirty(t);
  if (next == MonoTime::max()) return -1;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::max<int64_t>(1, ms));
}

void TcpTransport::FlushDirty(XchgThread* t) {
  std::vector<PeerId> dirty;
  dirty.swap(t->dirty);
  for (PeerId peer : dirty) {
    auto it = t->lanes.find(peer);
    if (it == t->lanes.end()) continue;
    TcpLane* lane = it->second.lane.get();
    Status s = lane->Flush();
    if (!s.ok()) {
      CloseLane(t, peer, lane->generation(), s);
      continue;
    }
    UpdateInterest(t, &it->second);
  }
}

void TcpTransport::UpdateInterest(XchgThread* t, XchgThread::Slot* slot) {
  uint32_t want = (slot->reading ? EPOLLIN : 0u) | (slot->lane->HasPendingOutput() ? EPOLLOUT : 0u);
  if (slot->in_epoll && want == slot->events) return;
  if (!slot->in_epoll && want == 0) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = slot->lane->peer();
  int op = slot->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (::epoll_ctl(t->epoll_fd, op, slot->lane->fd(), &ev) != 0) {
    LOG(ERROR) << "epoll_ctl: " << std::strerror(errno);
    return;
  }
  slot->in_epoll = true;
  slot->events = want;
}

void TcpTransport::CloseLane(XchgThread* t, PeerId peer, uint64_t gen, const Status& why) {
  auto it = t->lanes.find(peer);
  if (it == t->lanes.end() || it->second.lane->generation() != gen) return;
  std::unique_ptr<TcpLane> lane = std::move(it->second.lane);
  const bool in_epoll = it->second.in_epoll;
  t->lanes.erase(it);
  if (in_epoll) ::epoll_ctl(t->epoll_fd, EPOLL_CTL_DEL, lane->fd(), nullptr);
  lane->FailAll(why);
  lane.reset();
  LaneClosed(peer, gen, why);
}

Status TcpTransport::LaneGoneStatus() const {
  return shutting_down_ ? Status::Aborted("transport shut down")
                        : Status::NetworkError("peer went down before the op was posted");
}

// ---------------------------------------------------------------------------------------
// Peers

void TcpTransport::LaneClosed(PeerId peer, uint64_t gen, const Status& why) {
  Status reason;
  {
    MutexLock lock(&peers_mu_);
    auto it = peers_.find(peer);
    if (it == peers_.end() || it->second.generation != gen) return;
    Peer& p = it->second;
    if (p.state == PeerState::kUp) {
      p.state = PeerState::kDown;
      p.down_reason = why;
      LOG_IF(WARNING, !shutting_down_) << "peer " << p.name << " (" << p.listen_address
                                        << ") down: " << why.ToString();
      for (int k = 0; k < options_.xchg_threads; ++k) {
        PostTask(k, [this, peer, gen, why](XchgThread& x) { CloseLane(&x, peer, gen, why); });
      }
    }
    if (--p.lanes_open > 0) return;
    reason = p.down_reason;
    p.down_pending = true;
  }
  handler_->OnPeerDown(peer, reason);
  MutexLock lock(&peers_mu_);
  Peer& p = peers_[peer];
  p.down_pending = false;
  if (p.reconnect && !p.installing && p.state == PeerState::kDown && !shutting_down_) {
    ScheduleReconnect(&p);
  }
  peers_cv_.NotifyAll();
}

void TcpTransport::InstallLanes(PeerId peer, LaneSet set) {
  const int n = options_.xchg_threads;
  uint64_t gen;
  PeerInfo info;
  {
    MutexLock lock(&peers_mu_);
    Peer& p = peers_[peer];
    p.installing = true;
    if (p.state == PeerState::kUp) {
      p.state = PeerState::kDown;
      p.down_reason = Status::NetworkError("connection replaced by a new one from " + set.name);
      const uint64_t old = p.generation;
      const Status why = p.down_reason;
      for (int k = 0; k < n; ++k) {
        PostTask(k, [this, peer, old, why](XchgThread& x) { CloseLane(&x, peer, old, why); });
      }
    }
    peers_cv_.Wait(&lock,
                   [&] { return (p.lanes_open == 0 && !p.down_pending) || shutting_down_.load(); });
    p.installing = false;
    if (shutting_down_) {
      for (int fd : set.fds) ::close(fd);
      return;
    }
    gen = ++p.generation;
    p.lanes_open = n;
    p.name = set.name;
    p.listen_address = set.listen_address;
    p.incarnation = set.incarnation;
    p.state = PeerState::kUp;
    p.backoff_ms = options_.reconnect_initial_backoff_ms;
    info = PeerInfo{peer, p.name, p.listen_address};
    // Lanes exist before anyone can post to the peer, but read nothing until OnPeerUp has
    // run, so no message from the peer overtakes its OnPeerUp.
    for (int k = 0; k < n; ++k) {
      int fd = set.fds[k];
      PostTask(k, [this, peer, gen, fd](XchgThread& x) {
        if (x.TaskRunsAfterExit()) {
          ::close(fd);
          return;
        }
        Status s = SetNonBlocking(fd, true);
        auto& slot = x.lanes[peer];
        slot = XchgThread::Slot{};
        slot.lane = std::make_unique<TcpLane>(fd, peer, gen, lane_env_);
        if (!s.ok()) CloseLane(&x, peer, gen, s);
      });
    }
  }
  LOG(INFO) << "peer " << info.name << " (" << info.address << ") up";
  handler_->OnPeerUp(info);
  for (int k = 0; k < n; ++k) {
    PostTask(k, [this, peer, gen](XchgThread& x) {
      auto it = x.lanes.find(peer);
      if (it == x.lanes.end() || it->second.lane->generation() != gen) return;
      it->second.reading = true;
      UpdateInterest(&x, &it->second);
    });
  }
}

Result<PeerId> TcpTransport::Connect(const std::string& address) {
  if (!started_ || shutting_down_) return Status::IllegalState("transport is not running");
  std::shared_ptr<Mutex> dialing;
  {
    MutexLock lock(&connect_mu_);
    auto& m = connecting_[address];
    if (m == nullptr) m = std::make_shared<Mutex>();
    dialing = m;
  }
  MutexLock dial_lock(&*dialing);  // a racing Connect finds the peer up below
  {
    MutexLock lock(&peers_mu_);
    for (auto& [id, p] : peers_) {
      if (p.state == PeerState::kUp &&
          (p.connect_address == address || p.listen_address == address)) {
        return id;
      }
    }
  }
  auto set = DialLanes(address);
  if (!set.ok()) return set.status();
  PeerId id = kInvalidPeer;
  {
    MutexLock lock(&peers_mu_);
    for (auto& [pid, p] : peers_) {
      if (p.name == set->name || (!p.connect_address.empty() && p.connect_address == address)) {
        id = pid;
        break;
      }
    }
    if (id == kInvalidPeer) {
      id = next_peer_id_++;
      peers_[id].id = id;
    }
    Peer& p = peers_[id];
    p.connect_address = address;
    p.reconnect = options_.reconnect_initial_backoff_ms > 0;
  }
  InstallLanes(id, std::move(set.value()));
  if (!IsUp(id)) return Status::Unavailable("peer at " + address + " went down while connecting");
  return id;
}

Result<TcpTransport::LaneSet> TcpTransport::DialLanes(const std::string& address) {
  LaneSet set;
  set.fds.assign(options_.xchg_threads, -1);
  for (int lane = 0; lane < options_.xchg_threads; ++lane) {
    Status s = DialLane(address, lane, &set);
    if (!s.ok()) {
      for (int fd : set.fds) {
        if (fd >= 0) ::close(fd);
      }
      return s.Prepend("connect to " + address);
    }
  }
  return set;
}

Status TcpTransport::DialLane(const std::string& address, int lane, LaneSet* set) {
  Deadline deadline = Deadline::After(std::chrono::milliseconds(options_.connect_timeout_ms));
  auto fd_or = ConnectTcp(address, deadline);
  if (!fd_or.ok()) return fd_or.status();
  const int fd = fd_or.value();
  auto fail = [fd](const Status& s) {
    ::close(fd);
    return s;
  };
  Status s = TuneSocket(fd, options_.socket_buffer_bytes);
  if (!s.ok()) return fail(s);
  Hello hello;
  hello.node_name = options_.node_name;
  hello.listen_address = listen_address();
  hello.incarnation = incarnation_;
  hello.lane = static_cast<uint16_t>(lane);
  hello.lanes = static_cast<uint16_t>(options_.xchg_threads);
  hello.nonce = RandomNonce();
  s = WriteHandshakeFrame(fd, EncodeHello(hello), deadline);
  if (!s.ok()) return fail(s);
  auto ch_bytes = ReadHandshakeFrame(fd, deadline);
  if (!ch_bytes.ok()) return fail(ch_bytes.status());
  HandshakeKind kind;
  if (PeekHandshakeKind(ch_bytes.value(), &kind) && kind == HandshakeKind::kVerdict) {
    s = DecodeVerdict(ch_bytes.value());  // refused right after our Hello
    return fail(s.ok() ? Status::Corruption("unexpected verdict") : s.Prepend("refused by peer"));
  }
  Challenge ch;
  s = DecodeChallenge(ch_bytes.value(), &ch);
  if (!s.ok()) return fail(s);
  // Answer first, so a listener with another secret logs and counts us; then check it.
  Response resp{InitiatorMac(options_.cluster_secret, hello.lane, ch.nonce, hello.nonce)};
  s = WriteHandshakeFrame(fd, EncodeResponse(resp), deadline);
  if (!s.ok()) return fail(s);
  if (!MacEquals(ch.mac, AcceptorMac(options_.cluster_secret, hello.lane, hello.nonce, ch.nonce))) {
    counters_.auth_failures.fetch_add(1, std::memory_order_relaxed);
    LOG(WARNING) << "refusing " << address << ": it does not know the cluster secret";
    return fail(Status::PermissionDenied("peer at " + address + " failed authentication"));
  }
  auto verdict = ReadHandshakeFrame(fd, deadline);
  if (!verdict.ok()) return fail(verdict.status());
  s = DecodeVerdict(verdict.value());
  if (!s.ok()) return fail(s.Prepend("refused by peer"));
  set->name = ch.node_name;
  set->listen_address = ch.listen_address;
  set->fds[lane] = fd;
  return Status::OK();
}

void TcpTransport::ListenLoop() {
  while (!shutting_down_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {listen_wake_fd_, POLLIN, 0}};
    int r = ::poll(fds, 2, kListenPollMs);
    if (r < 0 && errno != EINTR) {
      LOG(ERROR) << "listener poll: " << std::strerror(errno);
      return;
    }
    if (shutting_down_) return;
    {
      // Drop half-assembled lane sets whose other lanes never came.
      MutexLock lock(&peers_mu_);
      const auto cutoff = MonoNow() - std::chrono::milliseconds(options_.connect_timeout_ms);
      for (auto it = assembling_.begin(); it != assembling_.end();) {
        if (it->second.first < cutoff) {
          for (int fd : it->second.second.fds) {
            if (fd >= 0) ::close(fd);
          }
          it = assembling_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (r <= 0 || !(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != EAGAIN) LOG(WARNING) << "accept: " << std::strerror(errno);
      continue;
    }
    AcceptOne(fd);
  }
}

void TcpTransport::AcceptOne(int fd) {
  Deadline deadline = Deadline::After(std::chrono::milliseconds(options_.connect_timeout_ms));
  auto refuse = [&](const Status& s, bool tell) {
    LOG(WARNING) << "refused an incoming connection: " << s.ToString();
    if (tell) WriteHandshakeFrame(fd, EncodeVerdict(s), deadline).IgnoreError();
    ::close(fd);
  };
  Status s = TuneSocket(fd, options_.socket_buffer_bytes);
  if (!s.ok()) return refuse(s, false);
  auto hello_bytes = ReadHandshakeFrame(fd, deadline);
  if (!hello_bytes.ok()) return refuse(hello_bytes.status(), false);
  Hello hello;
  s = DecodeHello(hello_bytes.value(), &hello);
  if (!s.ok()) return refuse(s, true);
  if (hello.lanes != options_.xchg_threads || hello.lane >= hello.lanes) {
    return refuse(Status::InvalidArgument(
                      "peer " + hello.node_name + " uses " + std::to_string(hello.lanes) +
                      " xchg threads, this node " + std::to_string(options_.xchg_threads)),
                  true);
  }
  Challenge ch;
  ch.node_name = options_.node_name;
  ch.listen_address = listen_address();
  ch.nonce = RandomNonce();
  ch.mac = AcceptorMac(options_.cluster_secret, hello.lane, hello.nonce, ch.nonce);
  s = WriteHandshakeFrame(fd, EncodeChallenge(ch), deadline);
  if (!s.ok()) return refuse(s, false);
  auto resp_bytes = ReadHandshakeFrame(fd, deadline);
  if (!resp_bytes.ok()) return refuse(resp_bytes.status(), false);
  Response resp;
  s = DecodeResponse(resp_bytes.value(), &resp);
  if (!s.ok()) return refuse(s, true);
  if (!MacEquals(resp.mac, InitiatorMac(options_.cluster_secret, hello.lane, ch.nonce, hello.nonce))) {
    counters_.auth_failures.fetch_add(1, std::memory_order_relaxed);
    return refuse(Status::PermissionDenied("node '" + hello.node_name + "' (" +
                                           hello.listen_address +
                                           ") does not know the cluster secret"),
                  true);
  }
  s = WriteHandshakeFrame(fd, EncodeVerdict(Status::OK()), deadline);
  if (!s.ok()) return refuse(s, false);

  LaneSet complete;
  PeerId id = kInvalidPeer;
  {
    MutexLock lock(&peers_mu_);
    auto key = std::make_pair(hello.node_name, hello.incarnation);
    auto& entry = assembling_[key];
    // A dialer sends its lanes in order, each after the previous one's verdict, and this
    // thread files a lane before it accepts the next: lane 0 opens a new set. Lanes an
    // earlier try of this incarnation left (failed, or raced by another dial) are dropped:
    // one of them completing this set would be a socket its dialer gave up on, whose EOF
    // downs the peer at once, and each redial would leave its own lane behind the same way.
    if (hello.lane == 0 && !entry.second.fds.empty()) {
      for (int f : entry.second.fds) {
        if (f >= 0) ::close(f);
      }
      entry.second.fds.clear();
    }
    if (entry.second.fds.empty()) {
      entry.first = MonoNow();
      entry.second.name = hello.node_name;
      entry.second.listen_address = hello.listen_address;
      entry.second.incarnation = hello.incarnation;
      entry.second.fds.assign(options_.xchg_threads, -1);
    }
    int& slot = entry.second.fds[hello.lane];
    if (slot >= 0) ::close(slot);
    slot = fd;
    for (int f : entry.second.fds) {
      if (f < 0) return;  // wait for the other lanes
    }
    complete = std::move(entry.second);
    assembling_.erase(key);
    for (auto& [pid, p] : peers_) {
      if (p.name == complete.name) {
        id = pid;
        break;
      }
    }
    if (id == kInvalidPeer) {
      id = next_peer_id_++;
      peers_[id].id = id;
    }
  }
  InstallLanes(id, std::move(complete));
}

void TcpTransport::ScheduleReconnect(Peer* p) {
  if (p->backoff_ms <= 0) p->backoff_ms = options_.reconnect_initial_backoff_ms;
  reconnect_queue_.emplace(MonoNow() + std::chrono::milliseconds(p->backoff_ms), p->id);
  peers_cv_.NotifyAll();
}

void TcpTransport::ReconnectLoop() {
  MutexLock lock(&peers_mu_);
  while (!shutting_down_) {
    if (reconnect_queue_.empty()) {
      peers_cv_.Wait(&lock);
      continue;
    }
    auto first = reconnect_queue_.begin();
    if (first->first > MonoNow()) {
      peers_cv_.WaitUntil(&lock, first->first);
      continue;
    }
    PeerId id = first->second;
    reconnect_queue_.erase(first);
    auto it = peers_.find(id);
    if (it == peers_.end() || !it->second.reconnect || it->second.state != PeerState::kDown) {
      continue;
    }
    const std::string address = it->second.connect_address;
    const std::string name = it->second.name;
    lock.Unlock();
    auto set = DialLanes(address);
    if (set.ok()) {
      LOG(INFO) << "reconnected to " << name << " at " << address;
      InstallLanes(id, std::move(set.value()));
      lock.Lock();
      continue;
    }
    lock.Lock();
    it = peers_.find(id);
    if (it == peers_.end() || !it->second.reconnect || it->second.state != PeerState::kDown) {
      continue;
    }
    Peer& p = it->second;
    p.backoff_ms = std::min(options_.reconnect_max_backoff_ms, std::max(1, p.backoff_ms * 2));
    LOG_EVERY_N(INFO, 10) << "reconnect to " << name << " at " << address
                          << " failed: " << set.status().ToString() << "; retrying in "
                          << p.backoff_ms << " ms";
    ScheduleReconnect(&p);
  }
}

void TcpTransport::Disconnect(PeerId peer) {
  MutexLock lock(&peers_mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  Peer& p = it->second;
  p.reconnect = false;
  if (p.state != PeerState::kUp) {
    p.state = PeerState::kClosed;
    return;
  }
  p.state = PeerState::kClosed;
  p.down_reason = Status::Aborted("disconnected by this node");
  const uint64_t gen = p.generation;
  const Status why = p.down_reason;
  for (int k = 0; k < options_.xchg_threads; ++k) {
    PostTask(k, [this, peer, gen, why](XchgThread& x) { CloseLane(&x, peer, gen, why); });
  }
}

bool TcpTransport::IsUp(PeerId peer) const {
  MutexLock lock(&peers_mu_);
  auto it = peers_.find(peer);
  return it != peers_.end() && it->second.state == PeerState::kUp;
}

Result<PeerInfo> TcpTransport::GetPeerInfo(PeerId peer) const {
  MutexLock lock(&peers_mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::NotFound("unknown peer " + std::to_string(peer));
  return PeerInfo{peer, it->second.name, it->second.listen_address};
}

// ---------------------------------------------------------------------------------------
// Memory and operations

Result<MemoryRegion> TcpTransport::RegisterMemory(void* base, uint64_t length, uint32_t access) {
  return regions_.Register(base, length, access);
}

Status TcpTransport::DeregisterMemory(const MemoryRegion& region) {
  return regions_.Deregister(region);
}

Status TcpTransport::PreparePost(PeerId peer, int* lane, uint64_t* gen) {
  if (shutting_down_ || !started_) return Status::Unavailable("transport is not running");
  if (*lane < 0) *lane = LaneForCurrentThread(options_.xchg_threads);
  if (*lane >= options_.xchg_threads) {
    return Status::InvalidArgument("lane " + std::to_string(*lane) + " out of range");
  }
  MutexLock lock(&peers_mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Status::InvalidArgument("unknown peer " + std::to_string(peer));
  if (it->second.state != PeerState::kUp) {
    return Status::Unavailable("peer " + it->second.name + " is down: " +
                               it->second.down_reason.ToString());
  }
  *gen = it->second.generation;
  return Status::OK();
}

Status TcpTransport::CheckLocal(const MemoryRegion& local, uint64_t offset, uint64_t length) const {
  if (local.base == nullptr || offset > local.length || length > local.length - offset) {
    return Status::InvalidArgument("local buffer [" + std::to_string(offset) + ", +" +
                                   std::to_string(length) + ") outside its region of " +
                                   std::to_string(local.length) + " bytes");
  }
  if (length > options_.max_transfer_bytes) {
    return Status::InvalidArgument("transfer of " + std::to_string(length) +
                                   " bytes exceeds max_transfer_bytes");
  }
  return Status::OK();
}

Status TcpTransport::Send(PeerId peer, std::string_view msg, Completion done, int lane) {
  if (msg.size() > options_.max_message_bytes) {
    return Status::InvalidArgument("message of " + std::to_string(msg.size()) +
                                   " bytes exceeds max_message_bytes " +
                                   std::to_string(options_.max_message_bytes));
  }
  uint64_t gen;
  NOVA_RETURN_NOT_OK(PreparePost(peer, &lane, &gen));
  counters_.sends.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_sent.fetch_add(msg.size(), std::memory_order_relaxed);
  PostTask(lane, [this, peer, gen, m = std::string(msg), done = std::move(done)](
                     XchgThread& x) mutable {
    auto it = x.lanes.find(peer);
    if (it == x.lanes.end() || it->second.lane->generation() != gen) {
      counters_.failed_ops.fetch_add(1, std::memory_order_relaxed);
      return done(LaneGoneStatus());
    }
    it->second.lane->PostSend(std::move(m), std::move(done));
    x.dirty.push_back(peer);
  });
  return Status::OK();
}

Status TcpTransport::Write(PeerId peer, const MemoryRegion& local, uint64_t local_offset,
                           uint64_t length, RemoteAddr remote, std::optional<uint32_t> imm,
                           Completion done, int lane) {
  NOVA_RETURN_NOT_OK(CheckLocal(local, local_offset, length));
  uint64_t gen;
  NOVA_RETURN_NOT_OK(PreparePost(peer, &lane, &gen));
  counters_.writes.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_written.fetch_add(length, std::memory_order_relaxed);
  const char* src = local.base + local_offset;
  PostTask(lane, [this, peer, gen, src, length, remote, imm, done = std::move(done)](
                     XchgThread& x) mutable {
    auto it = x.lanes.find(peer);
    if (it == x.lanes.end() || it->second.lane->generation() != gen) {
      counters_.failed_ops.fetch_add(1, std::memory_order_relaxed);
      return done(LaneGoneStatus());
    }
    it->second.lane->PostWrite(src, length, remote, imm, std::move(done));
    x.dirty.push_back(peer);
  });
  return Status::OK();
}

Status TcpTransport::Read(PeerId peer, RemoteAddr remote, uint64_t length, const MemoryRegion& local,
                          uint64_t local_offset, Completion done, int lane) {
  NOVA_RETURN_NOT_OK(CheckLocal(local, local_offset, length));
  uint64_t gen;
  NOVA_RETURN_NOT_OK(PreparePost(peer, &lane, &gen));
  counters_.reads.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes_read.fetch_add(length, std::memory_order_relaxed);
  char* dst = local.base + local_offset;
  PostTask(lane, [this, peer, gen, dst, length, remote, done = std::move(done)](
                     XchgThread& x) mutable {
    auto it = x.lanes.find(peer);
    if (it == x.lanes.end() || it->second.lane->generation() != gen) {
      counters_.failed_ops.fetch_add(1, std::memory_order_relaxed);
      return done(LaneGoneStatus());
    }
    it->second.lane->PostRead(remote, length, dst, std::move(done));
    x.dirty.push_back(peer);
  });
  return Status::OK();
}

TransportStats TcpTransport::GetStats() const {
  TransportStats s = counters_.Snapshot();
  MutexLock lock(&peers_mu_);
  for (auto& [id, p] : peers_) {
    if (p.state == PeerState::kUp) ++s.peers_up;
  }
  return s;
}

}  // namespace nova::transport
