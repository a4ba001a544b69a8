// acked_writer: a write workload that remembers every write the cluster acknowledged, and
// its verifier, for tests that kill whole clusters (tests/cluster_restart_itest.sh).
//
//   acked_writer write  --zk=H:P --cluster=NAME --out=FILE [--threads=4]
//                       [--keys_per_thread=250] [--writes_per_thread=0] [--seconds=0]
//   acked_writer verify --zk=H:P --cluster=NAME --in=FILE [--threads=4]
//
// write: thread t overwrites its keys in turn. Key j of thread t is one byte spreading the
// keys over every range split by first byte, then "w<t>-<j>"; the thread's n-th write is
// version n of its key, with value test::ValueFor(key, n) (which names key and version).
// Once a Put is acknowledged the thread appends "<hex key> <version>\n" to FILE with one
// write(2) on an O_APPEND descriptor: the line is whole or absent, and a kill -9 of the
// writer itself loses no line already written. A failed Put is not recorded (its outcome is
// unknown) and the thread goes on with its next write. Stops once every thread has
// --writes_per_thread acknowledged writes, after --seconds, or on SIGTERM/SIGINT (0: no
// such bound); prints the counts.
//
// verify: for every key in FILE its newest acknowledged version is its floor. Reads each
// key and accepts exactly ValueFor(key, v) with v >= floor (a later write that failed, or
// was cut off by a kill, may have been applied). Anything else is a lost write (not found),
// a stale value (v < floor) or a corrupted one (not ValueFor of its version): listed (the
// first 20) and counted, exit 1. Exit 0: "verified N keys"; 2: usage; 3: another error.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "client/cluster_uri.h"
#include "client/nova_client.h"
#include "common/hex.h"
#include "common/mutex.h"
#include "tests/util/write_checker.h"

DEFINE_string(zk, "", "ZooKeeper servers host:port[,host:port]");
DEFINE_string(cluster, "", "Cluster name in ZooKeeper");
DEFINE_string(out, "", "write: file the acknowledged writes are appended to");
DEFINE_string(in, "", "verify: file of acknowledged writes");
DEFINE_int32(threads, 4, "Writer (or reader) threads");
DEFINE_int32(keys_per_thread, 250, "write: keys each writer overwrites in turn");
DEFINE_int64(writes_per_thread, 0, "write: stop once each writer has this many acknowledged "
             "(0: no bound)");
DEFINE_int32(seconds, 0, "write: stop after this long, seconds (0: no bound)");
DEFINE_int32(timeout_ms, 2000, "Deadline of each operation, retries included, ms");

namespace {

constexpr int kVerifyFailedExit = 1;
constexpr int kUsageExit = 2;
constexpr int kErrorExit = 3;
// Mismatches printed by verify (all are counted).
constexpr int kMismatchesShown = 20;
// Spreads consecutive keys over the first-byte ranges (an odd step visits every byte).
constexpr int kFirstByteStep = 37;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int Usage(const std::string& why) {
  std::fprintf(stderr, "acked_writer: %s\n%s", why.c_str(),
               gflags::ProgramUsage());
  return kUsageExit;
}

std::string KeyFor(int thread, int j) {
  const int n = thread * FLAGS_keys_per_thread + j;
  std::string key(1, static_cast<char>((n * kFirstByteStep) & 0xff));
  return key + "w" + std::to_string(thread) + "-" + std::to_string(j);
}

// The version a value claims ("<version>|..."), or -1 if it names none.
int64_t VersionOf(const std::string& value) {
  const size_t bar = value.find('|');
  if (bar == 0 || bar == std::string::npos || bar > 20) return -1;
  int64_t v = 0;
  for (size_t i = 0; i < bar; ++i) {
    if (value[i] < '0' || value[i] > '9') return -1;
    v = v * 10 + (value[i] - '0');
  }
  return v;
}

int Write(nova::client::NovaClient* client) {
  const int fd = ::open(FLAGS_out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::perror(("acked_writer: " + FLAGS_out).c_str());
    return kErrorExit;
  }
  const auto deadline = FLAGS_seconds > 0
                            ? std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_seconds)
                            : std::chrono::steady_clock::time_point::max();
  std::atomic<uint64_t> acked{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < FLAGS_threads; ++t) {
    threads.emplace_back([&, t] {
      int64_t mine = 0;
      for (uint64_t n = 0;; ++n) {
        if (g_stop.load() || std::chrono::steady_clock::now() >= deadline) return;
        if (FLAGS_writes_per_thread > 0 && mine >= FLAGS_writes_per_thread) return;
        const std::string key = KeyFor(t, static_cast<int>(n % FLAGS_keys_per_thread));
        nova::Status s = client->Put(key, nova::test::ValueFor(key, n));
        if (!s.ok()) {
          failed.fetch_add(1);
          continue;
        }
        const std::string line = nova::HexEncode(key) + " " + std::to_string(n) + "\n";
        if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          std::perror("acked_writer: appending to the output");
          std::_Exit(kErrorExit);
        }
        ++mine;
        acked.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  ::close(fd);
  std::printf("acknowledged %llu writes, %llu failed\n",
              static_cast<unsigned long long>(acked.load()),
              static_cast<unsigned long long>(failed.load()));
  return 0;
}

int Verify(nova::client::NovaClient* client) {
  std::ifstream in(FLAGS_in);
  if (!in) return Usage("cannot read --in=" + FLAGS_in);
  std::map<std::string, int64_t> floor;  // key -> newest acknowledged version
  std::string hex;
  int64_t version;
  while (in >> hex >> version) {
    auto key = nova::HexDecode(hex);
    if (!key.ok()) {
      std::fprintf(stderr, "acked_writer: bad line in %s: %s\n", FLAGS_in.c_str(), hex.c_str());
      return kErrorExit;
    }
    auto [it, fresh] = floor.emplace(key.value(), version);
    if (!fresh) it->second = std::max(it->second, version);
  }
  std::vector<std::pair<std::string, int64_t>> keys(floor.begin(), floor.end());
  nova::Mutex mu;
  std::vector<std::string> mismatches;
  uint64_t lost = 0, stale = 0, corrupted = 0;
  std::string error;
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, FLAGS_threads); ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < keys.size(); i = next++) {
        const auto& [key, want] = keys[i];
        auto got = client->Get(key);
        std::string what;
        nova::MutexLock l(&mu);
        if (got.status().IsNotFound()) {
          ++lost;
          what = "lost (not found)";
        } else if (!got.ok()) {
          if (error.empty()) error = "reading " + nova::HexEncode(key) + ": " + got.status().ToString();
          continue;
        } else {
          const int64_t v = VersionOf(got.value());
          if (v < 0 || got.value() != nova::test::ValueFor(key, static_cast<uint64_t>(v))) {
            ++corrupted;
            what = "corrupted value";
          } else if (v < want) {
            ++stale;
            what = "stale: version " + std::to_string(v);
          } else {
            continue;
          }
        }
        if (mismatches.size() < kMismatchesShown) {
          mismatches.push_back(nova::HexEncode(key) + " (acknowledged version " +
                               std::to_string(want) + "): " + what);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!error.empty()) {
    std::fprintf(stderr, "acked_writer: %s\n", error.c_str());
    return kErrorExit;
  }
  if (lost + stale + corrupted > 0) {
    for (const auto& m : mismatches) std::printf("MISMATCH %s\n", m.c_str());
    std::printf("FAILED: of %zu keys, %llu lost, %llu stale, %llu corrupted\n", keys.size(),
                static_cast<unsigned long long>(lost), static_cast<unsigned long long>(stale),
                static_cast<unsigned long long>(corrupted));
    return kVerifyFailedExit;
  }
  std::printf("verified %zu keys\n", keys.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "acked_writer write --zk=H:P --cluster=NAME --out=FILE [--threads=N] "
      "[--keys_per_thread=N] [--writes_per_thread=N] [--seconds=S]\n"
      "acked_writer verify --zk=H:P --cluster=NAME --in=FILE [--threads=N]\n"
      "(tests/util/acked_writer.cc says what each checks)\n");
  gflags::SetCommandLineOptionWithMode("minloglevel", "2", gflags::SET_FLAGS_DEFAULT);
  gflags::SetCommandLineOptionWithMode("logtostderr", "true", gflags::SET_FLAGS_DEFAULT);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (argc != 2) return Usage("want one command: write or verify");
  const std::string cmd = argv[1];
  if (cmd != "write" && cmd != "verify") return Usage("unknown command " + cmd);
  if (FLAGS_zk.empty() || FLAGS_cluster.empty()) return Usage("--zk and --cluster are required");
  if (cmd == "write" && FLAGS_out.empty()) return Usage("write needs --out=FILE");
  if (cmd == "verify" && FLAGS_in.empty()) return Usage("verify needs --in=FILE");
  if (FLAGS_threads < 1 || FLAGS_keys_per_thread < 1) {
    return Usage("--threads and --keys_per_thread must be positive");
  }
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGTERM, OnSignal);
  ::signal(SIGINT, OnSignal);

  nova::client::ClusterLocator where;
  where.zk = FLAGS_zk;
  where.cluster = FLAGS_cluster;
  nova::client::ClientOptions o;
  o.timeout = std::chrono::milliseconds(FLAGS_timeout_ms);
  o.connections_per_ltc = 2;
  auto conn = nova::client::ConnectToCluster(where, o);
  if (!conn.ok()) {
    std::fprintf(stderr, "acked_writer: %s\n", conn.status().ToString().c_str());
    return kErrorExit;
  }
  nova::client::NovaClient* client = conn.value()->client.get();
  return cmd == "write" ? Write(client) : Verify(client);
}
