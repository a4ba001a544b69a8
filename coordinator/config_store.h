// ConfigStore: the cluster's state in ZooKeeper, as every component, client and the
// coordinator see it (DESIGN.md section 8; layout in docs/coordinator.md):
//
//   /nova/<cluster>/config                       the ClusterConfig document (JSON)
//   /nova/<cluster>/members/{ltc,logc,stoc,coordinator}/<id>   ephemeral: MemberInfo JSON
//   /nova/<cluster>/coordinator/leader/n_<seq>   ephemeral sequential: election candidates
//
// A component calls Register() once and WatchConfig(); ConfigStore keeps both true across
// connection loss and session expiry by itself, on a background thread that retries with
// backoff. While ZooKeeper is unreachable, GetLastConfig() keeps returning the last
// configuration seen, so the component keeps serving with it.
//
// Thread safety: all methods are thread-safe. Callbacks run on the store's background
// thread (or, once, inside WatchConfig()), never concurrently with each other, and must
// not call Shutdown().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
  Status Init();
  // Stops the background thread and closes the session: registered members disappear at
  // once. Idempotent.
  void Shutdown();

  // Waits up to `timeout` for a ZooKeeper connection; returns whether there is one.
  bool WaitConnected(std::chrono::milliseconds timeout);
  bool connected() const;

  // ---- Components ----

  // Publishes members/<kind>/<id> (ephemeral) with `info`, and keeps it published: the
  // store re-creates it after a session expiry. Returns OK once the node exists;
  // InvalidArgument for a bad id; otherwise the failure of the first attempt (Unavailable
  // while ZooKeeper is unreachable or while another session still holds the node, e.g. the
  // previous run of this component before its session expired) -- the store keeps trying
  // in the background either way. Registering the same (kind, id) again replaces `info`.
  Status Register(MemberKind kind, const std::string& id, const MemberInfo& info);
  // Stops keeping the node and deletes it. OK if it was not there.
  Status Unregister(MemberKind kind, const std::string& id);

  // Adds `cb`. If a configuration is already known, calls `cb` with it before returning.
  // `cb` must stay callable until Shutdown().
  void WatchConfig(ConfigCallback cb);
  // The newest configuration seen, or nullopt before the first one. Keeps answering from
  // memory while ZooKeeper is down.
  std::optional<ClusterConfig> GetLastConfig() const;
  // Waits up to `timeout` until a configuration with epoch >= `min_epoch` is known (its
  // callbacks may still be running when this returns).
  bool WaitForEpoch(uint64_t min_epoch, std::chrono::milliseconds timeout);

  // Registered members of `kind` (id -> info), read from ZooKeeper now. Nodes whose data
  // does not parse are logged and left out. Returns Unavailable/TimedOut as ZkClient.
  Result<std::map<std::string, MemberInfo>> ListMembers(MemberKind kind);
  // Adds `cb`, called after any change of the members of any kind. Must stay callable
  // until Shutdown().
  void WatchMembers(MembersCallback cb);

  // ---- Coordinator and admin ----

  // Creates the cluster's nodes and publishes `initial` as its configuration. Returns
  // InvalidArgument if `initial` is invalid or names another cluster, AlreadyExists if the
  // cluster already has a configuration, or a ZooKeeper error.
  Status CreateCluster(const ClusterConfig& initial);
  // Reads the configuration from ZooKeeper (not the cache); *version (optional) receives
  // the node version for UpdateConfig(). NotFound if the cluster was never created,
  // Corruption/InvalidArgument if the stored document is bad.
  Result<ClusterConfig> ReadConfig(int32_t* version = nullptr);
  // Compare-and-set: writes `config` if the node's version is still `expected_version`.
  // Returns Aborted if someone else changed it since (re-read and retry),
  // InvalidArgument if `config` is invalid, names another cluster, or its epoch is 0.
  Status UpdateConfig(const ClusterConfig& config, int32_t expected_version);

  // Paths of the layout above.
  std::string RootPath() const;
  std::string ConfigPath() const;
  std::string MembersPath(MemberKind kind) const;
  std::string MemberPath(MemberKind kind, const std::string& id) const;
  std::string ElectionPath() const;

  // The session, for recipes built on it (leader election). Valid after Init() until
  // the store is destroyed.
  ZkClient* zk() { return zk_.get(); }
  const ConfigStoreOptions& options() const { return options_; }

 private:
  struct Registration {
    MemberKind kind;
    std::string id;
    std::string data;          // MemberInfo JSON
    int64_t done_session = 0;  // session in which the node is known to exist; 0 = not yet
  };

  void BackgroundThread();
  // One pass: registrations, configuration, members. Returns false if anything failed.
  // *new_config receives a configuration newer than any seen, *members_changed whether
  // member callbacks are due; the caller runs the callbacks without sync_mu_.
  bool SyncOnce(std::optional<ClusterConfig>* new_config, bool* members_changed);
  Status EnsureRegistered(const std::string& path, const std::string& data, int64_t session);
  Status RefreshConfig(std::optional<ClusterConfig>* new_config);
  Status WatchMemberLists();
  void RunConfigCallbacks(const ClusterConfig& config);
  void RunMembersCallbacks();
  void Wake();

  // Constant after construction.
  const ConfigStoreOptions options_;

  // Set by Init(); the pointee is internally synchronized.
  std::unique_ptr<ZkClient> zk_;
  uint64_t config_watch_ = ZkClient::kNoWatch;
  uint64_t members_watch_ = ZkClient::kNoWatch;

  // Serializes SyncOnce() with Register()'s own attempt, so a node is never created twice
  // concurrently. Lock order: sync_mu_ before mu_.
  std::mutex sync_mu_;

  // Held while a callback runs, so callbacks never run concurrently.
  // Lock order: sync_mu_ (never held while calling back), then callback_mu_, then mu_.
  std::mutex callback_mu_;

  // Protected by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;
  bool members_dirty_ = false;  // a member-list watch fired
  bool shutdown_ = false;
  std::map<std::string, Registration> registrations_;  // by path
  std::optional<ClusterConfig> last_config_;
  std::vector<std::shared_ptr<ConfigCallback>> config_callbacks_;
  std::vector<std::shared_ptr<MembersCallback>> members_callbacks_;
  std::string last_config_error_;  // logged once per distinct error

  std::thread thread_;
};

}  // namespace nova::coordinator
