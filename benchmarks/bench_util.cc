#include "benchmarks/bench_util.h"

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <map>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/util/test_util.h"

namespace nova::bench {

namespace {

// Where StoC data goes when /tmp is a tmpfs: normally a real disk.
constexpr char kFallbackStocDirBase[] = "/var/tmp";

// `name` with every '_' made a '-' ("stoc_bench" -> "stoc-bench").
std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// True if `path` is on a tmpfs (where fdatasync costs nothing).
bool IsTmpfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

// The directory to make the scratch directory under (see BenchStocCluster::Start()).
std::string ChooseStocDirBase(const std::string& flag_value, bool flag_is_default,
                              const std::string& program, const std::string& flattered) {
  if (!flag_is_default || !IsTmpfs(kDefaultStocDirBase)) {
    if (IsTmpfs(flag_value)) {
      std::fprintf(stderr, "%s: warning: %s is a tmpfs; %s will be flattered (fdatasync is free there)\n",
                   program.c_str(), flag_value.c_str(), flattered.c_str());
    }
    return flag_value;
  }
  if (!IsTmpfs(kFallbackStocDirBase)) return kFallbackStocDirBase;
  return test::BinDir();  // the build directory, normally on a real disk
}

}  // namespace

const char kStocDirBaseHelp[] =
    "Directory under which the StoCs' data directories are made (and removed at the end). "
    "If left at its default and /tmp is a tmpfs, /var/tmp is used instead (fdatasync on "
    "tmpfs is free and would flatter the figures)";

// ---- Timing and formatting -------------------------------------------------------------

MonoTime DeadlineAfter(double seconds) {
  return MonoNow() +
         std::chrono::duration_cast<MonoClock::duration>(std::chrono::duration<double>(seconds));
}

double SecondsSince(MonoTime start) {
  return std::chrono::duration<double>(MonoNow() - start).count();
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[static_cast<size_t>(p / 100.0 * static_cast<double>(samples.size() - 1))];
}

std::string SizeName(uint64_t bytes) {
  return bytes >= kMiB ? std::to_string(bytes / kMiB) + "MiB"
                       : std::to_string(bytes / kKiB) + "KiB";
}

// ---- Where the StoC data directories go -------------------------------------------------

std::string DescribeFilesystem(const std::string& path) {
  std::error_code ec;
  const std::string real = std::filesystem::canonical(path, ec).string();
  std::ifstream mounts("/proc/self/mounts");
  std::string line, best_point, best;
  // The longest mount point that prefixes the path holds it.
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

// ---- BenchStocCluster --------------------------------------------------------------------

BenchStocCluster::BenchStocCluster(BenchStocClusterOptions options)
    : options_(std::move(options)) {}

BenchStocCluster::~BenchStocCluster() { Stop(); }

Status BenchStocCluster::Start() {
  const std::string base =
      ChooseStocDirBase(options_.dir_base_flag, options_.dir_base_is_default, options_.program,
                        options_.flattered_figures);
  std::string tmpl = base + "/nova-" + Dashed(options_.program) + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
  root_ = tmpl;
  auto secret_file = test::WriteClusterSecret(root_);
  if (!secret_file.ok()) return secret_file.status();
  std::ifstream in(secret_file.value());
  std::getline(in, secret_);  // the daemons strip the trailing newline too
  if (secret_.empty()) return Status::IOError("cannot read back " + secret_file.value());
  for (uint32_t id = 1; id <= options_.stocs; ++id) {
    test::ExternalDaemonOptions o;
    o.binary = "nova_stoc";
    o.id = "stoc-" + std::to_string(id);
    o.data_dir = root_ + "/" + o.id;
    o.data_dir_flag = "stoc_dir";
    o.cluster_secret_file = secret_file.value();
    o.extra_flags = {"--stoc_id=" + std::to_string(id)};
    if (options_.file_buffer_mb) {
      o.extra_flags.push_back("--stoc_file_buffer_mb=" + std::to_string(*options_.file_buffer_mb));
    }
    o.extra_flags.push_back("--stoc_max_block_mb=" + std::to_string(options_.max_block_bytes / kMiB));
    o.extra_flags.push_back("--xchg_threads=" + std::to_string(options_.xchg_threads));
    o.extra_flags.push_back("--minloglevel=1");  // warnings and errors, into <data_dir>/<id>.log
    o.start_timeout = options_.start_timeout;
    o.shutdown_timeout = options_.shutdown_timeout;
    daemons_.push_back(std::make_unique<test::ExternalDaemon>(o));
    NOVA_RETURN_NOT_OK(daemons_.back()->Start());
  }
  return Status::OK();
}

void BenchStocCluster::Stop() {
  for (auto& d : daemons_) {
    Status s = d->Shutdown();
    if (!s.ok()) std::fprintf(stderr, "%s: %s\n", options_.program.c_str(), s.ToString().c_str());
  }
  daemons_.clear();
  if (!root_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    if (ec) {
      std::fprintf(stderr, "%s: cannot remove %s: %s\n", options_.program.c_str(), root_.c_str(),
                   ec.message().c_str());
    }
    root_.clear();
  }
}

// ---- BenchStocConnection -----------------------------------------------------------------

BenchStocConnection::~BenchStocConnection() = default;  // conn_ shuts its transport down

Status BenchStocConnection::Init(const BenchStocCluster& cluster) {
  test::StocConnectionOptions o;
  o.node_name = Dashed(cluster.options().program);
  o.cluster_secret = cluster.secret();
  o.xchg_threads = cluster.options().xchg_threads;
  std::map<uint32_t, std::string> addresses;
  for (uint32_t id = 1; id <= cluster.options().stocs; ++id) {
    addresses[id] = cluster.address(id);
    stocs_.push_back(id);
  }
  return conn_.Init(o, addresses);
}

bool StartAndConnect(BenchStocCluster* cluster, BenchStocConnection* conn) {
  const char* program = cluster->options().program.c_str();
  Status s = cluster->Start();
  if (!s.ok()) {
    std::fprintf(stderr, "%s: starting the StoCs: %s\n", program, s.ToString().c_str());
    return false;
  }
  s = conn->Init(*cluster);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: client: %s\n", program, s.ToString().c_str());
    return false;
  }
  return true;
}

// ---- Report and CaseFailures -------------------------------------------------------------

void Report::AddDataDir(const std::string& dir) {
  out_["data_dir"] = dir;
  out_["data_dir_fs"] = DescribeFilesystem(dir);
}

void Report::PrintDataDirLine() const {
  std::printf("data dirs under %s: %s\n", out_["data_dir"].get<std::string>().c_str(),
              out_["data_dir_fs"].get<std::string>().c_str());
}

std::string Report::Cell(const std::string& key, const char* fmt) const {
  if (!out_.contains(key)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, out_[key].get<double>());
  return buf;
}

void Report::PrintJson(bool with_notes) const {
  if (!with_notes) {
    std::printf("%s\n", out_.dump().c_str());
    return;
  }
  nlohmann::ordered_json j = out_;
  j["notes"] = notes_;
  std::printf("%s\n", j.dump().c_str());
}

void Report::PrintNotes() const {
  for (const auto& n : notes_) std::printf("  (%s)\n", n.c_str());
}

bool CaseFailures::Ok(const std::string& what, const Status& s) {
  if (s.ok()) return true;
  std::fprintf(stderr, "%s: %s failed: %s\n", program_.c_str(), what.c_str(), s.ToString().c_str());
  if (notes_ != nullptr) notes_->AddNote(what + " failed: " + s.ToString());
  ++count_;
  return false;
}

}  // namespace nova::bench
