// nova_admin: operator commands against a cluster's state in ZooKeeper
// (docs/coordinator.md, "Commands"). Exit status: 0 success, 1 the command failed
// (ZooKeeper unreachable, cluster exists or missing, ...), 2 unusable command line.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "client/admin_stocs.h"
#include "client/client_flags.h"
#include "client/nova_client.h"
#include "client/zk_routing_source.h"
#include "common/clock.h"
#include "common/daemon/daemon_init.h"
#include "coordinator/cluster_config.h"
#include "coordinator/config_store.h"
#include "coordinator/range_assigner.h"
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
DEFINE_int64(range, -1, "migrate-range: the id of the range to move");
DEFINE_string(to, "", "migrate-range: the id of the LTC to move it to (as in nova_admin status)");
DEFINE_string(ltc, "", "drain-ltc, undrain-ltc, remove-ltc: the id of the LTC");
DEFINE_string(stoc, "",
              "drain-stoc, undrain-stoc, remove-stoc: the id of the StoC (as in nova_admin "
              "status)");
DEFINE_bool(dry_run, false,
            "migrate-range, drain-ltc, remove-ltc, rebalance: print the moves, change nothing. "
            "Also accepted as --dry-run");
DEFINE_bool(wait, true,
            "migrate-range, drain-ltc, remove-ltc, rebalance: wait until every moved range is "
            "served by its new owner, printing each; drain-stoc, remove-stoc: wait until every "
            "LTC reports no table copy left on the StoC, printing progress. --wait=false returns "
            "once the new configuration is published");
DEFINE_bool(live, true,
            "migrate-range, drain-ltc, remove-ltc, rebalance: move ranges by live migration "
            "(the destination copies the memtables from the source, which serves until a short "
            "hand-off; any log mode). --live=false: the new owner recovers each range from the "
            "MANIFEST and replays its logs (needs log_mode memory or disk)");
DEFINE_int32(timeout_s, 120,
             "how long the waiting commands wait for the moved ranges to be served, or for a "
             "StoC to be drained, seconds (a drain that takes longer goes on: re-run to wait "
             "again)");

// coordinator/zk_flags.cc: add-stoc echoes them in its example.
DECLARE_string(zk);
DECLARE_string(cluster);

namespace {

using nova::Status;
namespace co = nova::coordinator;
namespace client = nova::client;

constexpr int kFailedExitCode = 1;

constexpr char kUsage[] =
    "nova_admin <command> --zk=host:port[,...] --cluster=NAME [flags]\n"
    "Commands:\n"
    "  create-cluster --ranges N [--split-points FILE] [--setting key=value ...]\n"
    "                 publish the first configuration (epoch 1, ranges unassigned); the\n"
    "                 coordinator then assigns them to registered LTCs\n"
    "  status         table of components: kind, id, address, state (alive: registered and\n"
    "                 in the configuration; joining: registered, not yet in it; dead: in it,\n"
    "                 not registered; removed: a StoC out of it, still draining; draining),\n"
    "                 ranges owned; then the migrations queued or running, then each LTC's\n"
    "                 status (table copies at risk and to move per StoC, relocation totals)\n"
    "  show-config    print the configuration document (JSON)\n"
    "  migrate-range --range ID --to LTC\n"
    "                 move a range to another live LTC: queued as a live migration (the\n"
    "                 coordinator runs --coordinator_max_concurrent_migrations at once; the\n"
    "                 destination copies the memtables while the source serves, then takes\n"
    "                 over after a short hand-off). --live=false: the new owner recovers the\n"
    "                 range from the MANIFEST and the logs (log_mode memory or disk)\n"
    "  drain-ltc --ltc ID\n"
    "                 move every range of the LTC to the others and give it no more (it can\n"
    "                 then be stopped); undrain-ltc --ltc ID lets it take ranges again\n"
    "  remove-ltc --ltc ID\n"
    "                 drain the LTC and drop it from the configuration (then stop it)\n"
    "  rebalance [--dry-run]\n"
    "                 even out the ranges over the live LTCs (a new LTC joins empty: run this)\n"
    "  drain-stoc --stoc ID\n"
    "                 mark the StoC draining: the LTCs place no new table copy on it and move\n"
    "                 the copies it holds to the other StoCs; waits until every LTC owning\n"
    "                 ranges reports none left (--wait, --timeout_s), printing progress;\n"
    "                 undrain-stoc --stoc ID lets it take new copies again\n"
    "  remove-stoc --stoc ID\n"
    "                 drain the StoC, then drop it from the configuration (then stop it; its\n"
    "                 id stays draining, so a process that still runs is never used again)\n"
    "  add-stoc       explains how a StoC is added: by starting one\n"
    "The moving commands wait until each moved range is served (--wait, --timeout_s), print\n"
    "one line per range, exit 1 if one is not, and are safe to re-run; so are drain-stoc and\n"
    "remove-stoc.";

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

co::MoveMode MoveMode() { return FLAGS_live ? co::MoveMode::kLive : co::MoveMode::kReopen; }

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
    // Removed StoCs stay draining: listed so that a process still running shows up.
    if (kind == co::MemberKind::kStoc) ids.insert(config->draining_stocs.begin(), config->draining_stocs.end());
    for (const std::string& id : ids) {
      auto reg = registered->find(id);
      const bool alive = reg != registered->end();
      const bool member = in_config == nullptr || in_config->count(id) > 0;
      std::string address = alive ? reg->second.MainAddress() : member ? in_config->at(id) : "";
      std::string state = !alive ? (member ? "dead" : "removed") : member ? "alive" : "joining";
      if (kind == co::MemberKind::kLtc && config->draining.count(id) > 0) state += " (draining)";
      if (kind == co::MemberKind::kStoc && config->draining_stocs.count(id) > 0) {
        state += " (draining)";
      }
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
  if (!config->migrations.empty()) {
    std::printf("migrations (%zu):\n", config->migrations.size());
    const uint64_t now = nova::WallMillis();
    for (const co::RangeMigration& m : config->migrations) {
      std::string state = "queued";
      if (m.running) {
        const uint64_t ms = now > m.started_ms ? now - m.started_ms : 0;
        state = "running for " + std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
      }
      std::printf("  range %u: LTC %s -> LTC %s, %s\n", m.range, m.from.c_str(), m.to.c_str(),
                  state.c_str());
    }
  }
  s = client::PrintLtcStatuses(&store, config.value());
  if (!s.ok()) return Fail(s.Prepend("reading the LTCs' status"));
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

// ---- Moving ranges ---------------------------------------------------------------------

using Planner = std::function<nova::Result<co::MovePlan>(const co::ClusterConfig&,
                                                         const co::LiveMembers&)>;

nova::Result<co::LiveMembers> LiveLtcs(co::ConfigStore* store) {
  auto members = store->ListMembers(co::MemberKind::kLtc);
  if (!members.ok()) return members.status();
  co::LiveMembers live;
  for (const auto& [id, info] : members.value()) live.ltcs[id] = info.MainAddress();
  return live;
}

// Waits until the range with bounds `keys` answers a read. `client` routes at the new
// configuration epoch, so only an LTC that has applied it and opened the range answers (an
// LTC at an older epoch answers Unavailable, the old owner WrongRange; the client retries).
// Returns the milliseconds since `start`, or the last error at `deadline`.
nova::Result<int64_t> WaitServed(client::NovaClient* client, nova::MonoTime start,
                                 const nova::KeyRange& keys, nova::MonoTime deadline) {
  Status last = Status::TimedOut("not tried");
  while (nova::MonoNow() < deadline) {
    auto got = client->Get(keys.start);
    if (got.ok() || got.status().IsNotFound()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(nova::MonoNow() - start)
          .count();
    }
    last = got.status();
  }
  return last;
}

// Waits until no migration of `moves` is left in the configuration, printing each one as it
// starts and ends. Fills *rolled_back with those that ended without the move (dropped by
// the coordinator or given up by an LTC). Returns the epoch of the configuration in which
// the last one ended, or TimedOut at `deadline`.
nova::Result<uint64_t> WaitForMigrations(co::ConfigStore* store, const std::string& what,
                                         const std::vector<co::RangeMove>& moves,
                                         uint64_t published, nova::MonoTime deadline,
                                         std::set<uint32_t>* rolled_back) {
  const nova::MonoTime start = nova::MonoNow();
  std::map<uint32_t, const co::RangeMove*> pending;
  for (const co::RangeMove& m : moves) pending[m.range] = &m;
  std::set<uint32_t> started;
  // Configurations older than the one that queued the migrations do not have them yet.
  uint64_t seen = published > 0 ? published - 1 : 0;
  while (!pending.empty()) {
    if (nova::MonoNow() >= deadline) {
      std::string ids;
      for (const auto& [range, move] : pending) ids += " " + std::to_string(range);
      return Status::TimedOut(what + ": migrations of ranges" + ids + " still queued or running "
                              "after " + std::to_string(FLAGS_timeout_s) + " s (nova_admin "
                              "status shows them; re-run to wait again)");
    }
    store->WaitForEpoch(seen + 1, std::chrono::milliseconds(200));
    auto config = store->GetLastConfig();
    if (!config.has_value() || config->epoch <= seen) continue;
    seen = config->epoch;
    const long long ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(nova::MonoNow() - start).count();
    for (auto it = pending.begin(); it != pending.end();) {
      const co::RangeMigration* m = config->MigrationOf(it->first);
      const co::RangeAssignment* r = config->Range(it->first);
      if (m != nullptr && m->to == it->second->to) {
        if (m->running && started.insert(it->first).second) {
          std::printf("%s: range %u: copying from LTC %s to LTC %s (after %lld ms)\n",
                      what.c_str(), it->first, m->from.c_str(), m->to.c_str(), ms);
          std::fflush(stdout);
        }
        ++it;
        continue;
      }
      if (r != nullptr && r->ltc == it->second->to) {
        std::printf("%s: range %u: LTC %s took it over at epoch %llu (after %lld ms)\n",
                    what.c_str(), it->first, r->ltc.c_str(),
                    static_cast<unsigned long long>(seen), ms);
      } else {
        rolled_back->insert(it->first);
        std::printf("%s: range %u: migration to LTC %s rolled back, still owned by LTC %s "
                    "(the LTCs' logs say why; re-run to try again)\n",
                    what.c_str(), it->first, it->second->to.c_str(),
                    r == nullptr || r->ltc.empty() ? "-" : r->ltc.c_str());
      }
      std::fflush(stdout);
      it = pending.erase(it);
    }
  }
  return seen;
}

int MoveRanges(const co::ConfigStoreOptions& options, const std::string& what,
               const Planner& planner, const std::string& done_message) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  co::MovePlan plan;
  uint64_t published = 0;
  for (int attempt = 0;; ++attempt) {
    int32_t version = 0;
    auto config = store.ReadConfig(&version);
    if (!config.ok()) return Fail(config.status());
    auto live = LiveLtcs(&store);
    if (!live.ok()) return Fail(live.status());
    auto planned = planner(config.value(), live.value());
    if (!planned.ok()) return Fail(planned.status().Prepend(what));
    plan = std::move(planned.value());
    if (attempt == 0) {
      if (plan.moves.empty()) std::printf("%s: no range to move\n", what.c_str());
      for (const co::RangeMove& m : plan.moves) {
        std::printf("%s: range %u: LTC %s -> LTC %s\n", what.c_str(), m.range,
                    m.from.empty() ? "-" : m.from.c_str(), m.to.c_str());
      }
    }
    if (FLAGS_dry_run) {
      std::printf("%s: dry run, nothing changed\n", what.c_str());
      return 0;
    }
    if (plan.next == config.value()) {
      published = config->epoch;
      break;
    }
    plan.next.epoch = config->epoch + 1;
    s = store.UpdateConfig(plan.next, version);
    if (s.code() == Status::Code::kAborted && attempt < 10) continue;  // re-plan on the new one
    if (!s.ok()) return Fail(s.Prepend(what + ": publishing the configuration"));
    published = plan.next.epoch;
    std::printf("%s: published configuration epoch %llu\n", what.c_str(),
                static_cast<unsigned long long>(published));
    break;
  }
  std::fflush(stdout);
  int failed = 0;
  std::set<uint32_t> rolled_back;
  if (FLAGS_wait && FLAGS_live && !plan.moves.empty()) {
    // Live: each migration ends when its entry leaves the configuration, committed (the
    // range has its new owner) or rolled back (it has not).
    auto waited = WaitForMigrations(&store, what, plan.moves, published,
                                    nova::MonoNow() + std::chrono::seconds(FLAGS_timeout_s),
                                    &rolled_back);
    if (!waited.ok()) return Fail(waited.status());
    published = std::max(published, waited.value());
    failed += static_cast<int>(rolled_back.size());
  }
  if (FLAGS_wait && !plan.moves.empty()) {
    // The client must route at the new epoch from its first request: at an older one the
    // old owner, if it has not applied the change yet, would still answer.
    if (!store.WaitForEpoch(published, std::chrono::seconds(FLAGS_timeout_s))) {
      return Fail(Status::TimedOut(what + ": the configuration of epoch " +
                                   std::to_string(published) + " did not reach this tool"));
    }
    const nova::MonoTime published_seen = nova::MonoNow();
    client::ZkRoutingSource routing(&store, std::chrono::seconds(FLAGS_timeout_s));
    client::ClientOptions client_options;
    client_options.routing_source = &routing;
    auto secret = client::ClientSecretFromFlags();  // checked by main() already
    if (!secret.ok()) return Fail(secret.status());
    client_options.client_secret = secret.value();
    client_options.timeout = std::chrono::seconds(2);  // per probe; the loop bounds the wait
    client::NovaClient client(client_options);
    s = client.Init();
    if (!s.ok()) return Fail(s.Prepend(what + ": connecting a client to wait for the ranges"));
    if (client.routing().epoch < published) {
      return Fail(Status::IllegalState(what + ": the client routes at epoch " +
                                       std::to_string(client.routing().epoch) + ", not " +
                                       std::to_string(published)));
    }
    const nova::MonoTime deadline = published_seen + std::chrono::seconds(FLAGS_timeout_s);
    for (const co::RangeMove& m : plan.moves) {
      if (rolled_back.count(m.range) > 0) continue;
      const co::RangeAssignment* r = nullptr;
      for (const co::RangeAssignment& a : plan.next.ranges) r = a.id == m.range ? &a : r;
      auto ms = WaitServed(&client, published_seen, r->keys, deadline);
      if (ms.ok()) {
        std::printf("%s: range %u served by LTC %s after %lld ms\n", what.c_str(), m.range,
                    m.to.c_str(), static_cast<long long>(ms.value()));
      } else {
        ++failed;
        std::printf("%s: range %u NOT served by LTC %s within %d s: %s\n", what.c_str(),
                    m.range, m.to.c_str(), FLAGS_timeout_s, ms.status().ToString().c_str());
      }
      std::fflush(stdout);
    }
  }
  if (failed > 0) {
    std::fprintf(stderr, "nova_admin: %s: %d ranges not moved or not served in time (see "
                 "above); re-run to try again\n", what.c_str(), failed);
    return kFailedExitCode;
  }
  if (!done_message.empty()) std::printf("%s\n", done_message.c_str());
  return 0;
}

// Changes the configuration by compare-and-set: `change` edits the one read and returns true
// to publish it (epoch bumped), false to leave it, or an error; re-read and re-applied when
// another writer came first (up to 10 times).
Status UpdateConfigWith(co::ConfigStore* store,
                        const std::function<nova::Result<bool>(co::ClusterConfig*)>& change) {
  for (int attempt = 0;; ++attempt) {
    int32_t version = 0;
    auto config = store->ReadConfig(&version);
    if (!config.ok()) return config.status();
    nova::Result<bool> write = change(&config.value());
    if (!write.ok()) return write.status();
    if (!write.value()) return Status::OK();
    config->epoch++;
    Status s = store->UpdateConfig(config.value(), version);
    if (s.code() == Status::Code::kAborted && attempt < 10) continue;
    return s;
  }
}

// remove-ltc after a live drain: drops the LTC from the configuration once it owns nothing.
int DropDrained(const co::ConfigStoreOptions& options, const std::string& ltc) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  s = UpdateConfigWith(&store, [&](co::ClusterConfig* c) -> nova::Result<bool> {
    if (c->ltcs.count(ltc) == 0) return false;
    if (!c->RangesOf(ltc).empty()) {
      return Status::IllegalState("remove-ltc: LTC " + ltc + " still owns ranges [" +
                                  JoinIds(c->RangesOf(ltc)) + "]; re-run");
    }
    c->ltcs.erase(ltc);
    c->ltc_incarnations.erase(ltc);
    return true;
  });
  if (!s.ok()) return Fail(s.code() == Status::Code::kIllegalState ? s : s.Prepend("remove-ltc"));
  std::printf("remove-ltc: LTC %s owns nothing and is out of the configuration: stop it now\n",
              ltc.c_str());
  return 0;
}

int Undrain(const co::ConfigStoreOptions& options, const std::string& ltc) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  bool was_draining = false;
  s = UpdateConfigWith(&store, [&](co::ClusterConfig* c) -> nova::Result<bool> {
    was_draining = c->draining.erase(ltc) > 0;
    return was_draining;
  });
  if (!s.ok()) return Fail(s);
  if (!was_draining) {
    std::printf("undrain-ltc: LTC %s is not draining\n", ltc.c_str());
  } else {
    std::printf("undrain-ltc: LTC %s takes ranges again (nova_admin rebalance gives it some)\n",
                ltc.c_str());
  }
  return 0;
}

// ---- StoCs -----------------------------------------------------------------------------

// drain-stoc and remove-stoc.
int DrainStoc(const co::ConfigStoreOptions& options, const std::string& stoc, bool remove) {
  const std::string what = remove ? "remove-stoc" : "drain-stoc";
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  uint64_t epoch = 0;
  bool removed_before = false;
  s = UpdateConfigWith(&store, [&](co::ClusterConfig* c) -> nova::Result<bool> {
    removed_before = c->stocs.count(stoc) == 0 && c->draining_stocs.count(stoc) > 0;
    auto next = co::PlanStocDrain(*c, stoc);
    if (!next.ok()) return next.status();
    const bool change = !(next.value() == *c);
    *c = std::move(next.value());
    epoch = c->epoch + (change ? 1 : 0);  // UpdateConfigWith bumps it
    return change;
  });
  if (!s.ok()) return Fail(s.Prepend(what));
  if (removed_before) {
    std::printf("%s: StoC %s is already out of the configuration (and stays draining)\n",
                what.c_str(), stoc.c_str());
    return 0;
  }
  std::printf("%s: StoC %s is draining from configuration epoch %llu\n", what.c_str(),
              stoc.c_str(), static_cast<unsigned long long>(epoch));
  std::fflush(stdout);
  if (!FLAGS_wait) {
    std::printf("%s: not waiting; nova_admin status shows the LTCs' progress%s\n", what.c_str(),
                remove ? ", re-run remove-stoc to remove it once drained" : "");
    return 0;
  }
  s = client::WaitStocDrained(&store, what, stoc, epoch, std::chrono::seconds(FLAGS_timeout_s));
  if (!s.ok()) return Fail(s);
  if (!remove) {
    std::printf("drain-stoc: StoC %s is drained and gets no new table copies (undrain-stoc "
                "lets it take some again; remove-stoc drops it)\n", stoc.c_str());
    return 0;
  }
  s = UpdateConfigWith(&store, [&](co::ClusterConfig* c) -> nova::Result<bool> {
    auto next = co::PlanStocRemoval(*c, stoc);
    if (!next.ok()) return next.status();
    const bool change = !(next.value() == *c);
    *c = std::move(next.value());
    return change;
  });
  if (!s.ok()) return Fail(s.Prepend(what));
  std::printf("remove-stoc: StoC %s holds nothing and is out of the configuration: stop it now "
              "(deploy/local_cluster.sh remove stoc --id %s does both); it stays draining, so "
              "while it runs it is listed again but never used\n", stoc.c_str(), stoc.c_str());
  return 0;
}

int UndrainStoc(const co::ConfigStoreOptions& options, const std::string& stoc) {
  co::ConfigStore store(options);
  Status s = Connect(&store);
  if (!s.ok()) return Fail(s);
  bool was_draining = false;
  s = UpdateConfigWith(&store, [&](co::ClusterConfig* c) -> nova::Result<bool> {
    was_draining = c->draining_stocs.erase(stoc) > 0;
    return was_draining;
  });
  if (!s.ok()) return Fail(s);
  if (!was_draining) {
    std::printf("undrain-stoc: StoC %s is not draining\n", stoc.c_str());
  } else {
    std::printf("undrain-stoc: StoC %s takes new table copies again (once it is in the "
                "configuration: registered)\n", stoc.c_str());
  }
  return 0;
}

int AddStoc() {
  std::printf(
      "add-stoc: a StoC is added by starting one; it registers in ZooKeeper, the coordinator\n"
      "adds it to the configuration, and every LTC places new table copies on it at once:\n"
      "  nova_stoc --zk=%s --cluster=%s --stoc_id=N --stoc_dir=DIR "
      "--cluster_secret_file=FILE [--listen_port=P]\n"
      "with an id N never used before in this cluster (an id removed by remove-stoc stays\n"
      "draining: undrain-stoc it first to reuse it). Locally: deploy/local_cluster.sh add --dir "
      "DIR stoc\n",
      FLAGS_zk.empty() ? "HOST:PORT" : FLAGS_zk.c_str(),
      FLAGS_cluster.empty() ? "NAME" : FLAGS_cluster.c_str());
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
  const std::set<std::string> commands = {
      "create-cluster", "status",     "show-config", "migrate-range", "drain-ltc",
      "undrain-ltc",    "remove-ltc", "rebalance",   "drain-stoc",    "undrain-stoc",
      "remove-stoc",    "add-stoc"};
  if (commands.count(command) == 0) return Usage("unknown command '" + command + "'");
  if (command == "add-stoc") return AddStoc();
  const bool stoc_command =
      command == "drain-stoc" || command == "undrain-stoc" || command == "remove-stoc";
  if (stoc_command && FLAGS_stoc.empty()) return Usage(command + " needs --stoc ID");
  if (!stoc_command && !FLAGS_stoc.empty()) {
    return Usage("--stoc only applies to drain-stoc, undrain-stoc and remove-stoc");
  }
  if (command == "migrate-range" && (FLAGS_range < 0 || FLAGS_range > UINT32_MAX || FLAGS_to.empty())) {
    return Usage("migrate-range needs --range ID (a range id, see nova_admin status) and --to LTC");
  }
  if ((command == "drain-ltc" || command == "undrain-ltc" || command == "remove-ltc") &&
      FLAGS_ltc.empty()) {
    return Usage(command + " needs --ltc ID");
  }
  if (FLAGS_timeout_s <= 0) return Usage("--timeout_s must be > 0");
  if (command != "create-cluster" &&
      (FLAGS_ranges != 0 || !FLAGS_split_points.empty() || !settings.empty())) {
    return Usage("--ranges, --split-points and --setting only apply to create-cluster");
  }
  auto options = co::ConfigStoreOptionsFromFlags();
  if (!options.ok()) return Usage(options.status().message());
  // The scaling commands' client waits for the moved ranges at their LTCs: a secret file
  // that cannot be read must stop them before they change anything.
  if (auto secret = client::ClientSecretFromFlags(); !secret.ok()) {
    return Usage(secret.status().ToString());
  }
  if (command == "create-cluster") return CreateCluster(options.value(), settings);
  if (command == "status") return PrintStatus(options.value());
  if (command == "show-config") return ShowConfig(options.value());
  if (command == "undrain-ltc") return Undrain(options.value(), FLAGS_ltc);
  if (command == "drain-stoc" || command == "remove-stoc") {
    return DrainStoc(options.value(), FLAGS_stoc, command == "remove-stoc");
  }
  if (command == "undrain-stoc") return UndrainStoc(options.value(), FLAGS_stoc);
  if (command == "migrate-range") {
    const auto range = static_cast<uint32_t>(FLAGS_range);
    const std::string to = FLAGS_to;
    return MoveRanges(options.value(), command,
                      [&](const co::ClusterConfig& c, const co::LiveMembers& live) {
                        return co::PlanMigration(c, live, range, to, MoveMode());
                      },
                      "");
  }
  if (command == "drain-ltc" || command == "remove-ltc") {
    const std::string ltc = FLAGS_ltc;
    const bool remove = command == "remove-ltc";
    const int rc = MoveRanges(
        options.value(), command,
        [&](const co::ClusterConfig& c,
            const co::LiveMembers& live) -> nova::Result<co::MovePlan> {
          if (remove && c.ltcs.count(ltc) == 0) return co::MovePlan{c, {}};  // done before
          auto plan = co::PlanDrain(c, live, ltc, MoveMode());
          // Out of the configuration once it owns nothing (live: after its migrations, see
          // below); it stays draining while it still runs (the coordinator lists it again as
          // long as it is registered).
          if (plan.ok() && remove && plan->next.RangesOf(ltc).empty()) plan->next.ltcs.erase(ltc);
          return plan;
        },
        remove ? "" : "drain-ltc: LTC " + ltc + " owns nothing and gets no ranges: it can be stopped");
    if (rc != 0 || !remove || FLAGS_dry_run) return rc;
    if (FLAGS_live && !FLAGS_wait) {
      std::printf("remove-ltc: LTC %s leaves the configuration once its migrations end: "
                  "re-run remove-ltc then\n", ltc.c_str());
      return 0;
    }
    return DropDrained(options.value(), ltc);
  }
  return MoveRanges(options.value(), command,
                    [](const co::ClusterConfig& c, const co::LiveMembers& live) {
                      return co::PlanRebalance(c, live, MoveMode());
                    },
                    "");
}
