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

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/bench_util.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_client.h"
#include "stoc/server/file_catalog.h"

DEFINE_bool(json, false, "Print one JSON object instead of a table");
DEFINE_double(seconds_per_case, 1.0,
              "Measuring time of each case (block size x StoC count, or latency kind), seconds");
DEFINE_string(stoc_dir_base, nova::bench::kDefaultStocDirBase, nova::bench::kStocDirBaseHelp);
DEFINE_int32(reader_threads, 4, "Client threads reading blocks in the read-throughput cases");
DEFINE_bool(keep_going, false,
            "When a case fails, report it and go on with the next (exit status is still 1)");

namespace {

using namespace nova;
using namespace nova::bench;
using nova::stoc::BlockHandle;
using nova::stoc::FileKind;
using nova::stoc::StocClient;
using nova::stoc::StocFile;

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
// Lanes per peer (the daemons' and the client's).
constexpr int kXchgThreads = 2;

std::string CaseName(uint64_t block, uint32_t stocs) {
  return SizeName(block) + "_" + std::to_string(stocs) + "stoc";
}

// ---- The client ----------------------------------------------------------------------

// A client process's side: a connection to the StoCs and registered buffers (one source of
// kMaxBlockBytes, one destination of kMaxBlockBytes per reader thread).
// Thread-safe after RegisterBuffers(): the buffers are read (source) or owned by one thread (dst).
class BenchClient {
 public:
  BenchClient() = default;
  BenchClient(const BenchClient&) = delete;
  BenchClient& operator=(const BenchClient&) = delete;

  // The connection to the StoCs, to Init() first.
  BenchStocConnection* conn() { return &conn_; }

  // Registers the buffers for `reader_threads` readers. REQUIRES: conn() is initialized;
  // called once.
  Status RegisterBuffers(int reader_threads) {
    transport::Transport* transport = conn_.transport();
    // Incompressible source bytes (the same for every block).
    src_mem_.reset(new char[kMaxBlockBytes]);
    std::mt19937_64 rng(1);
    for (uint64_t i = 0; i < kMaxBlockBytes; i += sizeof(uint64_t)) {
      const uint64_t v = rng();
      std::memcpy(src_mem_.get() + i, &v, sizeof(v));
    }
    auto src = transport->RegisterMemory(src_mem_.get(), kMaxBlockBytes, transport::kLocalOnly);
    if (!src.ok()) return src.status();
    src_ = src.value();
    for (int i = 0; i < reader_threads; ++i) {
      dst_mem_.emplace_back(new char[kMaxBlockBytes]());
      auto dst = transport->RegisterMemory(dst_mem_.back().get(), kMaxBlockBytes,
                                           transport::kRemoteWrite);
      if (!dst.ok()) return dst.status();
      dst_.push_back(dst.value());
    }
    return Status::OK();
  }

  StocClient* client() { return conn_.client(); }
  const transport::MemoryRegion& src() const { return src_; }
  // The destination buffer of reader `i`. REQUIRES: i < reader_threads given to RegisterBuffers().
  const transport::MemoryRegion& dst(int i) const { return dst_[i]; }

 private:
  // Declared before conn_ so they outlive the transport that has them registered.
  std::unique_ptr<char[]> src_mem_;
  std::vector<std::unique_ptr<char[]>> dst_mem_;
  BenchStocConnection conn_;
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

// Runs the cases, filling the report; returns the number of failed cases (each reported on
// stderr), stopping at the first unless --keep_going.
int RunCases(BenchClient* bench, Report* report) {
  nlohmann::ordered_json& out = report->out();
  CaseFailures failures("stoc_bench", FLAGS_keep_going, /*notes=*/nullptr);
  for (uint32_t stocs : kStocCounts) {
    for (uint64_t block : kBlockSizes) {
      if (failures.stop()) return failures.count();
      const std::string name = CaseName(block, stocs);
      CaseFiles files(bench->client());  // deleted after the read case
      std::vector<BlockHandle> written;
      auto append = MeasureAppend(bench, &files, block, stocs, &written);
      if (!failures.Ok("append " + name, append.status())) continue;
      out["append_MBps_" + name] = append.value();
      auto read = MeasureRead(bench, written);
      if (failures.Ok("read " + name, read.status())) out["read_MBps_" + name] = read.value();
    }
  }
  for (FileKind kind : {FileKind::kDisk, FileKind::kMemory}) {
    if (failures.stop()) break;
    const std::string suffix = std::string("4KiB_") + (kind == FileKind::kDisk ? "disk" : "memory");
    auto lat = MeasureReadLatency(bench, kind);
    if (!failures.Ok("read latency " + suffix, lat.status())) continue;
    out["read_us_p50_" + suffix] = lat->p50_us;
    out["read_us_p99_" + suffix] = lat->p99_us;
    report->AddNote(suffix + ": " + std::to_string(lat->reads) + " reads");
  }
  return failures.count();
}

void PrintTable(const Report& report) {
  std::printf(
      "stoc_bench: %u nova_stoc processes over loopback (tcp, %d xchg threads), "
      "%.1f s per case, %d reader threads\n",
      kStocs, kXchgThreads, FLAGS_seconds_per_case, FLAGS_reader_threads);
  report.PrintDataDirLine();
  std::printf("%-8s %14s %14s %14s %14s\n", "block", "append MB/s", "append MB/s", "read MB/s",
              "read MB/s");
  std::printf("%-8s %14s %14s %14s %14s\n", "", "1 StoC", "3 StoCs", "1 StoC", "3 StoCs");
  for (uint64_t block : kBlockSizes) {
    std::printf("%-8s", SizeName(block).c_str());
    for (const char* op : {"append", "read"}) {
      for (uint32_t stocs : kStocCounts) {
        const std::string key = std::string(op) + "_MBps_" + CaseName(block, stocs);
        std::printf(" %14s", report.Cell(key, "%.0f").c_str());
      }
    }
    std::printf("\n");
  }
  std::printf("4 KiB random reads, one at a time (us):\n");
  std::printf("%-8s %10s %10s\n", "", "p50", "p99");
  for (const char* kind : {"disk", "memory"}) {
    const std::string suffix = std::string("4KiB_") + kind;
    std::printf("%-8s %10s %10s\n", kind, report.Cell("read_us_p50_" + suffix, "%.1f").c_str(),
                report.Cell("read_us_p99_" + suffix, "%.1f").c_str());
  }
  report.PrintNotes();
}

int Run() {
  if (FLAGS_reader_threads < 1 || FLAGS_seconds_per_case <= 0) {
    std::fprintf(stderr, "stoc_bench: --reader_threads must be >= 1 and --seconds_per_case > 0\n");
    return 2;
  }
  BenchStocClusterOptions co;
  co.program = "stoc_bench";
  co.flattered_figures = "append figures";
  co.stocs = kStocs;
  co.max_block_bytes = kMaxBlockBytes;
  co.xchg_threads = kXchgThreads;
  // Per StoC, at most one append slot and one read staging buffer per reader thread are in
  // use at once, each up to kMaxBlockBytes. Doubled because a size class's slabs never go
  // to another class (slab_allocator.h), and the smaller classes together need less than
  // one more such set.
  co.file_buffer_mb = 2 * (kMaxBlockBytes / kMiB) * (1 + FLAGS_reader_threads);
  co.dir_base_flag = FLAGS_stoc_dir_base;
  co.dir_base_is_default = gflags::GetCommandLineFlagInfoOrDie("stoc_dir_base").is_default;
  BenchStocCluster cluster(co);  // declared before the client: stopped after it
  BenchClient bench;
  if (!StartAndConnect(&cluster, bench.conn())) return 1;
  const Status s = bench.RegisterBuffers(FLAGS_reader_threads);
  if (!s.ok()) {
    std::fprintf(stderr, "stoc_bench: client: %s\n", s.ToString().c_str());
    return 1;
  }

  Report report;
  report.out()["stocs"] = kStocs;
  report.out()["reader_threads"] = FLAGS_reader_threads;
  report.out()["seconds_per_case"] = FLAGS_seconds_per_case;
  report.AddDataDir(cluster.root());
  const int failures = RunCases(&bench, &report);
  if (FLAGS_json) {
    report.PrintJson(/*with_notes=*/false);
  } else {
    PrintTable(report);
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
