// ZkClient: a small C++ wrapper over the ZooKeeper C client (libzookeeper_mt) with the
// session handling every Nova component needs.
//
//  - Every call has a deadline (ZkClientOptions::op_timeout), covering both the wait for a
//    connection and the server's answer; a call never blocks forever.
//  - Connection loss: the C library reconnects by itself (cycling through the servers);
//    ZkClient logs the loss, then "still unreachable" lines at doubling intervals, and the
//    reconnection. Calls made meanwhile fail with Unavailable after their deadline.
//  - Session expiry: ZkClient closes the dead handle and creates a new session (with
//    backoff when even that fails), then calls the session listeners so that their owners
//    re-create ephemeral nodes and re-arm watches (ZooKeeper drops both with the session).
//
// Access control (docs/security.md). Without `auth` nodes are created open to all
// (ZOO_OPEN_ACL_UNSAFE), as always. With a digest credential "user:password", every session
// adds it (zoo_add_auth "digest", re-sent by the C library on reconnection) and creates its
// nodes with ALL for the sessions holding the same credential and READ for everyone else
// (nodes listed in `shared_parents` also let everyone CREATE children), so that a reader
// needs no credential and a writer without it gets PermissionDenied naming --zk_auth_file.
// Nodes created before the credential was set keep their open ACL.
//
// Watches are one-shot, as in ZooKeeper: a call given a watch token arms one notification;
// the subscriber re-reads (and so re-arms) when notified. Subscribers are also notified on
// session events, so a missed change is never silent.
//
// Thread safety: all methods are thread-safe. Watch callbacks run on the C library's event
// thread and must only record the event (no ZkClient calls, no blocking). Session listeners
// run on ZkClient's own session thread and may call ZkClient.
//
// Locks, and the C library's threads. libzookeeper_mt runs every watcher and completion on
// its own event (completion) thread, and zookeeper_close() joins that thread after running
// what is still pending (completions end with ZCLOSING). Hence:
//  1. The event thread never takes handle_mu_: the session thread and Shutdown() hold
//     handle_mu_ across zookeeper_close(), which waits for the event thread.
//  2. Nothing holds mu_ or dispatch_mu_ across a call into the C library, for the same reason.
//  3. A watch callback runs under dispatch_mu_ (so RemoveWatch can wait for it), never under
//     mu_; the locks a callback takes (e.g. ConfigStore::mu_, Coordinator::mu_) therefore
//     come after dispatch_mu_, and their owners must not call RemoveWatch while holding them.
//  4. A completion takes only its call's own mutex (ZkCall::mu, innermost).
// Lock order: handle_mu_ before mu_; dispatch_mu_ before mu_; handle_mu_ and dispatch_mu_
// are never held together.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

typedef struct _zhandle zhandle_t;  // NOLINT: from <zookeeper/zookeeper.h>

namespace nova::coordinator {

struct ZkCall;   // one asynchronous call in flight (zk_client.cc)
struct ZkReply;  // what a call's completion delivered (zk_client.cc)

struct ZkClientOptions {
  // "host:port[,host:port...]", as zookeeper_init takes it. Required.
  std::string servers;
  // Session timeout asked of the server: how long after losing us it drops our ephemeral
  // nodes. The server clamps it to [2, 20] ticks.
  std::chrono::milliseconds session_timeout{10000};
  // Deadline of one call, including the wait for a connection.
  std::chrono::milliseconds op_timeout{5000};
  // Backoff between attempts to create a session handle after expiry.
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  // ZooKeeper digest credential "user:password" (--zk_auth_file); empty: none, nodes open.
  std::string auth;
  // With `auth`: nodes several credentials create children in (e.g. "/nova", shared by the
  // clusters of one ensemble), created with CREATE for everyone as well.
  std::vector<std::string> shared_parents;
};

// OK if `auth` is a digest credential "user:password" (a non-empty user without ':' or
// whitespace, then a non-empty password); else InvalidArgument saying so (never echoing
// the password).
Status ValidateZkDigestAuth(std::string_view auth);
// Reads a --zk_auth_file (common/secret_file.h: mode 0600, a WARNING otherwise) and checks
// what it holds with ValidateZkDigestAuth; the errors name `what` (the flag) and the path.
Result<std::string> ReadZkAuthFile(const std::string& path, std::string_view what);

// Node metadata returned by reads.
struct ZkStat {
  int32_t version = -1;         // data version, for compare-and-set
  int64_t ephemeral_owner = 0;  // session id owning an ephemeral node, 0 if persistent
};

enum class ZkCreateMode { kPersistent, kEphemeral, kEphemeralSequential };

class ZkClient {
 public:
  // Runs on the C library's event thread: record and return.
  using WatchFn = std::function<void()>;
  // Runs on the session thread after each new session is established (the first one
  // included), with its id.
  using SessionFn = std::function<void(int64_t session_id)>;
  // A watch token of 0 means "no watch".
  static constexpr uint64_t kNoWatch = 0;
  // A version of -1 means "any version" (ZooKeeper's convention).
  static constexpr int32_t kAnyVersion = -1;

  explicit ZkClient(ZkClientOptions options);
  ~ZkClient();  // Shutdown()
  ZkClient(const ZkClient&) = delete;
  ZkClient& operator=(const ZkClient&) = delete;

  // REQUIRES: before Start(). `fn` must stay callable until Shutdown() returns.
  void AddSessionListener(SessionFn fn);

  // Creates the session handle and the session thread. Returns OK without waiting for the
  // server (an unreachable ZooKeeper is retried in the background); InvalidArgument for
  // empty servers or non-positive timeouts; IOError if the C library rejects the server
  // list. REQUIRES: called once.
  Status Start() EXCLUDES(handle_mu_, mu_);
  // Closes the session (its ephemeral nodes go at once) and joins the session thread.
  // Calls in flight end with Unavailable. Idempotent.
  void Shutdown() EXCLUDES(handle_mu_, mu_, dispatch_mu_);

  // True while the session is connected to a server.
  bool connected() const EXCLUDES(mu_);
  // Waits up to `timeout` for a connection; returns connected().
  bool WaitConnected(std::chrono::milliseconds timeout) EXCLUDES(mu_);
  // Id of the current session, 0 before the first connection.
  int64_t session_id() const EXCLUDES(mu_);

  // Registers `fn` as a watch subscriber; the token is passed to reads to arm a watch.
  // Subscribers are notified of every event of a watch they armed and of session events.
  uint64_t AddWatch(WatchFn fn) EXCLUDES(mu_);
  // After this returns, `fn` of `token` is not running and will not be called again.
  // REQUIRES: not called from a watch callback, nor holding a lock a watch callback takes.
  void RemoveWatch(uint64_t token) EXCLUDES(dispatch_mu_, mu_);

  // All calls below return OK on success, NotFound (no such node / parent), AlreadyExists
  // (node exists), Aborted (version mismatch: someone else changed it), Unavailable (no
  // connection or session within the deadline, or shutting down), TimedOut (no answer in
  // time), PermissionDenied (the node's ACL refuses this session: "ZooKeeper refused ...
  // set --zk_auth_file"), or IOError for other ZooKeeper errors; messages name the path.

  // Creates `path` with `data`. *created (optional) receives the actual path (with the
  // sequence suffix for kEphemeralSequential).
  Status Create(const std::string& path, const std::string& data, ZkCreateMode mode,
                std::string* created = nullptr) EXCLUDES(handle_mu_, mu_);
  // Creates `path` and its missing ancestors as empty persistent nodes; OK if they exist.
  Status EnsurePath(const std::string& path) EXCLUDES(handle_mu_, mu_);
  // Reads a node's data (and stat). `watch`: a token from AddWatch() to notify on change
  // or deletion, or kNoWatch.
  Status Get(const std::string& path, std::string* data, ZkStat* stat, uint64_t watch = kNoWatch)
      EXCLUDES(handle_mu_, mu_);
  // Writes data if the node's version is `expected_version` (or any with kAnyVersion).
  // *stat (optional) receives the new stat.
  Status Set(const std::string& path, const std::string& data, int32_t expected_version,
             ZkStat* stat = nullptr) EXCLUDES(handle_mu_, mu_);
  Status Delete(const std::string& path, int32_t expected_version = kAnyVersion)
      EXCLUDES(handle_mu_, mu_);
  // Deletes the node at `path` (if its version is `expected_version`, or any with
  // kAnyVersion) and creates it anew with `data` and `mode`, in one ZooKeeper transaction:
  // no reader ever sees `path` absent. NotFound if there is no node to replace, Aborted on
  // a version mismatch; on either, nothing changed.
  Status Replace(const std::string& path, int32_t expected_version, const std::string& data,
                 ZkCreateMode mode) EXCLUDES(handle_mu_, mu_);
  // NotFound if absent; with a watch, notified on creation too.
  Status Exists(const std::string& path, ZkStat* stat, uint64_t watch = kNoWatch)
      EXCLUDES(handle_mu_, mu_);
  // Names (not paths) of the children, sorted.
  Status GetChildren(const std::string& path, std::vector<std::string>* children,
                     uint64_t watch = kNoWatch) EXCLUDES(handle_mu_, mu_);

  const ZkClientOptions& options() const { return options_; }

  // Tests only: makes the server expire the current session, as after a long partition
  // (opens a second handle on the same session and closes it, the usual ZooKeeper test
  // trick). Returns once the server has closed it; the client notices on its next contact.
  // Unavailable if there is no connected session.
  Status ExpireSessionForTesting() EXCLUDES(handle_mu_, mu_);

 private:
  using Clock = std::chrono::steady_clock;

  // The C library's callbacks: they run on its event thread (see "Locks" above) and take
  // mu_ and dispatch_mu_ of the ZkClient in their context, never handle_mu_.
  static void GlobalWatcher(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  static void WatchTrampoline(zhandle_t* zh, int type, int state, const char* path, void* ctx);

  // Creates a handle.
  Status NewHandleLocked() REQUIRES(handle_mu_) EXCLUDES(mu_);
  void SessionThread() EXCLUDES(handle_mu_, mu_, dispatch_mu_);
  // Event thread: records a session state change and notifies every watch subscriber.
  void OnSessionEvent(int state) EXCLUDES(mu_, dispatch_mu_);
  void NotifyAllWatches() EXCLUDES(mu_, dispatch_mu_);
  // Runs the subscriber of `token` (if still registered) under dispatch_mu_.
  void DispatchWatch(uint64_t token) EXCLUDES(mu_, dispatch_mu_);
  // Waits for a connection until `deadline`; Unavailable if none.
  Status AwaitConnection(Clock::time_point deadline, const std::string& what) EXCLUDES(mu_);
  // Issues `issue(zh, completion_data)` under handle_mu_ and waits until the deadline for
  // the completion (which owns `completion_data`). On success *reply receives what the
  // completion delivered.
  Status Run(const std::string& what, const std::function<int(zhandle_t*, void*)>& issue,
             ZkReply* reply) EXCLUDES(handle_mu_, mu_);

  // Constant after construction / Start().
  const ZkClientOptions options_;
  std::vector<SessionFn> session_listeners_;

  // Guards handle_ itself: held shared while issuing a call (an enqueue, microseconds; calls
  // from several threads are issued in parallel) and exclusively while replacing or
  // closing the handle. Taken before mu_ (NewHandleLocked).
  mutable SharedMutex handle_mu_ ACQUIRED_BEFORE(mu_);
  zhandle_t* handle_ GUARDED_BY(handle_mu_) = nullptr;
  // The handle being closed, readable by the event thread without handle_mu_ (which the
  // session thread holds while zookeeper_close() waits for that thread): its events are
  // ignored. (Comparing against the current handle instead would drop a new handle's first
  // event if it came before the handle was published.)
  std::atomic<zhandle_t*> closing_handle_{nullptr};

  mutable Mutex mu_;
  CondVar state_cv_;                      // state_, expired_ or shutdown_ changed
  int state_ GUARDED_BY(mu_) = 0;         // last ZOO_*_STATE seen by the global watcher
  bool expired_ GUARDED_BY(mu_) = false;  // the session expired; the session thread replaces it
  bool shutdown_ GUARDED_BY(mu_) = false;
  int64_t session_id_ GUARDED_BY(mu_) = 0;
  int negotiated_timeout_ms_ GUARDED_BY(mu_) = 0;  // the session timeout the server granted
  int64_t announced_session_ GUARDED_BY(mu_) = 0;  // last session the listeners were told about
  Clock::time_point disconnected_since_ GUARDED_BY(mu_) = Clock::now();
  std::chrono::seconds next_report_ GUARDED_BY(mu_){1};  // "still unreachable" log after this
  uint64_t next_watch_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, WatchFn> watches_ GUARDED_BY(mu_);

  // Held while a watch callback runs, so that RemoveWatch can wait for it; guards no data.
  // Taken before mu_ (RemoveWatch, DispatchWatch) and before every lock a callback takes.
  Mutex dispatch_mu_ ACQUIRED_BEFORE(mu_);

  std::thread session_thread_;
};

}  // namespace nova::coordinator
