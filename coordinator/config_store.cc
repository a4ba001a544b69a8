#include "coordinator/config_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

namespace nova::coordinator {

namespace {

using nlohmann::json;

// Root of every Nova cluster in ZooKeeper. DO NOT CHANGE: persisted.
constexpr char kRoot[] = "/nova/";
// MemberInfo JSON field. DO NOT CHANGE: persisted.
constexpr char kAddressesField[] = "addresses";
// The address a member's peers and clients use, when it has one.
constexpr char kClientAddress[] = "client";

std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

std::string SessionHex(int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, static_cast<uint64_t>(id));
  return buf;
}

}  // namespace

std::string MemberInfo::MainAddress() const {
  auto it = addresses.find(kClientAddress);
  if (it != addresses.end()) return it->second;
  return addresses.empty() ? "" : addresses.begin()->second;
}

std::string MemberInfo::ToJson() const {
  json doc;
  doc[kAddressesField] = addresses;
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<MemberInfo> MemberInfo::FromJson(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Corruption("member info is not a JSON object");
  }
  MemberInfo info;
  auto it = doc.find(kAddressesField);
  if (it == doc.end()) return info;
  if (!it->is_object()) return Status::Corruption("member info: addresses is not an object");
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string()) return Status::Corruption("member info: address is not a string");
    info.addresses[name] = value.get<std::string>();
  }
  return info;
}

ConfigStore::ConfigStore(ConfigStoreOptions options) : options_(std::move(options)) {}

ConfigStore::~ConfigStore() { Shutdown(); }

std::string ConfigStore::RootPath() const { return kRoot + options_.cluster; }
std::string ConfigStore::ConfigPath() const { return RootPath() + "/config"; }
std::string ConfigStore::MembersPath(MemberKind kind) const {
  return RootPath() + "/members/" + MemberKindName(kind);
}
std::string ConfigStore::MemberPath(MemberKind kind, const std::string& id) const {
  return MembersPath(kind) + "/" + id;
}
std::string ConfigStore::ElectionPath() const { return RootPath() + "/coordinator/leader"; }
std::string ConfigStore::StatusesPath(MemberKind kind) const {
  return RootPath() + "/status/" + MemberKindName(kind);
}
std::string ConfigStore::StatusPath(MemberKind kind, const std::string& id) const {
  return StatusesPath(kind) + "/" + id;
}

Status ConfigStore::Init() {
  if (options_.zk_servers.empty()) return Status::InvalidArgument("--zk: no ZooKeeper servers");
  NOVA_RETURN_NOT_OK_PREPEND(ValidateMemberId(options_.cluster), "--cluster");
  if (options_.retry_min.count() <= 0 || options_.retry_max < options_.retry_min ||
      options_.poll_interval.count() <= 0) {
    return Status::InvalidArgument("config store retry/poll intervals must be positive");
  }
  ZkClientOptions zo;
  zo.servers = options_.zk_servers;
  zo.session_timeout = options_.session_timeout;
  zo.op_timeout = options_.op_timeout;
  zo.auth = options_.zk_auth;
  // kRoot without its trailing '/': the parent of every cluster of the ensemble.
  zo.shared_parents = {std::string(kRoot, sizeof(kRoot) - 2)};
  zk_ = std::make_unique<ZkClient>(zo);
  // Watches only flag work for the background thread (they run on ZooKeeper's thread).
  config_watch_ = zk_->AddWatch([this] { Wake(); });
  members_watch_ = zk_->AddWatch([this]() EXCLUDES(mu_) {
    {
      MutexLock l(&mu_);
      members_dirty_ = true;
    }
    Wake();
  });
  zk_->AddSessionListener([this](int64_t) { Wake(); });
  NOVA_RETURN_NOT_OK(zk_->Start());
  thread_ = std::thread([this] { BackgroundThread(); });
  return Status::OK();
}

void ConfigStore::Shutdown() {
  {
    MutexLock l(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  cv_.NotifyAll();
  // Closing the session first makes any call the background thread is blocked in return.
  if (zk_) zk_->Shutdown();
  if (thread_.joinable()) thread_.join();
}

bool ConfigStore::WaitConnected(std::chrono::milliseconds timeout) {
  return zk_->WaitConnected(timeout);
}

bool ConfigStore::connected() const { return zk_ && zk_->connected(); }

void ConfigStore::Wake() {
  {
    MutexLock l(&mu_);
    dirty_ = true;
  }
  cv_.NotifyAll();
}

void ConfigStore::BackgroundThread() {
  std::chrono::milliseconds backoff = options_.retry_min;
  MutexLock l(&mu_);
  while (!shutdown_) {
    dirty_ = false;
    l.Unlock();
    std::optional<ClusterConfig> new_config;
    bool members_changed = false;
    bool ok;
    {
      MutexLock s(&sync_mu_);
      ok = SyncOnce(&new_config, &members_changed);
    }
    if (new_config.has_value()) RunConfigCallbacks(*new_config);
    if (members_changed) RunMembersCallbacks();
    l.Lock();
    const std::chrono::milliseconds wait = ok ? options_.poll_interval : backoff;
    backoff = ok ? options_.retry_min : std::min(backoff * 2, options_.retry_max);
    cv_.WaitUntil(&l, std::chrono::steady_clock::now() + wait,
                  [this]() REQUIRES(mu_) { return shutdown_ || dirty_; });
  }
}

bool ConfigStore::SyncOnce(std::optional<ClusterConfig>* new_config, bool* members_changed) {
  // Without a connection every call would just wait out its deadline; the session
  // listener wakes us when one is back.
  if (!zk_->connected()) return false;
  const int64_t session = zk_->session_id();
  bool ok = true;

  struct Todo {
    std::string path;
    std::string data;
    bool take_over;
  };
  std::vector<Todo> todo;
  {
    MutexLock l(&mu_);
    for (const auto& [path, reg] : registrations_) {
      // Take over only until registered once: later, a node held by another session is a
      // newer process of this member.
      if (reg.done_session != session) {
        todo.push_back(Todo{path, reg.data, reg.take_over && reg.done_session == 0});
      }
    }
  }
  for (const auto& [path, data, take_over] : todo) {
    Status s = EnsureRegistered(path, data, session, take_over);
    if (s.ok()) {
      MutexLock l(&mu_);
      auto it = registrations_.find(path);
      if (it != registrations_.end() && it->second.data == data) it->second.done_session = session;
      LOG(INFO) << "registered " << path << " (session " << SessionHex(session) << ")";
    } else {
      LOG(WARNING) << "cannot register " << path << ": " << s.ToString() << "; retrying";
      ok = false;
    }
  }

  Status s = RefreshConfig(new_config);
  if (!s.ok()) {
    LOG(WARNING) << "cannot read the configuration: " << s.ToString() << "; retrying";
    ok = false;
  }

  bool want_members;
  {
    MutexLock l(&mu_);
    want_members = !members_callbacks_.empty();
    *members_changed = want_members && members_dirty_;
    members_dirty_ = false;
  }
  if (want_members) {
    s = WatchMemberLists();
    if (!s.ok()) {
      LOG(WARNING) << "cannot watch the member lists: " << s.ToString() << "; retrying";
      MutexLock l(&mu_);
      members_dirty_ = true;
      ok = false;
    }
  }
  return ok;
}

Status ConfigStore::EnsureRegistered(const std::string& path, const std::string& data,
                                     int64_t session, bool take_over) {
  NOVA_RETURN_NOT_OK(zk_->EnsurePath(Parent(path)));
  Status s = zk_->Create(path, data, ZkCreateMode::kEphemeral);
  if (s.ok() || s.code() != Status::Code::kAlreadyExists) return s;
  // Someone holds the node. The watch wakes us when it goes.
  ZkStat stat;
  s = zk_->Exists(path, &stat, config_watch_);
  if (s.IsNotFound()) return Status::Unavailable(path + " vanished while registering; retrying");
  NOVA_RETURN_NOT_OK(s);
  if (stat.ephemeral_owner == session) return zk_->Set(path, data, ZkClient::kAnyVersion);
  if (take_over) {
    LOG(WARNING) << "taking " << path << " over from ZooKeeper session "
                 << SessionHex(stat.ephemeral_owner)
                 << " (a previous process of this member; it is fenced off)";
    // One transaction: a node deleted, then created, would be absent in between, and a
    // coordinator looking then fails a restarting LTC's ranges over to another LTC.
    s = zk_->Replace(path, stat.version, data, ZkCreateMode::kEphemeral);
    if (s.IsNotFound()) return zk_->Create(path, data, ZkCreateMode::kEphemeral);
    if (s.code() == Status::Code::kAborted) {
      return Status::Unavailable(path + " changed while taking it over; retrying");
    }
    return s;
  }
  return Status::Unavailable(
      path + " is held by another ZooKeeper session " + SessionHex(stat.ephemeral_owner) +
      ": a previous run of this member whose session has not expired yet (it goes within "
      "the session timeout), or a second process with the same id");
}

Status ConfigStore::RefreshConfig(std::optional<ClusterConfig>* new_config) {
  std::string data;
  ZkStat stat;
  Status s = zk_->Get(ConfigPath(), &data, &stat, config_watch_);
  if (s.IsNotFound()) {
    // A get on a missing node arms no watch; exists does (fires on creation).
    s = zk_->Exists(ConfigPath(), nullptr, config_watch_);
    if (s.ok()) Wake();  // created in between
    return s.IsNotFound() ? Status::OK() : s;
  }
  NOVA_RETURN_NOT_OK(s);
  Result<ClusterConfig> config = ClusterConfig::FromJson(data);
  MutexLock l(&mu_);
  std::string error;
  if (!config.ok()) {
    error = config.status().ToString();
  } else if (config->cluster != options_.cluster) {
    error = "it names cluster '" + config->cluster + "'";
  }
  if (!error.empty()) {
    // Not retried: only a new version can fix it, and the watch reports that.
    if (error != last_config_error_) {
      LOG(ERROR) << "ignoring the configuration at " << ConfigPath() << " (version " << stat.version
                 << "): " << error << "; keeping epoch "
                 << (last_config_ ? last_config_->epoch : 0);
      last_config_error_ = error;
    }
    return Status::OK();
  }
  last_config_error_.clear();
  if (!last_config_.has_value() || config->epoch > last_config_->epoch) {
    last_config_ = config.value();
    *new_config = std::move(config.value());
    cv_.NotifyAll();  // WaitForEpoch()
    LOG(INFO) << "configuration epoch " << last_config_->epoch << " of cluster " << options_.cluster
              << ": " << last_config_->ranges.size() << " ranges, " << last_config_->ltcs.size()
              << " LTCs";
  } else if (config->epoch < last_config_->epoch) {
    LOG(WARNING) << "configuration epoch went back from " << last_config_->epoch << " to "
                 << config->epoch << " (cluster re-created?); keeping epoch "
                 << last_config_->epoch;
  }
  return Status::OK();
}

Status ConfigStore::WatchMemberLists() {
  for (MemberKind kind : kAllMemberKinds) {
    std::vector<std::string> children;
    Status s = zk_->GetChildren(MembersPath(kind), &children, members_watch_);
    if (s.IsNotFound()) s = zk_->Exists(MembersPath(kind), nullptr, members_watch_);
    if (!s.ok() && !s.IsNotFound()) return s;
  }
  return Status::OK();
}

void ConfigStore::RunConfigCallbacks(const ClusterConfig& config) {
  MutexLock c(&callback_mu_);
  std::vector<std::shared_ptr<ConfigCallback>> callbacks;
  {
    MutexLock l(&mu_);
    callbacks = config_callbacks_;
  }
  for (const auto& cb : callbacks) (*cb)(config);
}

void ConfigStore::RunMembersCallbacks() {
  MutexLock c(&callback_mu_);
  std::vector<std::shared_ptr<MembersCallback>> callbacks;
  {
    MutexLock l(&mu_);
    callbacks = members_callbacks_;
  }
  for (const auto& cb : callbacks) (*cb)();
}

Status ConfigStore::Register(MemberKind kind, const std::string& id, const MemberInfo& info,
                             bool take_over) {
  NOVA_RETURN_NOT_OK(ValidateMemberId(id));
  return Keep("register", MemberPath(kind, id), Registration{kind, id, info.ToJson(), 0, take_over});
}

Status ConfigStore::PublishStatus(MemberKind kind, const std::string& id,
                                  const std::string& text) {
  NOVA_RETURN_NOT_OK(ValidateMemberId(id));
  if (text.size() > kMaxStatusBytes) {
    return Status::InvalidArgument("status of " + std::string(MemberKindName(kind)) + " " + id +
                                   ": " + std::to_string(text.size()) + " bytes, more than " +
                                   std::to_string(kMaxStatusBytes));
  }
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::InvalidArgument("status of " + std::string(MemberKindName(kind)) + " " + id +
                                   ": not a JSON object");
  }
  const std::string path = StatusPath(kind, id);
  bool published_before = false;
  {
    MutexLock l(&mu_);
    auto it = registrations_.find(path);
    // Once published (done_session set, or take_over already given up by an earlier call).
    published_before = it != registrations_.end() &&
                       (it->second.done_session != 0 || !it->second.take_over);
  }
  // A node held by another session before the first success is a previous process's, whose
  // status is stale: take it over. After that it would be a newer process's (as Register's
  // take_over).
  return Keep("publish status", path, Registration{kind, id, text, 0, !published_before});
}

Status ConfigStore::Keep(const std::string& what, const std::string& path, Registration reg) {
  const std::string data = reg.data;
  const bool take_over = reg.take_over;
  MutexLock s(&sync_mu_);
  {
    MutexLock l(&mu_);
    registrations_[path] = std::move(reg);
  }
  // The node's owner is checked against the session, so know it first.
  if (!zk_->WaitConnected(options_.op_timeout)) {
    Wake();  // the background thread registers once a session exists
    return Status::Unavailable(what + " " + path + ": no connection to ZooKeeper at " +
                               options_.zk_servers);
  }
  const int64_t session = zk_->session_id();
  Status st = EnsureRegistered(path, data, session, take_over);
  if (st.ok()) {
    MutexLock l(&mu_);
    auto it = registrations_.find(path);
    if (it != registrations_.end() && it->second.data == data) it->second.done_session = session;
    VLOG_IF(1, what != "register") << what << " " << path;
    LOG_IF(INFO, what == "register") << "registered " << path << " (session "
                                     << SessionHex(session) << ")";
  } else {
    Wake();  // the background thread keeps trying
  }
  return st;
}

Result<std::map<std::string, std::string>> ConfigStore::ReadStatuses(MemberKind kind) {
  std::map<std::string, std::string> statuses;
  std::vector<std::string> children;
  Status s = zk_->GetChildren(StatusesPath(kind), &children);
  if (s.IsNotFound()) return statuses;
  NOVA_RETURN_NOT_OK(s);
  for (const std::string& id : children) {
    std::string data;
    s = zk_->Get(StatusPath(kind, id), &data, nullptr);
    if (s.IsNotFound()) continue;  // its session closed between the list and the read
    NOVA_RETURN_NOT_OK(s);
    statuses[id] = std::move(data);
  }
  return statuses;
}

Status ConfigStore::Unregister(MemberKind kind, const std::string& id) {
  const std::string path = MemberPath(kind, id);
  MutexLock s(&sync_mu_);
  {
    MutexLock l(&mu_);
    registrations_.erase(path);
  }
  Status st = zk_->Delete(path);
  return st.IsNotFound() ? Status::OK() : st;
}

void ConfigStore::WatchConfig(ConfigCallback cb) {
  auto shared = std::make_shared<ConfigCallback>(std::move(cb));
  MutexLock c(&callback_mu_);
  std::optional<ClusterConfig> last;
  {
    MutexLock l(&mu_);
    config_callbacks_.push_back(shared);
    last = last_config_;
  }
  if (last.has_value()) (*shared)(*last);
}

std::optional<ClusterConfig> ConfigStore::GetLastConfig() const {
  MutexLock l(&mu_);
  return last_config_;
}

bool ConfigStore::WaitForEpoch(uint64_t min_epoch, std::chrono::milliseconds timeout) {
  MutexLock l(&mu_);
  return cv_.WaitUntil(&l, std::chrono::steady_clock::now() + timeout, [&]() REQUIRES(mu_) {
    return last_config_.has_value() && last_config_->epoch >= min_epoch;
  });
}

Result<std::map<std::string, MemberInfo>> ConfigStore::ListMembers(MemberKind kind) {
  std::map<std::string, MemberInfo> members;
  std::vector<std::string> children;
  Status s = zk_->GetChildren(MembersPath(kind), &children);
  if (s.IsNotFound()) return members;
  NOVA_RETURN_NOT_OK(s);
  for (const std::string& id : children) {
    std::string data;
    s = zk_->Get(MemberPath(kind, id), &data, nullptr);
    if (s.IsNotFound()) continue;  // left between the list and the read
    NOVA_RETURN_NOT_OK(s);
    Result<MemberInfo> info = MemberInfo::FromJson(data);
    if (!info.ok()) {
      LOG(WARNING) << "ignoring member " << MemberPath(kind, id) << ": "
                   << info.status().ToString();
      continue;
    }
    members[id] = std::move(info.value());
  }
  return members;
}

void ConfigStore::WatchMembers(MembersCallback cb) {
  {
    MutexLock l(&mu_);
    members_callbacks_.push_back(std::make_shared<MembersCallback>(std::move(cb)));
    members_dirty_ = true;
  }
  Wake();
}

Status ConfigStore::CreateCluster(const ClusterConfig& initial) {
  NOVA_RETURN_NOT_OK_PREPEND(initial.Validate(), "initial configuration");
  if (initial.cluster != options_.cluster) {
    return Status::InvalidArgument("initial configuration names cluster '" + initial.cluster +
                                   "', not '" + options_.cluster + "'");
  }
  for (MemberKind kind : kAllMemberKinds) NOVA_RETURN_NOT_OK(zk_->EnsurePath(MembersPath(kind)));
  NOVA_RETURN_NOT_OK(zk_->EnsurePath(ElectionPath()));
  Status s = zk_->Create(ConfigPath(), initial.ToJson(), ZkCreateMode::kPersistent);
  if (s.code() == Status::Code::kAlreadyExists) {
    return Status::AlreadyExists("cluster '" + options_.cluster + "' already exists (" +
                                 ConfigPath() + ")");
  }
  return s;
}

Result<ClusterConfig> ConfigStore::ReadConfig(int32_t* version) {
  std::string data;
  ZkStat stat;
  Status s = zk_->Get(ConfigPath(), &data, &stat);
  if (s.IsNotFound()) {
    return Status::NotFound("cluster '" + options_.cluster + "' has no configuration at " +
                            ConfigPath() + " (run nova_admin create-cluster)");
  }
  NOVA_RETURN_NOT_OK(s);
  Result<ClusterConfig> config = ClusterConfig::FromJson(data);
  if (!config.ok()) return config.status().Prepend(ConfigPath());
  if (version != nullptr) *version = stat.version;
  return config;
}

Status ConfigStore::UpdateConfig(const ClusterConfig& config, int32_t expected_version) {
  NOVA_RETURN_NOT_OK_PREPEND(config.Validate(), "new configuration");
  if (config.cluster != options_.cluster) {
    return Status::InvalidArgument("new configuration names cluster '" + config.cluster + "'");
  }
  if (config.epoch == 0) return Status::InvalidArgument("new configuration has epoch 0");
  Status s = zk_->Set(ConfigPath(), config.ToJson(), expected_version);
  if (s.code() == Status::Code::kAborted) {
    return Status::Aborted("configuration changed concurrently (expected version " +
                           std::to_string(expected_version) + "); re-read and retry");
  }
  return s;
}

}  // namespace nova::coordinator
