// ConfigStore: the cluster's state in ZooKeeper, as every component, client and the
// coordinator see it (DESIGN.md section 8; layout in docs/coordinator.md):
//
//   /nova/<cluster>/config                       the ClusterConfig document (JSON)
//   /nova/<cluster>/members/{ltc,logc,stoc,coordinator}/<id>   ephemeral: MemberInfo JSON
//   /nova/<cluster>/coordinator/leader/n_<seq>   ephemeral sequential: election candidates
//   /nova/<cluster>/status/{ltc,logc,stoc,coordinator}/<id>    ephemeral: a component's
//                                                status document (JSON, e.g. LtcStatus)
//
// A component calls Register() once and WatchConfig(); ConfigStore keeps both true across
// connection loss and session expiry by itself, on a background thread that retries with
// backoff. While ZooKeeper is unreachable, GetLastConfig() keeps returning the last
// configuration seen, so the component keeps serving with it.
//
// Thread safety: all methods are thread-safe. Callbacks run on the store's background
// thread (or, once, inside WatchConfig()), never concurrently with each other, and must
// not call Shutdown() or WatchConfig() (both wait for callback_mu_, held around callbacks).
//
// Locks. Lock order: callback_mu_ (held around callbacks, which may Register), then
// sync_mu_ (never held while calling back), then mu_ (innermost; nothing is called under
// it). ZkClient's locks come after sync_mu_: SyncOnce() and Register() call ZooKeeper under
// it, never under mu_. The store's watches run on ZooKeeper's event thread under ZkClient's
// dispatch_mu_ (zk_client.h) and take only mu_, briefly; nothing here calls
// ZkClient::RemoveWatch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/zk_client.h"

namespace nova::coordinator {

struct ConfigStoreOptions {
  // ZooKeeper servers "host:port[,host:port]" (--zk). Required.
  std::string zk_servers;
  // Cluster name (--cluster): the node under /nova. Required; [A-Za-z0-9._-], <= 64 chars.
  std::string cluster;
  // See ZkClientOptions.
  std::chrono::milliseconds session_timeout{10000};
  std::chrono::milliseconds op_timeout{5000};
  // ZooKeeper digest credential "user:password" (--zk_auth_file, ZkClientOptions::auth):
  // nodes this store creates are writable by that credential only and readable by all;
  // /nova itself also lets everyone create children (each cluster under it may have its
  // own credential). Empty: no credential, nodes open to all (as before).
  std::string zk_auth;
  // Backoff of the background thread after a failed attempt (doubling up to the max).
  std::chrono::milliseconds retry_min{100};
  std::chrono::milliseconds retry_max{5000};
  // The background thread re-reads the configuration this often even without a watch
  // event: a safety net, not the delivery path.
  std::chrono::milliseconds poll_interval{10000};
};

// What a member publishes about itself: named addresses, e.g. "client" -> "host:port"
// (where clients or peers reach it) and "metrics" -> "host:port".
struct MemberInfo {
  std::map<std::string, std::string> addresses;

  // The address peers use: "client" if present, else the first one, else "".
  std::string MainAddress() const;
  std::string ToJson() const;
  // Corruption on malformed input; never throws.
  static Result<MemberInfo> FromJson(std::string_view json);
  bool operator==(const MemberInfo& o) const = default;
};

class ConfigStore {
 public:
  // Called with every configuration whose epoch is newer than any seen before.
  using ConfigCallback = std::function<void(const ClusterConfig&)>;
  // Called when the member set of any kind may have changed; re-list to see how.
  using MembersCallback = std::function<void()>;

  explicit ConfigStore(ConfigStoreOptions options);
  ~ConfigStore();  // Shutdown()
  ConfigStore(const ConfigStore&) = delete;
  ConfigStore& operator=(const ConfigStore&) = delete;

  // Validates the options, starts the ZooKeeper session and the background thread, and
  // starts watching the configuration. Does not wait for ZooKeeper: an unreachable one is
  // retried in the background (logged). Returns InvalidArgument for bad options.
  // REQUIRES: called once, before any other method but the path helpers.
  Status Init() EXCLUDES(mu_);
  // Stops the background thread and closes the session: registered members disappear at
  // once. Idempotent.
  void Shutdown() EXCLUDES(sync_mu_, callback_mu_, mu_);

  // Waits up to `timeout` for a ZooKeeper connection; returns whether there is one.
  bool WaitConnected(std::chrono::milliseconds timeout) EXCLUDES(mu_);
  bool connected() const EXCLUDES(mu_);

  // ---- Components ----

  // Publishes members/<kind>/<id> (ephemeral) with `info`, and keeps it published: the
  // store re-creates it after a session expiry. Returns OK once the node exists;
  // InvalidArgument for a bad id; otherwise the failure of the first attempt (Unavailable
  // while ZooKeeper is unreachable or while another session still holds the node, e.g. the
  // previous run of this component before its session expired) -- the store keeps trying
  // in the background either way. Registering the same (kind, id) again replaces `info`.
  // With `take_over`, until this registration first succeeds a node held by another session
  // (a previous process of this member that may still run) is deleted and replaced: for
  // members whose previous process is fenced off otherwise (LTCs: incarnations and owner
  // epochs, docs/coordinator.md), so a restart need not wait out the old session.
  Status Register(MemberKind kind, const std::string& id, const MemberInfo& info,
                  bool take_over = false)
      EXCLUDES(sync_mu_, callback_mu_, mu_);
  // Stops keeping the node and deletes it. OK if it was not there.
  Status Unregister(MemberKind kind, const std::string& id) EXCLUDES(sync_mu_, callback_mu_, mu_);

  // Publishes status/<kind>/<id> (ephemeral) with `json`, a small JSON object describing the
  // component's progress (an LTC publishes an LtcStatus, ltc_status.h), creating the node or
  // replacing its data, and keeps it published like Register()'s node: re-created after a
  // session expiry with the latest `json`. Until the first success, a node held by another
  // session (a previous process of the member) is taken over at once: its status is stale;
  // after it, such a node is a newer process's and is waited for. Call it again whenever
  // the status changes; the node goes when the session closes (Shutdown(), a crash).
  // Returns OK once the node holds `json`; InvalidArgument for a bad id or if `json` is not
  // a JSON object or longer than kMaxStatusBytes; otherwise the failure of this attempt
  // (Unavailable while ZooKeeper is unreachable), the store retrying in the background.
  static constexpr size_t kMaxStatusBytes = 256 * 1024;  // ZooKeeper's node limit is 1 MiB
  Status PublishStatus(MemberKind kind, const std::string& id, const std::string& json)
      EXCLUDES(sync_mu_, callback_mu_, mu_);
  // The status documents published for `kind`, id -> JSON, read from ZooKeeper now (none:
  // an empty map). Returns Unavailable/TimedOut as ZkClient.
  Result<std::map<std::string, std::string>> ReadStatuses(MemberKind kind) EXCLUDES(mu_);

  // Adds `cb`. If a configuration is already known, calls `cb` with it before returning.
  // `cb` must stay callable until Shutdown().
  void WatchConfig(ConfigCallback cb) EXCLUDES(sync_mu_, callback_mu_, mu_);
  // The newest configuration seen, or nullopt before the first one. Keeps answering from
  // memory while ZooKeeper is down.
  std::optional<ClusterConfig> GetLastConfig() const EXCLUDES(mu_);
  // Waits up to `timeout` until a configuration with epoch >= `min_epoch` is known (its
  // callbacks may still be running when this returns).
  bool WaitForEpoch(uint64_t min_epoch, std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Registered members of `kind` (id -> info), read from ZooKeeper now. Nodes whose data
  // does not parse are logged and left out. Returns Unavailable/TimedOut as ZkClient.
  Result<std::map<std::string, MemberInfo>> ListMembers(MemberKind kind) EXCLUDES(mu_);
  // Adds `cb`, called after any change of the members of any kind. Must stay callable
  // until Shutdown().
  void WatchMembers(MembersCallback cb) EXCLUDES(mu_);

  // ---- Coordinator and admin ----

  // Creates the cluster's nodes and publishes `initial` as its configuration. Returns
  // InvalidArgument if `initial` is invalid or names another cluster, AlreadyExists if the
  // cluster already has a configuration, or a ZooKeeper error.
  Status CreateCluster(const ClusterConfig& initial) EXCLUDES(mu_);
  // Reads the configuration from ZooKeeper (not the cache); *version (optional) receives
  // the node version for UpdateConfig(). NotFound if the cluster was never created,
  // Corruption/InvalidArgument if the stored document is bad.
  Result<ClusterConfig> ReadConfig(int32_t* version = nullptr) EXCLUDES(mu_);
  // Compare-and-set: writes `config` if the node's version is still `expected_version`.
  // Returns Aborted if someone else changed it since (re-read and retry),
  // InvalidArgument if `config` is invalid, names another cluster, or its epoch is 0.
  Status UpdateConfig(const ClusterConfig& config, int32_t expected_version) EXCLUDES(mu_);

  // Paths of the layout above.
  std::string RootPath() const;
  std::string ConfigPath() const;
  std::string MembersPath(MemberKind kind) const;
  std::string MemberPath(MemberKind kind, const std::string& id) const;
  std::string ElectionPath() const;
  std::string StatusesPath(MemberKind kind) const;
  std::string StatusPath(MemberKind kind, const std::string& id) const;

  // The session, for recipes built on it (leader election). Valid after Init() until
  // the store is destroyed.
  ZkClient* zk() { return zk_.get(); }
  const ConfigStoreOptions& options() const { return options_; }

 private:
  // An ephemeral node the store keeps published: a member node (Register) or a status
  // document (PublishStatus).
  struct Registration {
    MemberKind kind;
    std::string id;
    std::string data;          // MemberInfo JSON or the status document
    int64_t done_session = 0;  // session in which the node is known to exist; 0 = not yet
    bool take_over = false;    // see Register
  };

  // Register() and PublishStatus(): keeps `path` published with `data` from now on and
  // makes a first attempt. `what` names the operation in errors.
  Status Keep(const std::string& what, const std::string& path, Registration reg)
      EXCLUDES(sync_mu_, callback_mu_, mu_);
  void BackgroundThread() EXCLUDES(sync_mu_, callback_mu_, mu_);
  // One pass: registrations, configuration, members. Returns false if anything failed.
  // *new_config receives a configuration newer than any seen, *members_changed whether
  // member callbacks are due; the caller runs the callbacks without sync_mu_.
  bool SyncOnce(std::optional<ClusterConfig>* new_config, bool* members_changed) REQUIRES(sync_mu_)
      EXCLUDES(mu_);
  Status EnsureRegistered(const std::string& path, const std::string& data, int64_t session,
                          bool take_over)
      REQUIRES(sync_mu_) EXCLUDES(mu_);
  Status RefreshConfig(std::optional<ClusterConfig>* new_config) REQUIRES(sync_mu_) EXCLUDES(mu_);
  Status WatchMemberLists() REQUIRES(sync_mu_) EXCLUDES(mu_);
  // Run the callbacks under callback_mu_ (and no other lock of the store).
  void RunConfigCallbacks(const ClusterConfig& config) EXCLUDES(sync_mu_, callback_mu_, mu_);
  void RunMembersCallbacks() EXCLUDES(sync_mu_, callback_mu_, mu_);
  // Flags work for the background thread. Also called by watches, on ZooKeeper's thread.
  void Wake() EXCLUDES(mu_);

  // Constant after construction.
  const ConfigStoreOptions options_;

  // Set by Init(); the pointee is internally synchronized.
  std::unique_ptr<ZkClient> zk_;
  uint64_t config_watch_ = ZkClient::kNoWatch;
  uint64_t members_watch_ = ZkClient::kNoWatch;

  // Held while a callback runs, so callbacks never run concurrently; guards no data.
  Mutex callback_mu_ ACQUIRED_BEFORE(sync_mu_, mu_);

  // Serializes SyncOnce() with Register()'s own attempt, so a node is never created twice
  // concurrently; guards no data. Never held while calling back.
  Mutex sync_mu_ ACQUIRED_BEFORE(mu_);

  mutable Mutex mu_;
  CondVar cv_;  // dirty_, shutdown_ or last_config_ changed
  bool dirty_ GUARDED_BY(mu_) = false;
  bool members_dirty_ GUARDED_BY(mu_) = false;  // a member-list watch fired
  bool shutdown_ GUARDED_BY(mu_) = false;
  std::map<std::string, Registration> registrations_ GUARDED_BY(mu_);  // by path
  std::optional<ClusterConfig> last_config_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<ConfigCallback>> config_callbacks_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<MembersCallback>> members_callbacks_ GUARDED_BY(mu_);
  std::string last_config_error_ GUARDED_BY(mu_);  // logged once per distinct error

  std::thread thread_;
};

}  // namespace nova::coordinator
