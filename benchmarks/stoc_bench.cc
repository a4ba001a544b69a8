// stoc_bench: StoC throughput and latency, measured against real nova_stoc processes.
//
// The benchmark starts kStocs nova_stoc daemons (from the build's bin directory, each with
// its own data directory, over loopback), connects one StocClient and measures:
//  - persistent-file append throughput for 64 KiB .. 16 MiB blocks, to 1 StoC and to 3
//    StoCs. With 3, block k of the stream goes to StoC k mod 3: one appender thread per
//    StoC, each appending to its own file, as a table's fragments are scattered (rho = 3);
//  - read throughput of the blocks just written, by --reader_threads threads picking blocks
//    at random (spread over the StoCs the blocks live on);
//  - latency of 4 KiB random reads, one at a time, of persistent blocks (a request served
//    by a StoC storage thread) and of in-memory blocks (a one-sided READ).
// Every append is durable when acknowledged (fdatasync, group commit per file), so the
// data directories should be on a real disk: a tmpfs /tmp is avoided by default. Reads
// come back from the StoC's page cache (the blocks were just written): they measure the
// read path, not the device.
// Prints a table, or with --json one JSON object (names carry units; MB = 10^6 bytes).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "stoc/file_catalog.h"
#include "stoc/stoc_client.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

DEFINE_bool(json, false, "Print one JSON object instead of a table");
DEFINE_double(seconds_per_case, 1.0,
              "Measuring time of each case (block size x StoC count, or latency kind), seconds");
DEFINE_string(stoc_dir_base, "/tmp",
              "Directory under which the StoCs' data directories are made (and removed at "
              "the end). If left at its default and /tmp is a tmpfs, /var/tmp is used instead "
              "(fdatasync on tmpfs is free and would flatter the figures)");
DEFINE_int32(reader_threads, 4, "Client threads reading blocks in the read-throughput cases");
DEFINE_bool(keep_going, false,
            "When a case fails, report it and go on with the next (exit status is still 1)");

namespace {

using namespace nova;
using nova::stoc::BlockHandle;
using nova::stoc::FileKind;
using nova::stoc::StocClient;
using nova::stoc::StocFile;

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kMiB = 1ull << 20;
// StoCs started; the 1-StoC cases use the first.
constexpr uint32_t kStocs = 3;
constexpr uint32_t kStocCounts[] = {1, kStocs};
constexpr uint64_t kBlockSizes[] = {64 * kKiB, 256 * kKiB, 1 * kMiB, 4 * kMiB, 16 * kMiB};
// The largest block; the daemons' --stoc_max_block_mb.
constexpr uint64_t kMaxBlockBytes = 16 * kMiB;
// Latency cases: block size, and how many blocks make the working set (8 MiB).
constexpr uint64_t kLatencyBlockBytes = 4 * kKiB;
constexpr uint64_t kLatencyBlocks = 2048;
constexpr int kLatencyWarmupReads = 100;
// Bounds on every measuring loop besides --seconds_per_case: ops per case, and bytes
// appended per case (also bounds the disk space one case uses: its files are deleted after).
constexpr uint64_t kMaxOpsPerCase = 200000;
constexpr uint64_t kMaxBytesPerCase = 4ull << 30;
// Each appender writes at least this many blocks, so the read case has something to read
// even when one append takes longer than the case.
constexpr uint64_t kMinBlocksPerAppender = 2;
// Lanes per peer; the daemons and the client must agree.
constexpr int kXchgThreads = 2;
constexpr auto kDaemonStartTimeout = std::chrono::seconds(20);
constexpr auto kDaemonShutdownTimeout = std::chrono::seconds(10);
constexpr char kDefaultDirBase[] = "/tmp";
constexpr char kFallbackDirBase[] = "/var/tmp";

std::string SizeName(uint64_t b) {
  return b >= kMiB ? std::to_string(b / kMiB) + "MiB" : std::to_string(b / kKiB) + "KiB";
}

std::string CaseName(uint64_t block, uint32_t stocs) {
  return SizeName(block) + "_" + std::to_string(stocs) + "stoc";
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1))];
}

MonoTime DeadlineAfter(double seconds) {
  return MonoNow() +
         std::chrono::duration_cast<MonoClock::duration>(std::chrono::duration<double>(seconds));
}

double SecondsSince(MonoTime start) {
  return std::chrono::duration<double>(MonoNow() - start).count();
}

// ---- Where the data directories go ---------------------------------------------------

bool IsTmpfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

// "<fstype> (<device> mounted on <mount point>)" for the mount holding `path`, from
// /proc/self/mounts (the longest mount point that prefixes the path).
std::string DescribeFilesystem(const std::string& path) {
  std::error_code ec;
  const std::string real = std::filesystem::canonical(path, ec).string();
  std::ifstream mounts("/proc/self/mounts");
  std::string line, best_point, best;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, point, type;
    if (!(fields >> device >> point >> type)) continue;
    const bool under =
        real == point || point == "/" ||
        (real.rfind(point, 0) == 0 && real.size() > point.size() && real[point.size()] == '/');
    if (under && point.size() >= best_point.size()) {
      best_point = point;
      best = type + " (" + device + " mounted on " + point + ")";
    }
  }
  return best.empty() ? "unknown filesystem" : best;
}

// The --stoc_dir_base to use: the flag as given, or its default unless that is a tmpfs.
std::string ChooseDirBase() {
  const bool is_default = gflags::GetCommandLineFlagInfoOrDie("stoc_dir_base").is_default;
  if (!is_default || !IsTmpfs(kDefaultDirBase)) {
    if (IsTmpfs(FLAGS_stoc_dir_base)) {
      std::fprintf(stderr,
                   "stoc_bench: warning: %s is a tmpfs; append figures will be "
                   "flattered (fdatasync is free there)\n",
                   FLAGS_stoc_dir_base.c_str());
    }
    return FLAGS_stoc_dir_base;
  }
  if (!IsTmpfs(kFallbackDirBase)) return kFallbackDirBase;
  return test::BinDir();  // the build directory, normally on a real disk
}

// ---- The StoC processes --------------------------------------------------------------

// kStocs nova_stoc processes under one scratch directory. The destructor stops them
// (SIGTERM, then SIGKILL after kDaemonShutdownTimeout) and removes the directory, on
// every path out of the benchmark. Not thread-safe.
class StocCluster {
 public:
  StocCluster() = default;
  ~StocCluster() {
    for (auto& d : daemons_) {
      Status s = d->Shutdown();
      if (!s.ok()) std::fprintf(stderr, "stoc_bench: %s\n", s.ToString().c_str());
    }
    daemons_.clear();
    if (!root_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
      if (ec)
        std::fprintf(stderr, "stoc_bench: cannot remove %s: %s\n", root_.c_str(),
                     ec.message().c_str());
    }
  }
  StocCluster(const StocCluster&) = delete;
  StocCluster& operator=(const StocCluster&) = delete;

  // Makes <base>/nova-stoc-bench-XXXXXX, writes the cluster secret (mode 0600) and starts
  // StoCs 1..kStocs. `file_buffer_mb` is each StoC's --stoc_file_buffer_mb.
  Status Start(const std::string& base, uint64_t file_buffer_mb) {
    std::string tmpl = base + "/nova-stoc-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
    root_ = tmpl;
    auto secret_file = test::WriteClusterSecret(root_);
    if (!secret_file.ok()) return secret_file.status();
    std::ifstream in(secret_file.value());
    std::getline(in, secret_);  // the daemons strip the trailing newline too
    if (secret_.empty()) return Status::IOError("cannot read back " + secret_file.value());
    for (uint32_t id = 1; id <= kStocs; ++id) {
      test::ExternalDaemonOptions o;
      o.binary = "nova_stoc";
      o.id = "stoc-" + std::to_string(id);
      o.data_dir = root_ + "/" + o.id;
      o.data_dir_flag = "stoc_dir";
      o.cluster_secret_file = secret_file.value();
      o.extra_flags = {"--stoc_id=" + std::to_string(id),
                       "--stoc_file_buffer_mb=" + std::to_string(file_buffer_mb),
                       "--stoc_max_block_mb=" + std::to_string(kMaxBlockBytes / kMiB),
                       "--xchg_threads=" + std::to_string(kXchgThreads),
                       "--minloglevel=1"};  // warnings and errors, into <data_dir>/<id>.log
      o.start_timeout = kDaemonStartTimeout;
      o.shutdown_timeout = kDaemonShutdownTimeout;
      daemons_.push_back(std::make_unique<test::ExternalDaemon>(o));
      NOVA_RETURN_NOT_OK(daemons_.back()->Start());
    }
    return Status::OK();
  }

  const std::string& root() const { return root_; }
  const std::string& secret() const { return secret_; }
  // StoC `id` (1-based). REQUIRES: Start() succeeded.
  const std::string& address(uint32_t id) const { return daemons_[id - 1]->address(); }

 private:
  std::string root_;
  std::string secret_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> daemons_;
};

// ---- The client ----------------------------------------------------------------------

// A client process's side: transport, RPC endpoint, StocClient and registered buffers (one
// source of kMaxBlockBytes, one destination of kMaxBlockBytes per reader thread).
// Thread-safe after Init(): the buffers are read (source) or owned by one thread (dst).
class BenchClient {
 public:
  BenchClient() = default;
  ~BenchClient() {
    if (transport_) transport_->Shutdown();  // no completion runs after this
  }
  BenchClient(const BenchClient&) = delete;
  BenchClient& operator=(const BenchClient&) = delete;

  Status Init(const StocCluster& cluster, int reader_threads) {
    transport::TransportOptions o;
    o.node_name = "stoc-bench";
    o.cluster_secret = cluster.secret();
    o.xchg_threads = kXchgThreads;
    auto t = transport::NewTransport(o, &endpoint_);
    if (!t.ok()) return t.status();
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    client_ = std::make_unique<StocClient>(&endpoint_);  // before the transport starts
    NOVA_RETURN_NOT_OK(transport_->Init());
    NOVA_RETURN_NOT_OK(transport_->Start());
    for (uint32_t id = 1; id <= kStocs; ++id) {
      NOVA_RETURN_NOT_OK(client_->AddStoc(id, cluster.address(id)));
    }
    // Incompressible source bytes (the same for every block).
    src_mem_.reset(new char[kMaxBlockBytes]);
    std::mt19937_64 rng(1);
    for (uint64_t i = 0; i < kMaxBlockBytes; i += sizeof(uint64_t)) {
      const uint64_t v = rng();
      std::memcpy(src_mem_.get() + i, &v, sizeof(v));
    }
    auto src = transport_->RegisterMemory(src_mem_.get(), kMaxBlockBytes, transport::kLocalOnly);
    if (!src.ok()) return src.status();
    src_ = src.value();
    for (int i = 0; i < reader_threads; ++i) {
      dst_mem_.emplace_back(new char[kMaxBlockBytes]());
      auto dst = transport_->RegisterMemory(dst_mem_.back().get(), kMaxBlockBytes,
                                            transport::kRemoteWrite);
      if (!dst.ok()) return dst.status();
      dst_.push_back(dst.value());
    }
    return Status::OK();
  }

  StocClient* client() { return client_.get(); }
  const transport::MemoryRegion& src() const { return src_; }
  // The destination buffer of reader `i`. REQUIRES: i < reader_threads given to Init().
  const transport::MemoryRegion& dst(int i) const { return dst_[i]; }

 private:
  // Declared first so they outlive the transport that has them registered.
  std::unique_ptr<char[]> src_mem_;
  std::vector<std::unique_ptr<char[]>> dst_mem_;
  rpc::RpcEndpoint endpoint_;  // outlives transport_ and client_
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<StocClient> client_;
  transport::MemoryRegion src_;
  std::vector<transport::MemoryRegion> dst_;
};

// Names of the files a case created; deletes them when the case ends, however it ends.
class CaseFiles {
 public:
  explicit CaseFiles(StocClient* client) : client_(client) {}
  ~CaseFiles() {
    for (auto& [stoc, name] : files_) client_->Delete(stoc, name).IgnoreError();
  }
  CaseFiles(const CaseFiles&) = delete;
  CaseFiles& operator=(const CaseFiles&) = delete;

  Result<std::unique_ptr<StocFile>> Open(uint32_t stoc, const std::string& name, FileKind kind,
                                         uint64_t slot_bytes) {
    stoc::OpenOptions o;
    o.slot_bytes = slot_bytes;
    auto f = client_->Open(stoc, name, kind, o);
    if (f.ok()) files_.emplace_back(stoc, name);
    return f;
  }

 private:
  StocClient* const client_;  // must outlive this
  std::vector<std::pair<uint32_t, std::string>> files_;
};

// ---- Cases ---------------------------------------------------------------------------

struct ThreadResult {
  Status status;
  uint64_t bytes = 0;
  std::vector<BlockHandle> blocks;
};

// Appends `block`-byte blocks to `stocs` StoCs (one thread and one file each) for
// --seconds_per_case. Returns MB/s; the blocks written go to *written.
Result<double> MeasureAppend(BenchClient* bench, CaseFiles* files, uint64_t block, uint32_t stocs,
                             std::vector<BlockHandle>* written) {
  std::vector<std::unique_ptr<StocFile>> handles;
  for (uint32_t id = 1; id <= stocs; ++id) {
    auto f = files->Open(id, "bench-" + CaseName(block, stocs) + "-" + std::to_string(id),
                         FileKind::kDisk, block);
    if (!f.ok()) return f.status().Prepend("open");
    handles.push_back(std::move(f.value()));
  }
  const uint64_t max_ops =
      std::max(kMinBlocksPerAppender, std::min(kMaxOpsPerCase, kMaxBytesPerCase / block) / stocs);
  std::vector<ThreadResult> results(stocs);
  std::vector<std::thread> threads;
  const MonoTime start = MonoNow();
  const MonoTime deadline = DeadlineAfter(FLAGS_seconds_per_case);
  for (uint32_t i = 0; i < stocs; ++i) {
    threads.emplace_back([&, i] {
      ThreadResult& r = results[i];
      for (uint64_t ops = 0; ops < max_ops && (ops < kMinBlocksPerAppender || MonoNow() < deadline);
           ++ops) {
        auto h = bench->client()->Append(handles[i].get(), bench->src(), 0, block);
        if (!h.ok()) {
          r.status = h.status();
          return;
        }
        r.bytes += block;
        r.blocks.push_back(h.value());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = SecondsSince(start);
  uint64_t bytes = 0;
  for (auto& r : results) {
    NOVA_RETURN_NOT_OK_PREPEND(r.status, "append");
    bytes += r.bytes;
    written->insert(written->end(), r.blocks.begin(), r.blocks.end());
  }
  for (auto& f : handles) NOVA_RETURN_NOT_OK_PREPEND(bench->client()->Close(f.get()), "close");
  return static_cast<double>(bytes) / secs / 1e6;
}

// Reads random blocks of `blocks` with --reader_threads threads for --seconds_per_case.
// Returns MB/s.
Result<double> MeasureRead(BenchClient* bench, const std::vector<BlockHandle>& blocks) {
  if (blocks.empty()) return Status::IllegalState("no blocks to read");
  const uint64_t max_ops = std::max<uint64_t>(
      1, std::min(kMaxOpsPerCase, kMaxBytesPerCase / blocks.front().size) / FLAGS_reader_threads);
  std::vector<ThreadResult> results(FLAGS_reader_threads);
  std::vector<std::thread> threads;
  const MonoTime start = MonoNow();
  const MonoTime deadline = DeadlineAfter(FLAGS_seconds_per_case);
  for (int i = 0; i < FLAGS_reader_threads; ++i) {
    threads.emplace_back([&, i] {
      ThreadResult& r = results[i];
      std::mt19937_64 rng(i);
      for (uint64_t ops = 0; ops < max_ops && MonoNow() < deadline; ++ops) {
        const BlockHandle& b = blocks[rng() % blocks.size()];
        r.status = bench->client()->Read(b, bench->dst(i), 0);
        if (!r.status.ok()) return;
        r.bytes += b.size;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = SecondsSince(start);
  uint64_t bytes = 0;
  for (auto& r : results) {
    NOVA_RETURN_NOT_OK_PREPEND(r.status, "read");
    bytes += r.bytes;
  }
  return static_cast<double>(bytes) / secs / 1e6;
}

struct Latency {
  double p50_us = 0, p99_us = 0;
  size_t reads = 0;
};

// Writes up to kLatencyBlocks 4 KiB blocks to one file of StoC 1, then reads random ones,
// one at a time, for --seconds_per_case.
Result<Latency> MeasureReadLatency(BenchClient* bench, FileKind kind) {
  StocClient* client = bench->client();
  CaseFiles files(client);
  const std::string name = std::string("bench-latency-") + stoc::FileKindName(kind);
  auto f = files.Open(1, name, kind, kLatencyBlockBytes);
  if (!f.ok()) return f.status().Prepend("open");
  std::vector<BlockHandle> blocks;
  const MonoTime fill_deadline = DeadlineAfter(FLAGS_seconds_per_case);
  while (blocks.size() < kLatencyBlocks && (blocks.empty() || MonoNow() < fill_deadline)) {
    auto h = client->Append(f.value().get(), bench->src(), 0, kLatencyBlockBytes);
    if (!h.ok()) return h.status().Prepend("append");
    blocks.push_back(h.value());
  }
  NOVA_RETURN_NOT_OK_PREPEND(client->Close(f.value().get()), "close");

  std::mt19937_64 rng(42);
  std::vector<double> us;
  const MonoTime deadline = DeadlineAfter(FLAGS_seconds_per_case);
  for (uint64_t i = 0; i < kLatencyWarmupReads + kMaxOpsPerCase && MonoNow() < deadline; ++i) {
    const BlockHandle& b = blocks[rng() % blocks.size()];
    const uint64_t t0 = MonoNanos();
    NOVA_RETURN_NOT_OK_PREPEND(client->Read(b, bench->dst(0), 0), "read");
    if (i >= kLatencyWarmupReads) us.push_back(static_cast<double>(MonoNanos() - t0) / 1e3);
  }
  if (us.empty()) return Status::IllegalState("no read measured (--seconds_per_case too small)");
  return Latency{Percentile(us, 50), Percentile(us, 99), us.size()};
}

// ---- Driver --------------------------------------------------------------------------

// Runs the cases, filling *out; returns the number of failed cases (each reported on stderr),
// stopping at the first unless --keep_going.
int RunCases(BenchClient* bench, nlohmann::ordered_json* out, std::vector<std::string>* notes) {
  int failures = 0;
  auto failed = [&](const std::string& what, const Status& s) {
    std::fprintf(stderr, "stoc_bench: %s failed: %s\n", what.c_str(), s.ToString().c_str());
    ++failures;
    return !FLAGS_keep_going;
  };
  for (uint32_t stocs : kStocCounts) {
    for (uint64_t block : kBlockSizes) {
      const std::string name = CaseName(block, stocs);
      CaseFiles files(bench->client());  // deleted after the read case
      std::vector<BlockHandle> written;
      auto append = MeasureAppend(bench, &files, block, stocs, &written);
      if (!append.ok()) {
        if (failed("append " + name, append.status())) return failures;
        continue;
      }
      (*out)["append_MBps_" + name] = append.value();
      auto read = MeasureRead(bench, written);
      if (!read.ok()) {
        if (failed("read " + name, read.status())) return failures;
        continue;
      }
      (*out)["read_MBps_" + name] = read.value();
    }
  }
  for (FileKind kind : {FileKind::kDisk, FileKind::kMemory}) {
    const std::string suffix = std::string("4KiB_") + (kind == FileKind::kDisk ? "disk" : "memory");
    auto lat = MeasureReadLatency(bench, kind);
    if (!lat.ok()) {
      if (failed("read latency " + suffix, lat.status())) return failures;
      continue;
    }
    (*out)["read_us_p50_" + suffix] = lat->p50_us;
    (*out)["read_us_p99_" + suffix] = lat->p99_us;
    notes->push_back(suffix + ": " + std::to_string(lat->reads) + " reads");
  }
  return failures;
}

std::string Cell(const nlohmann::ordered_json& out, const std::string& key, const char* fmt) {
  if (!out.contains(key)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, out[key].get<double>());
  return buf;
}

void PrintTable(const nlohmann::ordered_json& out, const std::vector<std::string>& notes) {
  std::printf(
      "stoc_bench: %u nova_stoc processes over loopback (tcp, %d xchg threads), "
      "%.1f s per case, %d reader threads\n",
      kStocs, kXchgThreads, FLAGS_seconds_per_case, FLAGS_reader_threads);
  std::printf("data dirs under %s: %s\n", out["data_dir"].get<std::string>().c_str(),
              out["data_dir_fs"].get<std::string>().c_str());
  std::printf("%-8s %14s %14s %14s %14s\n", "block", "append MB/s", "append MB/s", "read MB/s",
              "read MB/s");
  std::printf("%-8s %14s %14s %14s %14s\n", "", "1 StoC", "3 StoCs", "1 StoC", "3 StoCs");
  for (uint64_t block : kBlockSizes) {
    std::printf("%-8s", SizeName(block).c_str());
    for (const char* op : {"append", "read"}) {
      for (uint32_t stocs : kStocCounts) {
        const std::string key = std::string(op) + "_MBps_" + CaseName(block, stocs);
        std::printf(" %14s", Cell(out, key, "%.0f").c_str());
      }
    }
    std::printf("\n");
  }
  std::printf("4 KiB random reads, one at a time (us):\n");
  std::printf("%-8s %10s %10s\n", "", "p50", "p99");
  for (const char* kind : {"disk", "memory"}) {
    const std::string suffix = std::string("4KiB_") + kind;
    std::printf("%-8s %10s %10s\n", kind, Cell(out, "read_us_p50_" + suffix, "%.1f").c_str(),
                Cell(out, "read_us_p99_" + suffix, "%.1f").c_str());
  }
  for (const auto& n : notes) std::printf("  (%s)\n", n.c_str());
}

int Run() {
  if (FLAGS_reader_threads < 1 || FLAGS_seconds_per_case <= 0) {
    std::fprintf(stderr, "stoc_bench: --reader_threads must be >= 1 and --seconds_per_case > 0\n");
    return 2;
  }
  const std::string base = ChooseDirBase();
  // Per StoC, at most one append slot and one read staging buffer per reader thread are in
  // use at once, each up to kMaxBlockBytes. Doubled because a size class's slabs never go
  // to another class (slab_allocator.h), and the smaller classes together need less than
  // one more such set.
  const uint64_t file_buffer_mb = 2 * (kMaxBlockBytes / kMiB) * (1 + FLAGS_reader_threads);

  StocCluster cluster;  // declared before the client: stopped after it
  Status s = cluster.Start(base, file_buffer_mb);
  if (!s.ok()) {
    std::fprintf(stderr, "stoc_bench: starting the StoCs: %s\n", s.ToString().c_str());
    return 1;
  }
  BenchClient bench;
  s = bench.Init(cluster, FLAGS_reader_threads);
  if (!s.ok()) {
    std::fprintf(stderr, "stoc_bench: client: %s\n", s.ToString().c_str());
    return 1;
  }

  nlohmann::ordered_json out;
  out["stocs"] = kStocs;
  out["reader_threads"] = FLAGS_reader_threads;
  out["seconds_per_case"] = FLAGS_seconds_per_case;
  out["data_dir"] = cluster.root();
  out["data_dir_fs"] = DescribeFilesystem(cluster.root());
  std::vector<std::string> notes;
  const int failures = RunCases(&bench, &out, &notes);
  if (FLAGS_json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    PrintTable(out, notes);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Measures StoC append and read throughput (1 and 3 StoCs) and 4 KiB read latency "
      "against nova_stoc processes over loopback.\nUsage: stoc_bench [--json] "
      "[--seconds_per_case=S] [--stoc_dir_base=DIR]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // keep the table readable
  google::InitGoogleLogging(argv[0]);
  return Run();
}
