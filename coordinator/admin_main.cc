// nova_admin: operator commands against a cluster's state in ZooKeeper
// (docs/coordinator.md, "Commands"). Exit status: 0 success, 1 the command failed
// (ZooKeeper unreachable, cluster exists or missing, ...), 2 unusable command line.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/daemon/daemon_init.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "coordinator/zk_flags.h"

DEFINE_int32(ranges, 0,
             "create-cluster: number of ranges the key space is split into. Without "
             "--split-points the split points are single bytes spread evenly (1..256)");
DEFINE_string(split_points, "",
              "create-cluster: file of split points, one hex-encoded key per line, in "
              "increasing order ('#' comments and blank lines ignored); N points make N+1 "
              "ranges. Also accepted as --split-points");
DEFINE_string(setting, "",
              "create-cluster: a cluster-wide setting key=value (e.g. log_mode=memory); "
              "repeat the flag for several");

namespace {

using nova::Status;
namespace co = nova::coordinator;

constexpr int kFailedExitCode = 1;

constexpr char kUsage[] =
    "nova_admin <command> --zk=host:port[,...] --cluster=NAME [flags]\n"
    "Commands:\n"
    "  create-cluster --ranges N [--split-points FILE] [--setting key=value ...]\n"
    "                 publish the first configuration (epoch 1, ranges unassigned); the\n"
    "                 coordinator then assigns them to registered LTCs\n"
    "  status         table of components: kind, id, address, state (alive: registered and\n"
    "                 in the configuration; joining: registered, not yet in it; dead: in it,\n"
    "                 not registered), ranges owned\n"
    "  show-config    print the configuration document (JSON)";

int Usage(const std::string& message) {
  std::fprintf(stderr, "nova_admin: %s\n(see nova_admin --help)\n", message.c_str());
  return nova::kBadFlagsExitCode;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "nova_admin: %s\n", s.ToString().c_str());
  return kFailedExitCode;
}

// gflags knows neither '-' in flag names nor repeated flags: rewrite --split-points as
// --split_points and pull every --setting out of argv into *settings.
bool PreprocessArgs(int argc, char** argv, std::vector<std::string>* args,
                    std::vector<std::string>* settings) {
  args->push_back(argv[0]);
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-') {
      const size_t dashes = a[1] == '-' ? 2 : 1;
      const size_t eq = a.find('=');
      for (size_t j = dashes; j < std::min(eq, a.size()); j++) {
        if (a[j] == '-') a[j] = '_';
      }
      const std::string name = a.substr(dashes, eq == std::string::npos ? a.npos : eq - dashes);
      if (name == "setting") {
        if (eq != std::string::npos) {
          settings->push_back(a.substr(eq + 1));
        } else if (i + 1 < argc) {
          settings->push_back(argv[++i]);
        } else {
          return false;
        }
        continue;
      }
    }
    args->push_back(a);
  }
  return true;
}

std::string JoinIds(const std::vector<uint32_t>& ids) {
  if (ids.empty()) return "-";
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

// Connects or explains why not.
Status Connect(co::ConfigStore* store) {
  NOVA_RETURN_NOT_OK(store->Init());
  if (!store->WaitConnected(store->options().op_timeout)) {
    return Status::Unavailable("cannot reach ZooKeeper at " + store->options().zk_servers +
                               " within " + std::to_string(store->options().op_timeout.count()) +
                               " ms");
  }
  return Status::OK();
}

int CreateCluster(const co::ConfigStoreOptions& options,
                  const std::vector<std::string>& setting_args) {
  std::vector<std::string> points;
  if (!FLAGS_split_points.empty()) {
    std::ifstream in(FLAGS_split_points);
    if (!in) return Usage("cannot read --split-points file '" + FLAGS_split_points + "'");
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = co::ParseSplitPoints(text.str());
    if (!parsed.ok()) return Usage(parsed.status().message());
    points = std::move(parsed.value());
    if (FLAGS_ranges != 0 && static_cast<size_t>(FLAGS_ranges) != points.size() + 1) {
      return Usage("--ranges=" + std::to_string(FLAGS_ranges) + " but the split points make " +
                   std::to_string(points.size() + 1) + " ranges");
    }
  } else {
    if (FLAGS_ranges <= 0) return Usage("create-cluster needs --ranges N (N >= 1)");
    auto even = co::EvenSplitPoints(FLAGS_ranges);
    if (!even.ok()) return Usage(even.status().message());
    points = std::move(even.value());
  }
  std::map<std::string, std::string> settings;
  for (const std::string& kv : setting_args) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return Usage("--setting '" + kv + "': want key=value");
    }
    if (!settings.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second) {
      return Usage("--setting " + kv.substr(0, eq) + " given twice");
    }
  }
  auto config = co::MakeInitialConfig(options.cluster, points, settings);
  if (!config.ok()) return Usage(config.status().message());

  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (s.ok()) s = store.CreateCluster(config.value());
  if (!s.ok()) return Fail(s);
  std::printf("created cluster %s: %zu ranges, epoch %llu, at %s\n", options.cluster.c_str(),
              config->ranges.size(), static_cast<unsigned long long>(config->epoch),
              store.ConfigPath().c_str());
  return 0;
}

// Candidate id of the current leader, "" if none or unreadable.
std::string LeaderId(co::ConfigStore* store) {
  std::vector<std::string> candidates;
  if (!store->zk()->GetChildren(store->ElectionPath(), &candidates).ok() || candidates.empty()) {
    return "";
  }
  std::string id;
  if (!store->zk()->Get(store->ElectionPath() + "/" + candidates.front(), &id, nullptr).ok()) {
    return "";
  }
  return id;
}

int PrintStatus(const co::ConfigStoreOptions& options) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  auto config = store.ReadConfig();
  if (!config.ok()) return Fail(config.status());
  const std::string leader = LeaderId(&store);

  std::vector<std::vector<std::string>> rows = {{"KIND", "ID", "ADDRESS", "STATE", "RANGES"}};
  for (co::MemberKind kind : co::kAllMemberKinds) {
    auto registered = store.ListMembers(kind);
    if (!registered.ok()) return Fail(registered.status());
    const std::map<std::string, std::string>* in_config = config->Members(kind);
    std::set<std::string> ids;
    for (const auto& [id, info] : registered.value()) ids.insert(id);
    if (in_config != nullptr) {
      for (const auto& [id, address] : *in_config) ids.insert(id);
    }
    for (const std::string& id : ids) {
      auto reg = registered->find(id);
      const bool alive = reg != registered->end();
      const bool member = in_config == nullptr || in_config->count(id) > 0;
      std::string address = alive ? reg->second.MainAddress() : in_config->at(id);
      std::string state = !alive ? "dead" : member ? "alive" : "joining";
      if (kind == co::MemberKind::kCoordinator && id == leader) state += " (leader)";
      const std::string ranges = kind == co::MemberKind::kLtc ? JoinIds(config->RangesOf(id)) : "-";
      rows.push_back(
          {co::MemberKindName(kind), id, address.empty() ? "-" : address, state, ranges});
    }
  }
  const size_t unassigned = config->RangesOf("").size();
  std::printf("cluster %s  epoch %llu  ranges %zu (%zu unassigned)\n", config->cluster.c_str(),
              static_cast<unsigned long long>(config->epoch), config->ranges.size(), unassigned);
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); c++) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); c++) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

int ShowConfig(const co::ConfigStoreOptions& options) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  auto config = store.ReadConfig();
  if (!config.ok()) return Fail(config.status());
  std::fputs(config->ToJson().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  std::vector<std::string> settings;
  if (!PreprocessArgs(argc, argv, &args, &settings)) return Usage("--setting needs key=value");
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  int n = static_cast<int>(ptrs.size());
  char** v = ptrs.data();
  // A tool's stderr is for errors: the ZooKeeper session's INFO lines would drown them.
  gflags::SetCommandLineOptionWithMode("minloglevel", "2", gflags::SET_FLAGS_DEFAULT);
  nova::InitDaemon(&n, &v, kUsage);

  if (n != 2) return Usage(n < 2 ? "no command given" : "more than one command given");
  const std::string command = v[1];
  if (command != "create-cluster" && command != "status" && command != "show-config") {
    return Usage("unknown command '" + command + "'");
  }
  if (command != "create-cluster" &&
      (FLAGS_ranges != 0 || !FLAGS_split_points.empty() || !settings.empty())) {
    return Usage("--ranges, --split-points and --setting only apply to create-cluster");
  }
  auto options = co::ConfigStoreOptionsFromFlags();
  if (!options.ok()) return Usage(options.status().message());
  if (command == "create-cluster") return CreateCluster(options.value(), settings);
  if (command == "status") return PrintStatus(options.value());
  return ShowConfig(options.value());
}
