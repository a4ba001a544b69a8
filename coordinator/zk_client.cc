#include "coordinator/zk_client.h"

#include <glog/logging.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <utility>

#include "common/secret_file.h"

namespace nova::coordinator {

// What the completion of one call delivered. Plain value.
struct ZkReply {
  int rc = ZOK;
  std::string data;
  ZkStat stat;
  std::vector<std::string> children;
};

// One asynchronous call. Shared between the caller, who may give up at its deadline, and
// the completion, which always runs eventually (ZCLOSING at the latest) on the C library's
// event thread, so neither side frees it under the other. mu is innermost: the completion
// takes nothing else.
struct ZkCall {
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;
  ZkReply reply GUARDED_BY(mu);
  // A multi's per-operation results and created path: the C library writes them on its
  // event thread just before the completion, so they live as long as the call (nobody
  // reads them: the completion's rc is the first failure).
  std::array<zoo_op_result_t, 2> multi_results{};
  std::array<char, 256> created_path{};
};

namespace {

using Holder = std::shared_ptr<ZkCall>;

// Longest a "still unreachable" report waits for the next one.
constexpr std::chrono::seconds kMaxReportInterval{60};
// Period at which the session thread re-checks state even without events.
constexpr std::chrono::milliseconds kSessionTick{500};

std::string SessionHex(int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(id));
  return buf;
}

ZkStat ToStat(const struct Stat* stat) {
  ZkStat out;
  if (stat != nullptr) {
    out.version = stat->version;
    out.ephemeral_owner = stat->ephemeralOwner;
  }
  return out;
}

// Completes a call (on the event thread): takes ownership of the holder the issuer
// allocated.
template <typename Fill>
void Complete(const void* data, int rc, Fill fill) {
  Holder* holder = static_cast<Holder*>(const_cast<void*>(data));
  ZkCall* call = holder->get();
  {
    MutexLock l(&call->mu);
    call->reply.rc = rc;
    if (rc == ZOK) fill(&call->reply);
    call->done = true;
  }
  call->cv.NotifyAll();
  delete holder;
}

void StringDone(int rc, const char* value, const void* data) {
  Complete(data, rc, [&](ZkReply* c) { c->data = value != nullptr ? value : ""; });
}

void DataDone(int rc, const char* value, int len, const struct Stat* stat, const void* data) {
  Complete(data, rc, [&](ZkReply* c) {
    c->data = (value != nullptr && len > 0) ? std::string(value, static_cast<size_t>(len)) : "";
    c->stat = ToStat(stat);
  });
}

void StatDone(int rc, const struct Stat* stat, const void* data) {
  Complete(data, rc, [&](ZkReply* c) { c->stat = ToStat(stat); });
}

void VoidDone(int rc, const void* data) {
  Complete(data, rc, [](ZkReply*) {});
}

void StringsDone(int rc, const struct String_vector* strings, const void* data) {
  Complete(data, rc, [&](ZkReply* c) {
    if (strings == nullptr) return;
    for (int i = 0; i < strings->count; i++) c->children.emplace_back(strings->data[i]);
    std::sort(c->children.begin(), c->children.end());
  });
}

Status FromZk(int rc, const std::string& what) {
  if (rc == ZOK) return Status::OK();
  const std::string msg = what + ": " + zerror(rc);
  switch (rc) {
    case ZNONODE:
      return Status::NotFound(msg);
    case ZNODEEXISTS:
      return Status::AlreadyExists(msg);
    case ZBADVERSION:
      return Status::Aborted(msg);
    case ZNOTEMPTY:
      return Status::IllegalState(msg);
    case ZNOAUTH:
    case ZAUTHFAILED:
      return Status::PermissionDenied(
          "ZooKeeper refused: " + msg +
          " (the node's ACL requires the cluster's ZooKeeper credential: set --zk_auth_file "
          "to the same user:password file as the process that created it)");
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZINVALIDSTATE:
    case ZCLOSING:
      return Status::Unavailable(msg);
    default:
      return Status::IOError(msg);
  }
}

// The C library's own log lines (it reports every failed connect at ERROR) would flood
// stderr during an outage; ZkClient logs the outage itself, so they go to VLOG(1).
void ZkLog(const char* message) { VLOG(1) << "zookeeper: " << message; }

// The scheme and ids of ACL entries (the C struct wants non-const strings; ZooKeeper only
// reads them).
char kAuthScheme[] = "auth";  // the ids the creating session authenticated as
char kAuthIdsAll[] = "";
char kWorldScheme[] = "world";
char kAnyone[] = "anyone";
char kDigestScheme[] = "digest";

// The ACL of a new node (module comment of zk_client.h): ALL for the creator's credential
// and READ for everyone (plus CREATE on a shared parent). Lives as long as the call that
// serializes it (zoo_acreate and zoo_amulti copy it into their request at once).
struct ProtectedAcl {
  explicit ProtectedAcl(bool shared)
      : entries{{ZOO_PERM_ALL, {kAuthScheme, kAuthIdsAll}},
                {ZOO_PERM_READ | (shared ? ZOO_PERM_CREATE : 0), {kWorldScheme, kAnyone}}},
        vector{2, entries} {}
  ProtectedAcl(const ProtectedAcl&) = delete;
  ProtectedAcl& operator=(const ProtectedAcl&) = delete;
  struct ACL entries[2];
  struct ACL_vector vector;
};

// The ACL a node created at `path` gets: open without a credential, ProtectedAcl with one
// (CREATE for everyone where `path` is one of the shared parents). Same lifetime rule.
class NewNodeAcl {
 public:
  NewNodeAcl(const ZkClientOptions& options, const std::string& path)
      : open_(options.auth.empty()),
        protected_(std::find(options.shared_parents.begin(), options.shared_parents.end(),
                             path) != options.shared_parents.end()) {}
  const struct ACL_vector* get() const { return open_ ? &ZOO_OPEN_ACL_UNSAFE : &protected_.vector; }

 private:
  const bool open_;
  const ProtectedAcl protected_;
};

void AuthDone(int rc, const void* data) {
  // Digest authentication only fails for a malformed credential (checked by Start()); the
  // session is dropped then and OnSessionEvent reports it.
  LOG_IF(ERROR, rc != ZOK) << "ZooKeeper digest authentication (--zk_auth_file): " << zerror(rc);
}

int ToZkFlags(ZkCreateMode mode) {
  switch (mode) {
    case ZkCreateMode::kPersistent:
      return ZOO_PERSISTENT;
    case ZkCreateMode::kEphemeral:
      return ZOO_EPHEMERAL;
    case ZkCreateMode::kEphemeralSequential:
      return ZOO_EPHEMERAL_SEQUENTIAL;
  }
  return ZOO_PERSISTENT;
}

}  // namespace

Status ValidateZkDigestAuth(std::string_view auth) {
  const size_t colon = auth.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == auth.size()) {
    return Status::InvalidArgument(
        "a ZooKeeper digest credential is user:password (a non-empty user, then ':', then a "
        "non-empty password)");
  }
  for (size_t i = 0; i < colon; ++i) {
    if (std::isspace(static_cast<unsigned char>(auth[i]))) {
      return Status::InvalidArgument("the user of a ZooKeeper digest credential has a space");
    }
  }
  return Status::OK();
}

Result<std::string> ReadZkAuthFile(const std::string& path, std::string_view what) {
  auto auth = ReadSecretFile(path, what);
  if (!auth.ok()) return auth.status();
  NOVA_RETURN_NOT_OK_PREPEND(ValidateZkDigestAuth(auth.value()),
                             std::string(what) + " " + path);
  return auth;
}

ZkClient::ZkClient(ZkClientOptions options) : options_(std::move(options)) {}

ZkClient::~ZkClient() { Shutdown(); }

void ZkClient::AddSessionListener(SessionFn fn) { session_listeners_.push_back(std::move(fn)); }

Status ZkClient::Start() {
  if (options_.servers.empty()) return Status::InvalidArgument("ZooKeeper servers not set");
  if (options_.session_timeout.count() <= 0 || options_.op_timeout.count() <= 0 ||
      options_.min_backoff.count() <= 0 || options_.max_backoff < options_.min_backoff) {
    return Status::InvalidArgument("ZooKeeper client timeouts must be positive");
  }
  if (!options_.auth.empty()) {
    NOVA_RETURN_NOT_OK_PREPEND(ValidateZkDigestAuth(options_.auth), "--zk_auth_file");
  }
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  {
    WriterMutexLock hl(&handle_mu_);
    NOVA_RETURN_NOT_OK(NewHandleLocked());
  }
  LOG(INFO) << "connecting to ZooKeeper at " << options_.servers;
  session_thread_ = std::thread([this] { SessionThread(); });
  return Status::OK();
}

Status ZkClient::NewHandleLocked() {
  {
    // Before init: the new handle's first event may arrive before init returns.
    MutexLock l(&mu_);
    state_ = ZOO_CONNECTING_STATE;
  }
  zhandle_t* zh = zookeeper_init2(options_.servers.c_str(), &ZkClient::GlobalWatcher,
                                  static_cast<int>(options_.session_timeout.count()),
                                  /*clientid=*/nullptr, /*context=*/this, /*flags=*/0, &ZkLog);
  if (zh == nullptr) {
    return Status::FromErrno("zookeeper_init(" + options_.servers + ")", errno);
  }
  if (!options_.auth.empty()) {
    // Kept by the handle and sent ahead of any request on every (re)connection, so no call
    // of ours (each waits for the connection) goes out unauthenticated.
    const int rc = zoo_add_auth(zh, kDigestScheme, options_.auth.data(),
                                static_cast<int>(options_.auth.size()), &AuthDone, nullptr);
    if (rc != ZOK) {
      closing_handle_.store(zh);  // its events are not ours to report
      zookeeper_close(zh);
      closing_handle_.store(nullptr);
      return FromZk(rc, "adding the ZooKeeper digest credential (--zk_auth_file)");
    }
  }
  handle_ = zh;
  return Status::OK();
}

void ZkClient::Shutdown() {
  {
    MutexLock l(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  state_cv_.NotifyAll();
  if (session_thread_.joinable()) session_thread_.join();
  WriterMutexLock hl(&handle_mu_);  // the event thread never takes it (file comment, 1)
  if (handle_ != nullptr) {
    closing_handle_.store(handle_);
    zookeeper_close(handle_);  // joins the handle's threads: no event of it follows
    closing_handle_.store(nullptr);
    handle_ = nullptr;
  }
}

bool ZkClient::connected() const {
  MutexLock l(&mu_);
  return state_ == ZOO_CONNECTED_STATE;
}

bool ZkClient::WaitConnected(std::chrono::milliseconds timeout) {
  return AwaitConnection(Clock::now() + timeout, "connect").ok();
}

int64_t ZkClient::session_id() const {
  MutexLock l(&mu_);
  return session_id_;
}

uint64_t ZkClient::AddWatch(WatchFn fn) {
  MutexLock l(&mu_);
  const uint64_t token = next_watch_++;
  watches_[token] = std::move(fn);
  return token;
}

void ZkClient::RemoveWatch(uint64_t token) {
  MutexLock d(&dispatch_mu_);
  MutexLock l(&mu_);
  watches_.erase(token);
}

void ZkClient::GlobalWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  auto* self = static_cast<ZkClient*>(ctx);
  if (self->closing_handle_.load() == zh) return;  // a handle being replaced or closed
  if (type == ZOO_SESSION_EVENT) {
    const clientid_t* id = zoo_client_id(zh);
    {
      MutexLock l(&self->mu_);
      if (state == ZOO_CONNECTED_STATE && id != nullptr) self->session_id_ = id->client_id;
      if (state == ZOO_CONNECTED_STATE) self->negotiated_timeout_ms_ = zoo_recv_timeout(zh);
    }
    self->OnSessionEvent(state);
  }
}

void ZkClient::OnSessionEvent(int state) {
  std::string msg;
  {
    MutexLock l(&mu_);
    const bool was_connected = state_ == ZOO_CONNECTED_STATE;
    state_ = state;
    if (state == ZOO_CONNECTED_STATE) {
      LOG(INFO) << "connected to ZooKeeper at " << options_.servers << " (session "
                << SessionHex(session_id_) << ", timeout " << negotiated_timeout_ms_ << " ms)";
      // The server bounds session timeouts by its minSessionTimeout / maxSessionTimeout
      // (by default 2 and 20 tickTimes): failure detection follows the negotiated one.
      LOG_IF(WARNING, negotiated_timeout_ms_ > 0 &&
                          negotiated_timeout_ms_ != options_.session_timeout.count())
          << "ZooKeeper gave this session a " << negotiated_timeout_ms_
          << " ms timeout instead of the " << options_.session_timeout.count()
          << " ms asked for (--zk_session_timeout_ms); the server's min/maxSessionTimeout "
             "(tickTime) bound it";
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
      expired_ = true;
      LOG(WARNING) << "ZooKeeper session " << SessionHex(session_id_)
                   << " expired: its ephemeral nodes and watches are gone; creating a new "
                      "session and registering again";
    } else if (state == ZOO_AUTH_FAILED_STATE) {
      LOG(ERROR) << "ZooKeeper authentication failed (--zk_auth_file); creating a new session";
      expired_ = true;
    } else if (was_connected) {
      LOG(WARNING) << "lost the connection to ZooKeeper at " << options_.servers
                   << "; reconnecting (serving continues from the last known configuration)";
    }
    if (was_connected && state != ZOO_CONNECTED_STATE) {
      disconnected_since_ = Clock::now();
      next_report_ = std::chrono::seconds(1);
    }
  }
  state_cv_.NotifyAll();
  // Subscribers re-read after any session change: a reconnect may hide missed changes.
  NotifyAllWatches();
}

void ZkClient::NotifyAllWatches() {
  std::vector<uint64_t> tokens;
  {
    MutexLock l(&mu_);
    for (const auto& [token, fn] : watches_) tokens.push_back(token);
  }
  for (uint64_t t : tokens) DispatchWatch(t);
}

void ZkClient::WatchTrampoline(zhandle_t* zh, int type, int state, const char* path, void* ctx) {
  auto* self = static_cast<ZkClient*>(const_cast<void*>(zoo_get_context(zh)));
  if (self == nullptr || type == ZOO_SESSION_EVENT) return;  // GlobalWatcher covers those
  self->DispatchWatch(reinterpret_cast<uintptr_t>(ctx));
}

void ZkClient::DispatchWatch(uint64_t token) {
  MutexLock d(&dispatch_mu_);
  WatchFn fn;
  {
    MutexLock l(&mu_);
    auto it = watches_.find(token);
    if (it == watches_.end()) return;
    fn = it->second;
  }
  fn();
}

void ZkClient::SessionThread() {
  std::chrono::milliseconds backoff = options_.min_backoff;
  MutexLock l(&mu_);
  while (!shutdown_) {
    if (expired_) {
      l.Unlock();
      Status s;
      {
        WriterMutexLock hl(&handle_mu_);  // across zookeeper_close (file comment, 1 and 2)
        if (handle_ != nullptr) {
          closing_handle_.store(handle_);
          zookeeper_close(handle_);  // joins the handle's threads: no event of it follows
          // A new handle may get the freed address.
          closing_handle_.store(nullptr);
          handle_ = nullptr;
        }
        s = NewHandleLocked();
      }
      l.Lock();
      if (s.ok()) {
        expired_ = false;
        backoff = options_.min_backoff;
        disconnected_since_ = Clock::now();
        next_report_ = std::chrono::seconds(1);
      } else {
        LOG(WARNING) << "cannot create a ZooKeeper session: " << s.ToString() << "; retrying in "
                     << backoff.count() << " ms";
        state_cv_.WaitUntil(&l, Clock::now() + backoff,
                            [this]() REQUIRES(mu_) { return shutdown_; });
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
      continue;
    }
    if (state_ == ZOO_CONNECTED_STATE && session_id_ != announced_session_) {
      const int64_t sid = session_id_;
      announced_session_ = sid;
      l.Unlock();
      for (const SessionFn& fn : session_listeners_) fn(sid);
      l.Lock();
      continue;
    }
    if (state_ != ZOO_CONNECTED_STATE) {
      const auto down = Clock::now() - disconnected_since_;
      if (down >= next_report_) {
        LOG(WARNING) << "ZooKeeper at " << options_.servers << " still unreachable after "
                     << std::chrono::duration_cast<std::chrono::seconds>(down).count()
                     << " s; the client keeps retrying (serving continues from the last "
                        "known configuration)";
        next_report_ = std::min(next_report_ * 2, kMaxReportInterval);
      }
    }
    state_cv_.WaitFor(&l, kSessionTick);
  }
}

Status ZkClient::AwaitConnection(Clock::time_point deadline, const std::string& what) {
  MutexLock l(&mu_);
  state_cv_.WaitUntil(
      &l, deadline, [this]() REQUIRES(mu_) { return shutdown_ || state_ == ZOO_CONNECTED_STATE; });
  if (shutdown_) return Status::Unavailable(what + ": ZooKeeper client is shutting down");
  if (state_ != ZOO_CONNECTED_STATE) {
    return Status::Unavailable(what + ": no connection to ZooKeeper at " + options_.servers +
                               " within " + std::to_string(options_.op_timeout.count()) + " ms");
  }
  return Status::OK();
}

Status ZkClient::Run(const std::string& what, const std::function<int(zhandle_t*, void*)>& issue,
                     ZkReply* reply) {
  const Clock::time_point deadline = Clock::now() + options_.op_timeout;
  NOVA_RETURN_NOT_OK(AwaitConnection(deadline, what));
  auto call = std::make_shared<ZkCall>();
  {
    ReaderMutexLock hl(&handle_mu_);
    if (handle_ == nullptr) return Status::Unavailable(what + ": ZooKeeper client is closed");
    auto* holder = new Holder(call);
    const int rc = issue(handle_, holder);
    if (rc != ZOK) {  // the completion will not run
      delete holder;
      return FromZk(rc, what);
    }
  }
  MutexLock l(&call->mu);
  if (!call->cv.WaitUntil(&l, deadline, [&]() REQUIRES(call->mu) { return call->done; })) {
    return Status::TimedOut(what + ": no answer from ZooKeeper within " +
                            std::to_string(options_.op_timeout.count()) + " ms");
  }
  *reply = std::move(call->reply);
  return FromZk(reply->rc, what);
}

Status ZkClient::Create(const std::string& path, const std::string& data, ZkCreateMode mode,
                        std::string* created) {
  ZkReply reply;
  const NewNodeAcl new_node_acl(options_, path);
  const struct ACL_vector* acl = new_node_acl.get();
  Status s = Run(
      "create " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl,
                           ToZkFlags(mode), &StringDone, d);
      },
      &reply);
  if (s.ok() && created != nullptr) *created = reply.data;
  return s;
}

Status ZkClient::EnsurePath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("ZooKeeper path '" + path + "' must start with '/'");
  }
  for (size_t pos = 1; pos <= path.size(); pos++) {
    if (pos != path.size() && path[pos] != '/') continue;
    Status s = Create(path.substr(0, pos), "", ZkCreateMode::kPersistent);
    if (!s.ok() && s.code() != Status::Code::kAlreadyExists) return s;
  }
  return Status::OK();
}

Status ZkClient::Get(const std::string& path, std::string* data, ZkStat* stat, uint64_t watch) {
  ZkReply reply;
  Status s = Run(
      "get " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_awget(zh, path.c_str(), watch == kNoWatch ? nullptr : &ZkClient::WatchTrampoline,
                         reinterpret_cast<void*>(static_cast<uintptr_t>(watch)), &DataDone, d);
      },
      &reply);
  if (!s.ok()) return s;
  if (data != nullptr) *data = std::move(reply.data);
  if (stat != nullptr) *stat = reply.stat;
  return s;
}

Status ZkClient::Set(const std::string& path, const std::string& data, int32_t expected_version,
                     ZkStat* stat) {
  ZkReply reply;
  Status s = Run(
      "set " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_aset(zh, path.c_str(), data.data(), static_cast<int>(data.size()),
                        expected_version, &StatDone, d);
      },
      &reply);
  if (s.ok() && stat != nullptr) *stat = reply.stat;
  return s;
}

Status ZkClient::Delete(const std::string& path, int32_t expected_version) {
  ZkReply reply;
  return Run(
      "delete " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_adelete(zh, path.c_str(), expected_version, &VoidDone, d);
      },
      &reply);
}

Status ZkClient::Replace(const std::string& path, int32_t expected_version,
                         const std::string& data, ZkCreateMode mode) {
  ZkReply reply;
  const NewNodeAcl new_node_acl(options_, path);
  const struct ACL_vector* acl = new_node_acl.get();
  return Run(
      "replace " + path,
      [&](zhandle_t* zh, void* d) {
        ZkCall* call = static_cast<Holder*>(d)->get();
        // The operations are serialized by zoo_amulti itself; only the results and the
        // created path's buffer are written later.
        std::array<zoo_op_t, 2> ops;
        zoo_delete_op_init(&ops[0], path.c_str(), expected_version);
        zoo_create_op_init(&ops[1], path.c_str(), data.data(), static_cast<int>(data.size()),
                           acl, ToZkFlags(mode), call->created_path.data(),
                           static_cast<int>(call->created_path.size()));
        const int rc = zoo_amulti(zh, static_cast<int>(ops.size()), ops.data(),
                                  call->multi_results.data(), &VoidDone, d);
        // zoo_amulti reports every failure to issue (a handle no longer connected, as
        // ZINVALIDSTATE from the other calls) as a marshalling error; the paths and data
        // are ours and valid, so it is that: unavailable for now.
        return rc == ZMARSHALLINGERROR ? ZINVALIDSTATE : rc;
      },
      &reply);
}

Status ZkClient::Exists(const std::string& path, ZkStat* stat, uint64_t watch) {
  ZkReply reply;
  Status s = Run(
      "exists " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_awexists(zh, path.c_str(),
                            watch == kNoWatch ? nullptr : &ZkClient::WatchTrampoline,
                            reinterpret_cast<void*>(static_cast<uintptr_t>(watch)), &StatDone, d);
      },
      &reply);
  if (s.ok() && stat != nullptr) *stat = reply.stat;
  return s;
}

Status ZkClient::GetChildren(const std::string& path, std::vector<std::string>* children,
                             uint64_t watch) {
  ZkReply reply;
  Status s = Run(
      "list " + path,
      [&](zhandle_t* zh, void* d) {
        return zoo_awget_children(
            zh, path.c_str(), watch == kNoWatch ? nullptr : &ZkClient::WatchTrampoline,
            reinterpret_cast<void*>(static_cast<uintptr_t>(watch)), &StringsDone, d);
      },
      &reply);
  if (s.ok()) *children = std::move(reply.children);
  return s;
}

Status ZkClient::ExpireSessionForTesting() {
  NOVA_RETURN_NOT_OK(AwaitConnection(Clock::now() + options_.op_timeout, "expire session"));
  clientid_t id;
  {
    ReaderMutexLock hl(&handle_mu_);
    if (handle_ == nullptr) return Status::Unavailable("expire session: client is closed");
    id = *zoo_client_id(handle_);
  }
  watcher_fn ignore = [](zhandle_t*, int, int, const char*, void*) {};
  zhandle_t* twin =
      zookeeper_init2(options_.servers.c_str(), ignore,
                      static_cast<int>(options_.session_timeout.count()), &id, nullptr, 0, &ZkLog);
  if (twin == nullptr) return Status::FromErrno("expire session: zookeeper_init", errno);
  // The twin has no watcher to signal its connection; poll its state (test-only code).
  const Clock::time_point deadline = Clock::now() + options_.op_timeout;
  constexpr std::chrono::milliseconds kPoll{10};
  while (zoo_state(twin) != ZOO_CONNECTED_STATE && Clock::now() < deadline) {
    std::this_thread::sleep_for(kPoll);
  }
  const bool ok = zoo_state(twin) == ZOO_CONNECTED_STATE;
  zookeeper_close(twin);  // closing the twin closes the shared session on the server
  return ok ? Status::OK() : Status::TimedOut("expire session: twin handle did not connect");
}

}  // namespace nova::coordinator
