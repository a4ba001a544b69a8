// transport_bench: exchange-transport throughput and latency between two processes.
//
// The benchmark starts a copy of itself (--serve) as the target process, connects to it over
// loopback and measures:
//  - one-sided WRITE and READ throughput for 4 KiB .. 4 MiB blocks, with a window of
//    outstanding operations spread over the lanes;
//  - round-trip latency of 64 B messages (Send, the target echoes, wait for the echo).
// Prints a table, or with --json one JSON object (names carry units).
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "benchmarks/bench_util.h"
#include "common/clock.h"
#include "common/transport/transport.h"
#include "tests/util/test_util.h"

DEFINE_bool(serve, false, "Internal: run as the target process");
DEFINE_string(bench_transport, "tcp", "Backend to measure: tcp or verbs");
DEFINE_int32(bench_xchg_threads, 2, "Exchange threads in both processes");
DEFINE_double(seconds_per_size, 1.0, "Measuring time per block size and direction, seconds");
DEFINE_int32(window_mb, 32, "Bytes kept in flight per throughput test, MiB");
DEFINE_int32(rtt_messages, 20000, "64 B round trips measured for the latency figure");
DEFINE_bool(json, false, "Print one JSON object instead of a table");

namespace {

using namespace nova;
using namespace nova::transport;
using nova::bench::DeadlineAfter;
using nova::bench::Percentile;
using nova::bench::SecondsSince;
using nova::bench::SizeName;

constexpr uint64_t kRegionBytes = 64ull << 20;  // the target's region; also the local buffer
constexpr char kBenchSecret[] = "transport-bench-secret";
constexpr size_t kRttMessageBytes = 64;
constexpr int kRttWarmup = 1000;
constexpr uint64_t kBlockSizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};

// Target side: announces its region and echoes messages.
class ServeHandler : public TransportHandler {
 public:
  void OnPeerUp(const PeerInfo& peer) override {
    std::string msg = "REGION " + std::to_string(region.Remote().addr) + " " +
                      std::to_string(region.rkey);
    transport->Send(peer.id, msg, [](const Status&) {}).IgnoreError();
  }
  void OnMessage(PeerId peer, std::string& payload) override {
    transport->Send(peer, payload, [](const Status&) {}).IgnoreError();
  }
  Transport* transport = nullptr;
  MemoryRegion region;
};

// Initiator side: collects the region announcement and echoes.
class ClientHandler : public TransportHandler {
 public:
  void OnMessage(PeerId, std::string& payload) override {
    std::lock_guard l(mu);
    if (payload.rfind("REGION ", 0) == 0) {
      unsigned long long addr = 0;
      unsigned rkey = 0;
      if (std::sscanf(payload.c_str(), "REGION %llu %u", &addr, &rkey) == 2) {
        remote = RemoteAddr{addr, rkey};
      }
    } else {
      ++echoes;
    }
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  RemoteAddr remote;
  uint64_t echoes = 0;
};

TransportOptions MakeOptions(const std::string& name) {
  TransportOptions o;
  CHECK(ParseBackend(FLAGS_bench_transport, &o.backend).ok()) << "--bench_transport";
  o.node_name = name;
  o.cluster_secret = kBenchSecret;
  o.xchg_threads = FLAGS_bench_xchg_threads;
  return o;
}

int Serve() {
  ServeHandler handler;
  auto t = NewTransport(MakeOptions("bench-target"), &handler);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Transport> transport = std::move(t.value());
  handler.transport = transport.get();
  std::unique_ptr<char[]> mem(new char[kRegionBytes]());
  Status s = transport->Init();
  if (s.ok()) {
    auto r = transport->RegisterMemory(mem.get(), kRegionBytes, kRemoteRead | kRemoteWrite);
    s = r.status();
    if (r.ok()) handler.region = r.value();
  }
  if (s.ok()) s = transport->Start();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("LISTEN %s\n", transport->listen_address().c_str());
  std::fflush(stdout);
  while (true) ::pause();
}

// Keeps up to `window` ops in flight until `seconds` pass; returns MB/s (10^6 bytes).
double MeasureThroughput(Transport* t, PeerId peer, const MemoryRegion& local, RemoteAddr remote,
                         uint64_t block, bool write) {
  const uint64_t slots = kRegionBytes / block;
  const uint64_t window =
      std::max<uint64_t>(2, std::min<uint64_t>(slots, (uint64_t(FLAGS_window_mb) << 20) / block));
  std::mutex mu;
  std::condition_variable cv;
  uint64_t in_flight = 0, completed = 0;
  Status first_error;
  auto done = [&](const Status& s) {
    std::lock_guard l(mu);
    --in_flight;
    ++completed;
    if (!s.ok() && first_error.ok()) first_error = s;
    cv.notify_one();
  };
  const auto start = MonoNow();
  const auto stop_at = DeadlineAfter(FLAGS_seconds_per_size);
  uint64_t posted = 0;
  while (MonoNow() < stop_at) {
    {
      std::unique_lock l(mu);
      cv.wait(l, [&] { return in_flight < window; });
      ++in_flight;
    }
    const uint64_t off = (posted % slots) * block;
    const int lane = static_cast<int>(posted % t->options().xchg_threads);
    RemoteAddr where{remote.addr + off, remote.rkey};
    Status s = write ? t->Write(peer, local, off, block, where, std::nullopt, done, lane)
                     : t->Read(peer, where, block, local, off, done, lane);
    CHECK(s.ok()) << s.ToString();
    ++posted;
  }
  std::unique_lock l(mu);
  cv.wait(l, [&] { return in_flight == 0; });
  const double secs = SecondsSince(start);
  CHECK(first_error.ok()) << first_error.ToString();
  return static_cast<double>(completed * block) / secs / 1e6;
}

int Run(const char* self) {
  test::ChildProcess child;
  CHECK(child.Start({self, "--serve", "--bench_transport=" + FLAGS_bench_transport,
                     "--bench_xchg_threads=" + std::to_string(FLAGS_bench_xchg_threads)}));
  std::string line;
  if (!child.ReadLine(&line) || line.rfind("LISTEN ", 0) != 0) {
    std::fprintf(stderr, "target process did not start (%s)\n", line.c_str());
    return 1;
  }
  ClientHandler handler;
  auto t = NewTransport(MakeOptions("bench-initiator"), &handler);
  CHECK(t.ok()) << t.status().ToString();
  std::unique_ptr<Transport> transport = std::move(t.value());
  Status s = transport->Init();
  if (s.ok()) s = transport->Start();
  CHECK(s.ok()) << s.ToString();
  auto peer_or = transport->Connect(line.substr(7));
  CHECK(peer_or.ok()) << peer_or.status().ToString();
  const PeerId peer = peer_or.value();
  {
    std::unique_lock l(handler.mu);
    CHECK(handler.cv.wait_for(l, std::chrono::seconds(10), [&] { return handler.remote.rkey != 0; }))
        << "no region announcement from the target";
  }
  std::unique_ptr<char[]> mem(new char[kRegionBytes]());
  std::memset(mem.get(), 0x42, kRegionBytes);
  auto local = transport->RegisterMemory(mem.get(), kRegionBytes, kLocalOnly);
  CHECK(local.ok());

  nlohmann::ordered_json out;
  out["transport"] = FLAGS_bench_transport;
  out["xchg_threads"] = FLAGS_bench_xchg_threads;
  struct Row {
    uint64_t block;
    double write_mbps, read_mbps;
  };
  std::vector<Row> rows;
  for (uint64_t block : kBlockSizes) {
    Row r{block, 0, 0};
    r.write_mbps = MeasureThroughput(transport.get(), peer, local.value(), handler.remote, block, true);
    r.read_mbps = MeasureThroughput(transport.get(), peer, local.value(), handler.remote, block, false);
    out["write_MBps_" + SizeName(block)] = r.write_mbps;
    out["read_MBps_" + SizeName(block)] = r.read_mbps;
    rows.push_back(r);
  }

  // Round trips of 64 B messages, one at a time.
  std::string msg(kRttMessageBytes, 'r');
  std::vector<double> rtts;
  rtts.reserve(FLAGS_rtt_messages);
  for (int i = 0; i < kRttWarmup + FLAGS_rtt_messages; ++i) {
    uint64_t expect;
    {
      std::lock_guard l(handler.mu);
      expect = handler.echoes + 1;
    }
    const uint64_t t0 = MonoNanos();
    CHECK(transport->Send(peer, msg, [](const Status&) {}, 0).ok());
    std::unique_lock l(handler.mu);
    CHECK(handler.cv.wait_for(l, std::chrono::seconds(10), [&] { return handler.echoes >= expect; }))
        << "echo lost";
    if (i >= kRttWarmup) rtts.push_back(static_cast<double>(MonoNanos() - t0) / 1e3);
  }
  const double p50 = Percentile(rtts, 50), p99 = Percentile(rtts, 99);
  out["rtt_us_p50_64B"] = p50;
  out["rtt_us_p99_64B"] = p99;

  if (FLAGS_json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("transport_bench: %s backend, %d xchg threads, two processes over loopback\n",
                FLAGS_bench_transport.c_str(), FLAGS_bench_xchg_threads);
    std::printf("%-8s %14s %14s\n", "block", "WRITE MB/s", "READ MB/s");
    for (auto& r : rows) {
      std::printf("%-8s %14.0f %14.0f\n", SizeName(r.block).c_str(), r.write_mbps, r.read_mbps);
    }
    std::printf("64 B round trip: p50 %.1f us, p99 %.1f us (%d messages)\n", p50, p99,
                FLAGS_rtt_messages);
  }
  transport->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("Measures exchange-transport throughput and latency between two "
                          "processes over loopback.\nUsage: transport_bench [--json]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = FLAGS_serve ? 2 : 1;  // keep the table readable
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_serve) return Serve();
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK(n > 0);
  self[n] = '\0';
  return Run(self);
}
