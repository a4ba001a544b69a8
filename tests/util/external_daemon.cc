#include "tests/util/external_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/hex.h"

namespace nova::test {

namespace {

// Lines of the log quoted in a failure: enough for a stack trace or the flag error.
constexpr size_t kLogTailLines = 30;
// Bytes of the log read for the tail, so a daemon that logged megabytes stays cheap.
constexpr uint64_t kLogTailMaxBytes = 64 << 10;
// Unexpected stdout lines kept for a failure message (the protocol allows none).
constexpr size_t kMaxStrayStdoutLines = 5;
// Random bytes in a generated cluster secret (an HMAC-SHA256 key: 32 bytes is its size).
constexpr size_t kSecretBytes = 32;
constexpr char kListenPrefix[] = "LISTEN ";
constexpr uint16_t kNoPort = 0;

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

// Parses "<host>:<port>" with a port in [1, 65535]. Returns 0 if malformed.
uint16_t ParsePort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return kNoPort;
  const char* begin = address.data() + colon + 1;
  const char* end = address.data() + address.size();
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end || value > UINT16_MAX) return kNoPort;
  return static_cast<uint16_t>(value);
}

// Writes all of `data` to `fd`.
Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write " + path, errno);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace

Result<std::string> WriteClusterSecret(const std::string& dir) {
  unsigned char raw[kSecretBytes];
  size_t got = 0;
  while (got < sizeof(raw)) {
    const ssize_t n = ::getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("getrandom", errno);
    got += static_cast<size_t>(n);
  }
  std::string secret =
      HexEncode(std::string_view(reinterpret_cast<const char*>(raw), sizeof(raw))) + "\n";

  const std::string path = dir + "/cluster_secret";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  // An earlier file of the same name keeps its mode through O_CREAT; the secret must not
  // be readable by others (daemons warn about it).
  Status s = ::fchmod(fd, 0600) == 0 ? Status::OK() : Status::FromErrno("chmod " + path, errno);
  if (s.ok()) s = WriteAll(fd, secret, path);
  if (::close(fd) != 0 && s.ok()) s = Status::FromErrno("close " + path, errno);
  if (!s.ok()) return s;
  return path;
}

ExternalDaemon::ExternalDaemon(ExternalDaemonOptions options)
    : options_(std::move(options)), log_path_(options_.data_dir + "/" + options_.id + ".log") {}

ExternalDaemon::~ExternalDaemon() { Kill(); }

std::vector<std::string> ExternalDaemon::CommandLine() const {
  std::vector<std::string> argv;
  argv.push_back(options_.binary.find('/') != std::string::npos
                     ? options_.binary
                     : BinDir() + "/" + options_.binary);
  argv.push_back("--listen_port=" + std::to_string(port_));
  argv.push_back("--cluster_secret_file=" + options_.cluster_secret_file);
  if (!options_.data_dir_flag.empty()) {
    argv.push_back("--" + options_.data_dir_flag + "=" + options_.data_dir);
  }
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  return argv;
}

Status ExternalDaemon::WithLogTail(const Status& status) const {
  std::string tail;
  std::ifstream in(log_path_, std::ios::binary);
  if (in) {
    in.seekg(0, std::ios::end);
    const uint64_t size = static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
    const uint64_t from = std::max(log_start_, size > kLogTailMaxBytes ? size - kLogTailMaxBytes : 0);
    in.seekg(static_cast<std::streamoff>(std::min(from, size)));
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(ss, line)) lines.push_back(line);
    const size_t first = lines.size() > kLogTailLines ? lines.size() - kLogTailLines : 0;
    for (size_t i = first; i < lines.size(); ++i) tail += "\n  " + lines[i];
  }
  std::string msg = status.message() + "\n  ---- last lines of " + log_path_ + " (this run):";
  msg += tail.empty() ? "\n  (nothing)" : tail;
  return Status(status.code(), msg);
}

Status ExternalDaemon::Start() {
  if (options_.binary.empty() || options_.id.empty() || options_.data_dir.empty() ||
      options_.cluster_secret_file.empty()) {
    return Status::InvalidArgument(
        "ExternalDaemonOptions need binary, id, data_dir and cluster_secret_file");
  }
  if (IsRunning()) return Status::IllegalState(options_.id + " is already running");
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir, ec);
  if (ec) {
    return Status::IOError("cannot create data dir " + options_.data_dir + ": " + ec.message());
  }

  const std::vector<std::string> argv = CommandLine();
  const std::string what = options_.id + " (" + Join(argv) + ")";
  // Mark the run in the log; the failure message quotes only what follows the mark.
  {
    const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("open " + log_path_, errno);
    Status s = WriteAll(fd, "==== harness: starting " + Join(argv) + "\n", log_path_);
    struct stat st {};
    if (s.ok() && ::fstat(fd, &st) != 0) s = Status::FromErrno("stat " + log_path_, errno);
    ::close(fd);
    NOVA_RETURN_NOT_OK(s);
    log_start_ = static_cast<uint64_t>(st.st_size);
  }

  process_ = std::make_unique<ChildProcess>();
  ChildProcessOptions child_options;
  child_options.stderr_path = log_path_;
  child_options.file_size_limit_bytes = options_.file_size_limit_bytes;
  child_options.env = options_.env;
  if (!process_->Start(argv, child_options)) {
    return WithLogTail(Status::FromErrno("cannot start " + what, errno));
  }

  const auto deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };
  std::vector<std::string> stray;  // stdout lines before LISTEN
  std::string line;
  while (process_->ReadLine(&line, left())) {
    if (line.rfind(kListenPrefix, 0) != 0) {
      if (stray.size() < kMaxStrayStdoutLines) stray.push_back(line);
      continue;
    }
    const std::string address = line.substr(sizeof(kListenPrefix) - 1);
    const uint16_t port = ParsePort(address);
    Status bad;
    if (port == kNoPort) {
      bad = Status::IllegalState(what + " printed a malformed line: '" + line + "'");
    } else if (port_ != kNoPort && port != port_) {
      bad = Status::IllegalState(what + " listens on " + address + ", not on port " +
                                 std::to_string(port_) + " as asked");
    }
    if (!bad.ok()) {
      process_->Kill();
      return WithLogTail(bad);
    }
    port_ = port;
    address_ = address;
    return Status::OK();
  }

  // No LISTEN line: stdout closed because the daemon is exiting, or the deadline passed.
  std::string stdout_note;
  if (!stray.empty()) stdout_note = "; its stdout said: " + Join(stray);
  const int code = process_->Wait(left());
  if (code >= 0) {
    return WithLogTail(Status::Aborted(what + " exited with status " + std::to_string(code) +
                                       " before printing LISTEN" + stdout_note));
  }
  process_->Kill();
  return WithLogTail(Status::TimedOut(what + " printed no LISTEN line within " +
                                      std::to_string(options_.start_timeout.count()) +
                                      " ms; killed" + stdout_note));
}

Status ExternalDaemon::Restart() {
  if (port_ == kNoPort) {
    return Status::IllegalState(options_.id + " never served: nothing to restart");
  }
  if (IsRunning()) Shutdown().IgnoreError();  // it is gone either way
  return Start();
}

void ExternalDaemon::Kill() {
  if (process_) process_->Kill();
}

Status ExternalDaemon::Shutdown() {
  if (!IsRunning()) return Status::OK();
  process_->Signal(SIGTERM);
  process_->Resume();  // a stopped process handles SIGTERM only once continued
  if (process_->Wait(options_.shutdown_timeout) >= 0) return Status::OK();
  process_->Kill();
  return WithLogTail(Status::TimedOut(options_.id + " did not exit within " +
                                      std::to_string(options_.shutdown_timeout.count()) +
                                      " ms of SIGTERM; killed with SIGKILL"));
}

Status ExternalDaemon::Pause() {
  if (!IsRunning()) return Status::IllegalState(options_.id + " is not running");
  if (!process_->Pause()) {
    return WithLogTail(Status::IllegalState(options_.id + " did not stop on SIGSTOP"));
  }
  return Status::OK();
}

Status ExternalDaemon::Resume() {
  if (!IsRunning()) return Status::IllegalState(options_.id + " is not running");
  if (!process_->Resume()) return Status::FromErrno("SIGCONT " + options_.id, errno);
  return Status::OK();
}

bool ExternalDaemon::IsRunning() { return process_ != nullptr && process_->Running(); }

Result<int> ExternalDaemon::WaitForExit(std::chrono::milliseconds timeout) {
  if (!process_) return Status::IllegalState(options_.id + " was never started");
  const int code = process_->Wait(timeout);
  if (code < 0) {
    return Status::TimedOut(options_.id + " still runs after " + std::to_string(timeout.count()) +
                            " ms");
  }
  return code;
}

ExternalDaemonOptions StocDaemonOptions(const std::string& dir, const std::string& secret_file,
                                        uint32_t id, std::vector<std::string> flags) {
  ExternalDaemonOptions o;
  o.binary = "nova_stoc";
  o.id = "stoc-" + std::to_string(id);
  o.data_dir = dir + "/" + o.id;
  o.data_dir_flag = "stoc_dir";
  o.cluster_secret_file = secret_file;
  o.extra_flags = {"--stoc_id=" + std::to_string(id), "--stoc_memory_region_mb=4"};
  o.extra_flags.insert(o.extra_flags.end(), flags.begin(), flags.end());
  return o;
}

ExternalDaemonOptions LogcDaemonOptions(const std::string& dir, const std::string& secret_file,
                                        int id, std::vector<std::string> flags) {
  ExternalDaemonOptions o;
  o.binary = "nova_logc";
  o.id = "logc-" + std::to_string(id);
  o.data_dir = dir + "/" + o.id;
  o.data_dir_flag = "logc_dir";
  o.cluster_secret_file = secret_file;
  o.extra_flags = {"--logc_id=" + std::to_string(id)};
  o.extra_flags.insert(o.extra_flags.end(), flags.begin(), flags.end());
  return o;
}

ExternalDaemonOptions LtcDaemonOptions(const std::string& dir, const std::string& secret_file,
                                       const std::string& id, std::vector<std::string> flags) {
  ExternalDaemonOptions o;
  o.binary = "nova_ltc";
  o.id = id;
  o.data_dir = dir + "/" + id;
  o.data_dir_flag = "ltc_dir";
  o.cluster_secret_file = secret_file;
  o.extra_flags = std::move(flags);
  return o;
}

}  // namespace nova::test
