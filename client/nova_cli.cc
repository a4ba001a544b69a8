// nova_cli: a command-line client of a Nova-LSM cluster (docs/ltc_server.md "nova_cli").
//
//   nova_cli --ltc=H:P[,H:P] [--client_secret_file=F] [--hex] [--hex_values] COMMAND ...
//     put KEY VALUE | get KEY | delete KEY | scan START [--limit=N] | count [START [END]] | stats
//
// Exit status: 0 success; 1 key not found (get); 2 usage error; 3 any other error (its
// text on stderr).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/client_flags.h"
#include "client/nova_client.h"
#include "client/zk_routing_source.h"
#include "common/hex.h"
#include "common/split.h"
#include "coordinator/config_store.h"

DEFINE_string(ltc, "127.0.0.1:7100", "LTC addresses host:port, comma-separated");
DEFINE_string(zk, "",
              "ZooKeeper servers host:port[,host:port]: route by the cluster configuration "
              "there (with --cluster) instead of asking the --ltc list");
DEFINE_string(cluster, "", "Cluster name in ZooKeeper (with --zk)");
DEFINE_string(zk_auth_file, "",
              "With --zk: file holding the cluster's ZooKeeper digest credential user:password. "
              "Accepted but not needed: nova_cli only reads ZooKeeper, which needs none");
DEFINE_bool(hex, false, "Keys are given and printed as hex");
DEFINE_bool(hex_values, false, "Values are given and printed as hex");
DEFINE_uint64(limit, 100, "scan: most pairs printed");
DEFINE_int32(timeout_ms, 10000, "Deadline of each operation, retries included, ms");

namespace {

constexpr int kNotFoundExit = 1;
constexpr int kUsageExit = 2;
constexpr int kErrorExit = 3;

int Fail(const nova::Status& s) {
  std::fprintf(stderr, "nova_cli: %s\n", s.ToString().c_str());
  return kErrorExit;
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "nova_cli: %s\n%s", why.c_str(), gflags::ProgramUsage());
  return kUsageExit;
}

// Decodes a key or value given on the command line.
bool Input(const std::string& arg, bool hex, std::string* out, std::string* err) {
  if (!hex) {
    *out = arg;
    return true;
  }
  auto r = nova::HexDecode(arg);
  if (!r.ok()) {
    *err = r.status().ToString();
    return false;
  }
  *out = r.value();
  return true;
}

std::string Output(const std::string& bytes, bool hex) {
  return hex ? nova::HexEncode(bytes) : bytes;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "nova_cli [--ltc=H:P[,H:P] | --zk=H:P --cluster=NAME] [--client_secret_file=FILE] "
      "[--hex] [--hex_values] COMMAND\n"
      "  put KEY VALUE        store VALUE under KEY\n"
      "  get KEY              print KEY's value (exit 1 and 'not found' if absent)\n"
      "  delete KEY           remove KEY\n"
      "  scan START [--limit=N]  print up to N 'key<TAB>value' lines from START on\n"
      "  count [START [END]]  number of live keys in [START, END)\n"
      "  stats                every LTC's range statistics, then where its requests'\n"
      "                       time goes (CPU, context switches, waiting, engine, response)\n");
  // A command-line tool: only errors from the libraries' logging (--minloglevel=0 for all).
  gflags::SetCommandLineOptionWithMode("minloglevel", "2", gflags::SET_FLAGS_DEFAULT);
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_zk.empty() != FLAGS_cluster.empty()) {
    return Usage("--zk and --cluster go together");
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage("missing COMMAND");
  const std::string cmd = args[0];

  nova::client::ClientOptions o;
  // With --zk the configuration names the LTCs: `stats` must not also ask --ltc's default.
  if (FLAGS_zk.empty()) o.ltcs = nova::SplitNonEmpty(FLAGS_ltc, ',');
  auto secret = nova::client::ClientSecretFromFlags();
  if (!secret.ok()) return Fail(secret.status());
  o.client_secret = secret.value();
  std::unique_ptr<nova::coordinator::ConfigStore> store;
  std::unique_ptr<nova::client::ZkRoutingSource> zk_routing;
  if (!FLAGS_zk.empty()) {
    nova::coordinator::ConfigStoreOptions zo;
    zo.zk_servers = FLAGS_zk;
    zo.cluster = FLAGS_cluster;
    zo.op_timeout = std::chrono::milliseconds(FLAGS_timeout_ms);
    if (!FLAGS_zk_auth_file.empty()) {
      auto auth = nova::coordinator::ReadZkAuthFile(FLAGS_zk_auth_file, "--zk_auth_file");
      if (!auth.ok()) return Fail(auth.status());
      zo.zk_auth = auth.value();
    }
    store = std::make_unique<nova::coordinator::ConfigStore>(zo);
    nova::Status zs = store->Init();
    if (!zs.ok()) return Fail(zs.Prepend("ZooKeeper"));
    zk_routing = std::make_unique<nova::client::ZkRoutingSource>(
        store.get(), std::chrono::milliseconds(FLAGS_timeout_ms));
    o.routing_source = zk_routing.get();
  }
  o.timeout = std::chrono::milliseconds(FLAGS_timeout_ms);
  o.connections_per_ltc = 1;
  nova::client::NovaClient client(o);
  nova::Status s = client.Init();
  if (!s.ok()) return Fail(s);

  std::string key, value, err;
  auto need = [&](size_t n) { return args.size() == n + 1; };
  if (cmd == "put") {
    if (!need(2)) return Usage("put KEY VALUE");
    if (!Input(args[1], FLAGS_hex, &key, &err) || !Input(args[2], FLAGS_hex_values, &value, &err)) {
      return Usage(err);
    }
    s = client.Put(key, value);
    return s.ok() ? 0 : Fail(s);
  }
  if (cmd == "get") {
    if (!need(1)) return Usage("get KEY");
    if (!Input(args[1], FLAGS_hex, &key, &err)) return Usage(err);
    auto r = client.Get(key);
    if (!r.ok()) {
      if (r.status().IsNotFound()) {
        std::fprintf(stderr, "not found\n");
        return kNotFoundExit;
      }
      return Fail(r.status());
    }
    std::cout << Output(r.value(), FLAGS_hex_values) << "\n";
    return 0;
  }
  if (cmd == "delete") {
    if (!need(1)) return Usage("delete KEY");
    if (!Input(args[1], FLAGS_hex, &key, &err)) return Usage(err);
    s = client.Delete(key);
    return s.ok() ? 0 : Fail(s);
  }
  if (cmd == "scan") {
    if (!need(1)) return Usage("scan START [--limit=N]");
    if (!Input(args[1], FLAGS_hex, &key, &err)) return Usage(err);
    std::vector<std::pair<std::string, std::string>> pairs;
    s = client.Scan(key, FLAGS_limit, &pairs);
    if (!s.ok()) return Fail(s);
    for (const auto& [k, v] : pairs) {
      std::cout << Output(k, FLAGS_hex) << "\t" << Output(v, FLAGS_hex_values) << "\n";
    }
    return 0;
  }
  if (cmd == "count") {
    if (args.size() > 3) return Usage("count [START [END]]");
    std::string start, end;
    if (args.size() > 1 && !Input(args[1], FLAGS_hex, &start, &err)) return Usage(err);
    if (args.size() > 2 && !Input(args[2], FLAGS_hex, &end, &err)) return Usage(err);
    auto n = client.Count(start, end);
    if (!n.ok()) return Fail(n.status());
    std::cout << n.value() << "\n";
    return 0;
  }
  if (cmd == "stats") {
    auto r = client.Stats();
    if (!r.ok()) return Fail(r.status());
    std::cout << r.value();
    return 0;
  }
  return Usage("unknown command '" + cmd + "'");
}
