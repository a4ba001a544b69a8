#include "logc/server/logc_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <glog/logging.h>

#include "common/fault_point.h"
#include "common/transport/transport_metrics.h"
#include "common/wire/message.h"

namespace nova::logc {

namespace {

// kReadLog replies stay this far below the transport's message limit: room for the wire
// header and the reply's own fields.
constexpr uint64_t kReadReplySlackBytes = 4096;
// ... and carry at most this much: recovery reads a disk log in pages of this size whatever
// the message limit (256 MiB by default), so a recovery's memory does not grow with it.
constexpr uint64_t kMaxReadReplyBytes = 16ull << 20;
// Request types by pool: reads (disk) on the storage pool, the rest on the control pool.
// kLogPersisted (0x0210) is left free: it is the client side's notification.
constexpr wire::TypeRange kControlLow{kOpenLog, kListLogs};
constexpr wire::TypeRange kStorage{kReadLog, kReadLog};
constexpr wire::TypeRange kControlHigh{kDeleteLogs, kFenceLogs};
// Registrations tried for a region before giving up on finding an rkey no fenced region had
// (random 32-bit rkeys: a second try is already rare).
constexpr int kFreshRkeyAttempts = 16;
// How long a fence waits for a fenced file's persisting to end (a hung disk): it then fails
// and the client counts this LogC as not confirmed.
constexpr auto kFenceDrainTimeout = std::chrono::seconds(10);

// The daemon's fault point: each group persisted ("delay:<ms>" makes a slow disk, "error"
// a failed write, which fences the file like a real one).
constexpr char kPersistFault[] = "logc.persist";

Status Malformed(const Status& s) { return s.ok() ? s : Status::InvalidArgument(s.message()); }

// Disk file name of a persisted segment: the capacity is part of the name, so a restarted
// LogC recreates the region at its size without a sidecar. DO NOT CHANGE: persisted.
std::string FileName(uint32_t range, uint64_t memtable, uint32_t segment, uint64_t capacity) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "r%" PRIu32 "-m%" PRIu64 "-s%" PRIu32 "-c%" PRIu64 ".log", range,
                memtable, segment, capacity);
  return buf;
}

// Disk file name of a range's persisted in-sync mark (empty). DO NOT CHANGE: persisted.
std::string InSyncMarkName(uint32_t range) { return "r" + std::to_string(range) + ".insync"; }

bool ParseInSyncMarkName(const std::string& name, uint32_t* range) {
  if (std::sscanf(name.c_str(), "r%" SCNu32 ".insync", range) != 1) return false;
  return InSyncMarkName(*range) == name;
}

// Disk file name of a range's fence; it holds the owner epoch in decimal and a newline.
// DO NOT CHANGE: persisted.
std::string FenceName(uint32_t range) { return "r" + std::to_string(range) + ".fence"; }

bool ParseFenceName(const std::string& name, uint32_t* range) {
  if (std::sscanf(name.c_str(), "r%" SCNu32 ".fence", range) != 1) return false;
  return FenceName(*range) == name;
}

Status ReadFenceFile(const std::string& path, uint64_t* epoch) {
  FILE* fp = std::fopen(path.c_str(), "re");
  if (fp == nullptr) return Status::FromErrno("open " + path, errno);
  char buf[32] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, fp);
  std::fclose(fp);
  char tail = 0;
  if (n == 0 || std::sscanf(buf, "%" SCNu64 "%c", epoch, &tail) != 2 || tail != '\n' ||
      std::to_string(*epoch) + "\n" != std::string(buf, n)) {
    return Status::Corruption(path + ": not an owner epoch");
  }
  return Status::OK();
}

uint64_t NewIncarnation() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return v;
}

// Parses a FileName(); false for anything else (which is then left alone).
bool ParseFileName(const std::string& name, uint32_t* range, uint64_t* memtable,
                   uint32_t* segment, uint64_t* capacity) {
  if (std::sscanf(name.c_str(), "r%" SCNu32 "-m%" SCNu64 "-s%" SCNu32 "-c%" SCNu64 ".log", range,
                  memtable, segment, capacity) != 4) {
    return false;
  }
  return FileName(*range, *memtable, *segment, *capacity) == name;  // no sign, spaces, junk
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + dir, errno);
  Status s = ::fsync(fd) == 0 ? Status::OK() : Status::FromErrno("fsync " + dir, errno);
  ::close(fd);
  return s;
}

Status PwriteAll(int fd, const char* p, uint64_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("pwrite log file", errno);
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status PreadAll(int fd, char* p, uint64_t n, uint64_t offset) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("pread log file", errno);
    }
    if (r == 0) return Status::IOError("log file shorter than expected");
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

std::string KeyName(uint32_t range, uint64_t memtable, uint32_t segment) {
  return "log r" + std::to_string(range) + " m" + std::to_string(memtable) + " s" +
         std::to_string(segment);
}

}  // namespace

// One log file segment. The region lives as long as the object (shared by the maps and
// by storage tasks); DestroyFile deregisters it first so no peer reaches it any more.
struct LogcServer::LogFile {
  // Constant after creation.
  uint32_t range = 0;
  uint64_t memtable = 0;
  uint32_t segment = 0;
  uint32_t handle = 0;
  uint64_t capacity = 0;
  bool persist = false;
  char* mem = nullptr;  // mmap'd, capacity bytes
  int fd = -1;          // persisted files
  std::string path;     // persisted files

  mutable Mutex mu;
  CondVar cv;  // `scheduled` became false
  // The registered region: replaced (fresh rkey) when the file is fenced or taken over.
  transport::MemoryRegion mr GUARDED_BY(mu);
  // Owner epoch of the writer the file serves (0: legacy, or loaded from disk).
  uint64_t epoch GUARDED_BY(mu) = 0;
  // An owner of a newer epoch fenced the range: read-only, immediates refused.
  bool fenced GUARDED_BY(mu) = false;
  // bytes [0, received) were written by the client (immediates)
  uint64_t received GUARDED_BY(mu) = 0;
  uint64_t persisted GUARDED_BY(mu) = 0;  // bytes [0, persisted) are fdatasync'd
  transport::PeerId writer GUARDED_BY(mu) = transport::kInvalidPeer;  // who to notify
  bool scheduled GUARDED_BY(mu) = false;  // a PersistLoop runs or is queued for this file
  bool deleted GUARDED_BY(mu) = false;
  Status health GUARDED_BY(mu);  // a failed write or fdatasync fences the file

  ~LogFile() {
    if (fd >= 0) ::close(fd);
    if (mem != nullptr) ::munmap(mem, capacity);
  }
};

LogcServer::LogcServer(const LogcOptions& options, MetricsRegistry* metrics)
    : options_(options),
      metrics_(metrics),
      incarnation_(NewIncarnation()),
      endpoint_(rpc::RpcEndpointOptions{options.transport.max_message_bytes}),
      storage_pool_("logc-storage", std::max(1, options.storage_threads),
                    options.max_queued_requests),
      control_pool_("logc-control", std::max(1, options.control_threads),
                    options.max_queued_requests) {
  received_bytes_ = metrics_->GetCounter("logc_received_bytes_total",
                                         "Bytes appended to persisted logs (by immediates)");
  persisted_bytes_ = metrics_->GetCounter("logc_persisted_bytes_total",
                                          "Bytes of persisted logs written and fdatasync'd");
  fsyncs_ = metrics_->GetCounter("logc_fsyncs_total", "fdatasync calls (one per append group)");
  errors_ = metrics_->GetCounter("logc_errors_total",
                                 "Requests answered with an error, refused immediates, I/O errors");
  fsync_latency_us_ = metrics_->GetHistogram("logc_fsync_latency_us",
                                             "Time of one group's pwrite + fdatasync");
}

LogcServer::~LogcServer() {
  Shutdown();
  metrics_->UnregisterCallbackGauge("logc_files");
  metrics_->UnregisterCallbackGauge("logc_memory_bytes");
  if (transport_) transport::UnregisterTransportMetrics(metrics_);
  std::map<Key, std::shared_ptr<LogFile>> files;
  {
    MutexLock lock(&mu_);
    files.swap(files_);
    by_handle_.clear();
  }
  for (auto& [key, f] : files) {
    transport::MemoryRegion mr;
    {
      MutexLock lock(&f->mu);
      mr = f->mr;
    }
    if (transport_) transport_->DeregisterMemory(mr).IgnoreError();
  }
}

Status LogcServer::Init() {
  if (options_.persist && options_.dir.empty()) {
    return Status::InvalidArgument("--logc_persist needs a data directory (--logc_dir)");
  }
  if (options_.memory_limit_bytes == 0 || options_.max_segment_bytes == 0) {
    return Status::InvalidArgument("LogC memory limit and maximum segment size must be > 0");
  }
  transport::TransportOptions topts = options_.transport;
  topts.node_name = "logc-" + options_.logc_id;
  auto t = transport::NewTransport(topts, &endpoint_);
  if (!t.ok()) return t.status();
  transport_ = std::move(t.value());
  endpoint_.Attach(transport_.get());
  endpoint_.RegisterService(kControlLow, this, &control_pool_);
  endpoint_.RegisterService(kStorage, this, &storage_pool_);
  endpoint_.RegisterService(kControlHigh, this, &control_pool_);
  endpoint_.AddObserver(this);
  NOVA_RETURN_NOT_OK(transport_->Init());

  if (!options_.dir.empty()) {
    for (const std::string& d : {options_.dir, LogsDir()}) {
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::FromErrno("mkdir " + d, errno);
      }
    }
    NOVA_RETURN_NOT_OK_PREPEND(LoadPersistedFiles(), "LogC loading persisted logs");
  }

  metrics_->RegisterCallbackGauge("logc_files", "Log file segments held", [this] {
    MutexLock lock(&mu_);
    return static_cast<double>(files_.size());
  });
  metrics_->RegisterCallbackGauge("logc_memory_bytes", "Capacity of all log regions", [this] {
    MutexLock lock(&mu_);
    return static_cast<double>(memory_bytes_);
  });
  transport::RegisterTransportMetrics(metrics_, transport_.get());
  return Status::OK();
}

Status LogcServer::Start() { return transport_->Start(); }

void LogcServer::Shutdown() {
  if (transport_) transport_->Shutdown();
  storage_pool_.Shutdown();
  control_pool_.Shutdown();
}

LogcStatsResponse LogcServer::GetStats() const {
  LogcStatsResponse s;
  {
    MutexLock lock(&mu_);
    s.files = files_.size();
    s.memory_bytes = memory_bytes_;
  }
  s.memory_limit_bytes = options_.memory_limit_bytes;
  s.received_bytes = received_bytes_->value();
  s.persisted_bytes = persisted_bytes_->value();
  s.fsyncs = fsyncs_->value();
  s.errors = errors_->value();
  return s;
}

// ---- Files ------------------------------------------------------------------------

Result<std::shared_ptr<LogcServer::LogFile>> LogcServer::NewFileLocked(
    const Key& key, uint64_t capacity, bool persist, bool enforce_limit, uint64_t epoch) {
  if (enforce_limit && memory_bytes_ + capacity > options_.memory_limit_bytes) {
    return Status::ResourceExhausted(
        "LogC memory limit reached: " + std::to_string(memory_bytes_) + " of " +
        std::to_string(options_.memory_limit_bytes) + " bytes held, " + std::to_string(capacity) +
        " more asked (raise --logc_memory_limit_mb or add LogCs)");
  }
  void* mem = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Status::FromErrno("mmap log region", errno);
  auto f = std::make_shared<LogFile>();
  std::tie(f->range, f->memtable, f->segment) = key;
  f->capacity = capacity;
  f->persist = persist;
  f->mem = static_cast<char*>(mem);
  auto fence = fences_.find(std::get<0>(key));
  const bool fenced = fence != fences_.end() && epoch < fence->second;
  auto mr = RegisterFreshLocked(
      f->mem, capacity,
      fenced ? transport::kRemoteRead : transport::kRemoteRead | transport::kRemoteWrite);
  if (!mr.ok()) return mr.status();  // ~LogFile unmaps
  {
    MutexLock file_lock(&f->mu);  // not shared yet: for the analysis
    f->mr = mr.value();
    f->epoch = epoch;
    f->fenced = fenced;
  }
  do {
    f->handle = next_handle_++;
  } while (f->handle == 0 || by_handle_.count(f->handle) != 0);
  memory_bytes_ += capacity;
  return f;
}

Status LogcServer::LoadPersistedFiles() {
  const std::string dir = LogsDir();
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::FromErrno("opendir " + dir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  // Fences first: a file of a fenced range is loaded fenced.
  for (const std::string& name : names) {
    uint32_t range;
    if (!ParseFenceName(name, &range)) continue;
    uint64_t epoch;
    NOVA_RETURN_NOT_OK(ReadFenceFile(dir + "/" + name, &epoch));
    MutexLock lock(&mu_);
    fences_[range] = epoch;
  }
  size_t loaded = 0;
  for (const std::string& name : names) {
    if (name == "." || name == "..") continue;
    uint32_t range, segment;
    uint64_t memtable, capacity;
    if (ParseFenceName(name, &range)) continue;
    if (ParseInSyncMarkName(name, &range)) {
      MutexLock lock(&mu_);
      in_sync_.insert(range);
      continue;
    }
    if (!ParseFileName(name, &range, &memtable, &segment, &capacity)) {
      LOG(WARNING) << "LogC: ignoring unknown file " << dir << "/" << name;
      continue;
    }
    const std::string path = dir + "/" + name;
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open " + path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Status::FromErrno("stat " + path, errno);
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t region_bytes = std::max<uint64_t>({capacity, size, 1});
    std::shared_ptr<LogFile> f;
    {
      MutexLock lock(&mu_);
      // A restart must not lose logs to a lowered limit: load past it (new opens then fail).
      // The file's epoch is not on disk: in a fenced range it loads fenced (an opener of
      // the newest epoch takes it over).
      auto r = NewFileLocked(Key{range, memtable, segment}, region_bytes, true,
                             /*enforce_limit=*/false, /*epoch=*/0);
      if (!r.ok()) {
        ::close(fd);
        return r.status().Prepend(path);
      }
      f = r.value();
    }
    f->fd = fd;
    f->path = path;
    Status s = PreadAll(fd, f->mem, size, 0);
    if (!s.ok()) {
      MutexLock file_lock(&f->mu);  // not shared yet: for the analysis
      transport_->DeregisterMemory(f->mr).IgnoreError();
      return s.Prepend(path);
    }
    {
      MutexLock file_lock(&f->mu);  // not shared yet: for the analysis
      f->received = f->persisted = size;
    }
    MutexLock lock(&mu_);
    files_[Key{range, memtable, segment}] = f;
    by_handle_[f->handle] = f;
    ++loaded;
  }
  LOG(INFO) << "LogC " << options_.logc_id << ": " << loaded << " persisted log files loaded from "
            << dir;
  return Status::OK();
}

void LogcServer::DestroyFile(const std::shared_ptr<LogFile>& f) {
  transport::MemoryRegion mr;
  {
    MutexLock lock(&f->mu);
    f->deleted = true;
    mr = f->mr;
  }
  // Waits for peers' in-flight one-sided ops; later ones fail at the peer.
  Status s = transport_->DeregisterMemory(mr);
  LOG_IF(WARNING, !s.ok()) << "deregistering a log region: " << s.ToString();
  if (!f->path.empty() && ::unlink(f->path.c_str()) != 0 && errno != ENOENT) {
    errors_->Increment();
    LOG(WARNING) << "unlink " << f->path << ": " << std::strerror(errno);
  }
  MutexLock lock(&mu_);
  memory_bytes_ -= f->capacity;
}

LogFileInfo LogcServer::InfoOf(const LogFile& f) const {
  LogFileInfo i;
  i.memtable = f.memtable;
  i.segment = f.segment;
  i.handle = f.handle;
  i.capacity = f.capacity;
  i.persisted = f.persist;
  MutexLock lock(&f.mu);
  i.addr = f.mr.Remote();
  i.length = f.received;
  i.persisted_length = f.persisted;
  return i;
}

// ---- Requests ---------------------------------------------------------------------

void LogcServer::HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                               rpc::Responder responder) {
  (void)peer;
  switch (type) {
    case kOpenLog: return HandleOpen(payload, &responder);
    case kListLogs: return HandleList(payload, &responder);
    case kReadLog: return HandleRead(payload, &responder);
    case kDeleteLogs: return HandleDelete(payload, &responder);
    case kLogcStats: return responder.Reply(Encode(GetStats()));
    case kMarkInSync: return HandleMarkInSync(payload, &responder);
    case kFenceLogs: return HandleFence(payload, &responder);
    default:
      errors_->Increment();
      responder.ReplyError(Status::NotSupported("unknown LogC request " + std::to_string(type)));
  }
}

void LogcServer::HandleOpen(std::string_view payload, rpc::Responder* r) {
  OpenLogRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  if (req.capacity == 0 || req.capacity > options_.max_segment_bytes) {
    NOVA_REPLY_IF_ERROR(
        r,
        Status::InvalidArgument("log segment capacity " + std::to_string(req.capacity) +
                                " outside [1, " + std::to_string(options_.max_segment_bytes) + "]"),
        errors_);
  }
  if (req.persist && !options_.persist) {
    NOVA_REPLY_IF_ERROR(r, Status::InvalidArgument("LogC started without --logc_persist"), errors_);
  }
  const Key key{req.range, req.memtable, req.segment};
  // One open at a time: the check for an existing file and the creation of its disk file
  // must not interleave with another open of the same file (nor with a fence).
  MutexLock open_lock(&open_mu_);
  {
    bool newer;
    {
      MutexLock lock(&mu_);
      NOVA_REPLY_IF_ERROR(r, CheckEpochLocked(req.range, req.owner_epoch, "open"), errors_);
      auto it = fences_.find(req.range);
      newer = req.owner_epoch > (it == fences_.end() ? 0 : it->second);
    }
    // The first contact of a newer owner fences the range here, as kFenceLogs would: this
    // LogC may have missed the new owner's fence.
    if (newer) NOVA_REPLY_IF_ERROR(r, FenceLocked(req.range, req.owner_epoch, nullptr), errors_);
  }
  auto reply = [&](const LogFile& f) {
    LogFileInfo i = InfoOf(f);
    OpenLogResponse resp;
    resp.handle = i.handle;
    resp.addr = i.addr;
    resp.capacity = i.capacity;
    resp.persisted = i.persisted;
    resp.length = i.length;
    resp.persisted_length = i.persisted_length;
    resp.incarnation = incarnation_;
    r->Reply(Encode(resp));
  };
  std::shared_ptr<LogFile> f;
  bool existing = false;
  {
    MutexLock lock(&mu_);
    auto it = files_.find(key);
    if (it != files_.end()) f = it->second;
    if (f == nullptr) {
      auto created =
          NewFileLocked(key, req.capacity, req.persist, /*enforce_limit=*/true, req.owner_epoch);
      NOVA_REPLY_IF_ERROR(r, created.status(), errors_);
      f = created.value();
      if (!req.persist) {
        files_[key] = f;
        by_handle_[f->handle] = f;
        return reply(*f);
      }
    } else {
      existing = true;
      if (f->persist != req.persist) {
        NOVA_REPLY_IF_ERROR(
            r,
            Status::InvalidArgument(KeyName(req.range, req.memtable, req.segment) + " exists " +
                                    (f->persist ? "persisted" : "in memory only")),
            errors_);
      }
    }
  }
  if (existing) {
    // An existing file. Fenced, it is an older owner's (or loaded from disk in a fenced
    // range): the check above made this opener the newest owner, who takes it over (a
    // re-replication of a recovered log to a LogC holding a partial copy).
    bool fenced;
    {
      MutexLock file_lock(&f->mu);
      fenced = f->fenced;
    }
    if (fenced) NOVA_REPLY_IF_ERROR(r, UnfenceLocked(f.get(), req.owner_epoch), errors_);
    return reply(*f);
  }
  // A new persisted file: create its disk file (and make the name durable) outside mu_,
  // which the xchg threads take for every immediate.
  f->path = LogsDir() + "/" + FileName(req.range, req.memtable, req.segment, req.capacity);
  Status s;
  f->fd = ::open(f->path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f->fd < 0) s = Status::FromErrno("create " + f->path, errno);
  if (s.ok()) s = SyncDir(LogsDir());
  if (!s.ok()) {
    DestroyFile(f);
    NOVA_REPLY_IF_ERROR(r, s, errors_);
  }
  {
    MutexLock lock(&mu_);
    files_[key] = f;
    by_handle_[f->handle] = f;
  }
  reply(*f);
}

void LogcServer::HandleList(std::string_view payload, rpc::Responder* r) {
  ListLogsRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  std::vector<std::shared_ptr<LogFile>> files;
  {
    MutexLock lock(&mu_);
    for (auto it = files_.lower_bound(Key{req.range, 0, 0});
         it != files_.end() && std::get<0>(it->first) == req.range; ++it) {
      files.push_back(it->second);
    }
  }
  ListLogsResponse resp;
  for (const auto& f : files) resp.files.push_back(InfoOf(*f));
  resp.incarnation = incarnation_;
  {
    MutexLock lock(&mu_);
    resp.in_sync = in_sync_.count(req.range) != 0;
  }
  r->Reply(Encode(resp));
}

void LogcServer::HandleMarkInSync(std::string_view payload, rpc::Responder* r) {
  MarkInSyncRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  if (req.incarnation != 0 && req.incarnation != incarnation_) {
    NOVA_REPLY_IF_ERROR(r,
                        Status::IllegalState("LogC restarted: incarnation " +
                                             std::to_string(incarnation_) + ", not " +
                                             std::to_string(req.incarnation)),
                        errors_);
  }
  if (req.persist && !options_.persist) {
    NOVA_REPLY_IF_ERROR(r, Status::InvalidArgument("LogC started without --logc_persist"), errors_);
  }
  // Serialized with opens (which also create files in the directory) and fences.
  MutexLock open_lock(&open_mu_);
  bool known;
  {
    MutexLock lock(&mu_);
    NOVA_REPLY_IF_ERROR(r, CheckEpochLocked(req.range, req.owner_epoch, "in-sync mark"), errors_);
    known = in_sync_.count(req.range) != 0;
  }
  if (req.persist) {
    if (!known) {
      const std::string path = LogsDir() + "/" + InSyncMarkName(req.range);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      Status s = fd >= 0 ? Status::OK() : Status::FromErrno("creating " + path, errno);
      if (fd >= 0) ::close(fd);
      if (s.ok()) s = SyncDir(LogsDir());
      NOVA_REPLY_IF_ERROR(r, s, errors_);
    }
  }
  {
    MutexLock lock(&mu_);
    in_sync_.insert(req.range);
  }
  r->Reply(std::string());
}

void LogcServer::HandleRead(std::string_view payload, rpc::Responder* r) {
  ReadLogRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  std::shared_ptr<LogFile> f;
  {
    MutexLock lock(&mu_);
    auto it = files_.find(Key{req.range, req.memtable, req.segment});
    if (it != files_.end()) f = it->second;
  }
  if (f == nullptr) {
    NOVA_REPLY_IF_ERROR(r, Status::NotFound("no " + KeyName(req.range, req.memtable, req.segment)),
                        errors_);
  }
  if (!f->persist) {
    NOVA_REPLY_IF_ERROR(
        r, Status::InvalidArgument("in-memory log: read it with one-sided READs, not kReadLog"),
        errors_);
  }
  uint64_t persisted;
  {
    MutexLock lock(&f->mu);
    persisted = f->persisted;
  }
  if (req.offset > persisted) {
    NOVA_REPLY_IF_ERROR(
        r,
        Status::OutOfRange("read at " + std::to_string(req.offset) + " past the persisted length " +
                           std::to_string(persisted)),
        errors_);
  }
  const uint64_t max_reply = options_.transport.max_message_bytes > kReadReplySlackBytes
                                 ? options_.transport.max_message_bytes - kReadReplySlackBytes
                                 : 1;
  const uint64_t n =
      std::min({req.length, persisted - req.offset, max_reply, kMaxReadReplyBytes});
  ReadLogResponse resp;
  resp.persisted_length = persisted;
  resp.data.resize(n);
  NOVA_REPLY_IF_ERROR(r, PreadAll(f->fd, resp.data.data(), n, req.offset), errors_);
  r->Reply(Encode(resp));
}

void LogcServer::HandleDelete(std::string_view payload, rpc::Responder* r) {
  DeleteLogsRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  // Serialized with fences (which replace a file's region).
  MutexLock open_lock(&open_mu_);
  std::vector<std::shared_ptr<LogFile>> doomed;
  {
    MutexLock lock(&mu_);
    NOVA_REPLY_IF_ERROR(r, CheckEpochLocked(req.range, req.owner_epoch, "delete"), errors_);
    for (uint64_t memtable : req.memtables) {
      auto it = files_.lower_bound(Key{req.range, memtable, 0});
      while (it != files_.end() && std::get<0>(it->first) == req.range &&
             std::get<1>(it->first) == memtable) {
        by_handle_.erase(it->second->handle);
        doomed.push_back(it->second);
        it = files_.erase(it);
      }
    }
  }
  bool any_disk = false;
  for (const auto& f : doomed) {
    any_disk = any_disk || !f->path.empty();
    DestroyFile(f);
  }
  // A deleted log must not come back after a crash (it would be replayed as live).
  if (any_disk) {
    Status s = SyncDir(LogsDir());
    if (!s.ok()) {
      errors_->Increment();
      LOG(WARNING) << "after deleting logs: " << s.ToString();
    }
  }
  r->Reply(Encode(DeleteLogsResponse{static_cast<uint32_t>(doomed.size())}));
}

// ---- Fencing -------------------------------------------------------------------------

void LogcServer::HandleFence(std::string_view payload, rpc::Responder* r) {
  FenceLogsRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), errors_);
  if (req.owner_epoch == 0) {
    NOVA_REPLY_IF_ERROR(r, Status::InvalidArgument("fence at owner epoch 0 (legacy, unfenced)"),
                        errors_);
  }
  MutexLock open_lock(&open_mu_);
  FenceLogsResponse resp;
  resp.incarnation = incarnation_;
  NOVA_REPLY_IF_ERROR(r, FenceLocked(req.range, req.owner_epoch, &resp.files_fenced), errors_);
  LOG(INFO) << "LogC " << options_.logc_id << ": range " << req.range << " fenced at owner epoch "
            << req.owner_epoch << " (" << resp.files_fenced << " files of older owners)";
  r->Reply(Encode(resp));
}

Status LogcServer::CheckEpochLocked(uint32_t range, uint64_t epoch, const char* what) const {
  auto it = fences_.find(range);
  if (it == fences_.end() || epoch >= it->second) return Status::OK();
  return Status::Fenced(std::string(what) + " of range " + std::to_string(range) +
                        " at owner epoch " + std::to_string(epoch) + ": LogC " + options_.logc_id +
                        " holds the fence of epoch " + std::to_string(it->second));
}

Result<transport::MemoryRegion> LogcServer::RegisterFreshLocked(char* mem, uint64_t length,
                                                                uint32_t access) {
  for (int attempt = 0; attempt < kFreshRkeyAttempts; ++attempt) {
    auto mr = transport_->RegisterMemory(mem, length, access);
    if (!mr.ok()) return mr.status();
    if (retired_rkeys_.count(mr.value().rkey) == 0) return mr;
    transport_->DeregisterMemory(mr.value()).IgnoreError();
  }
  return Status::IOError("no rkey unused by fenced regions after " +
                         std::to_string(kFreshRkeyAttempts) + " registrations");
}

Status LogcServer::WriteFenceFile(uint32_t range, uint64_t epoch) {
  const std::string path = LogsDir() + "/" + FenceName(range);
  const std::string tmp = path + ".tmp";
  const std::string text = std::to_string(epoch) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("creating " + tmp, errno);
  Status s = PwriteAll(fd, text.data(), text.size(), 0);
  if (s.ok() && ::fsync(fd) != 0) s = Status::FromErrno("fsync " + tmp, errno);
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Status::FromErrno("rename " + tmp, errno);
  }
  if (s.ok()) s = SyncDir(LogsDir());
  if (!s.ok()) ::unlink(tmp.c_str());
  return s.Prepend("writing the fence of range " + std::to_string(range));
}

Status LogcServer::FenceLocked(uint32_t range, uint64_t epoch, uint32_t* fenced) {
  if (fenced != nullptr) *fenced = 0;
  std::vector<std::shared_ptr<LogFile>> files;
  bool raised;
  {
    MutexLock lock(&mu_);
    NOVA_RETURN_NOT_OK(CheckEpochLocked(range, epoch, "fence"));
    uint64_t& newest = fences_[range];
    raised = epoch > newest;
    newest = epoch;
    for (auto it = files_.lower_bound(Key{range, 0, 0});
         it != files_.end() && std::get<0>(it->first) == range; ++it) {
      files.push_back(it->second);
    }
  }
  // Durable before the answer: a restart must not forget a fence it confirmed.
  if (raised && options_.persist) NOVA_RETURN_NOT_OK(WriteFenceFile(range, epoch));
  for (const auto& f : files) {
    transport::MemoryRegion old;
    {
      MutexLock file_lock(&f->mu);
      if (f->deleted || f->fenced || f->epoch >= epoch) continue;
      f->fenced = true;  // invariant 1: before the deregistration
      old = f->mr;
    }
    {
      MutexLock lock(&mu_);
      retired_rkeys_.insert(old.rkey);  // invariant 3: before it is free in the transport
    }
    // Waits for the peers' in-flight one-sided ops on it; later ones fail at the peer.
    Status s = transport_->DeregisterMemory(old);
    LOG_IF(WARNING, !s.ok()) << "deregistering a fenced log region: " << s.ToString();
    {
      // Invariant 2: what was received is persisted (or the file failed) before the answer.
      MutexLock file_lock(&f->mu);
      const bool drained = f->cv.WaitFor(&file_lock, kFenceDrainTimeout,
                                         [&]() REQUIRES(f->mu) { return !f->scheduled; });
      if (!drained) {
        return Status::TimedOut(KeyName(f->range, f->memtable, f->segment) +
                                " still persisting: fence not confirmed");
      }
    }
    MutexLock lock(&mu_);
    auto mr = RegisterFreshLocked(f->mem, f->capacity, transport::kRemoteRead);
    if (!mr.ok()) return mr.status().Prepend("re-registering a fenced log region");
    MutexLock file_lock(&f->mu);
    f->mr = mr.value();
    if (fenced != nullptr) ++*fenced;
  }
  return Status::OK();
}

Status LogcServer::UnfenceLocked(LogFile* f, uint64_t epoch) {
  transport::MemoryRegion old;
  {
    MutexLock file_lock(&f->mu);
    old = f->mr;
  }
  // Read-only: its rkey never gave write access, so it need not be retired.
  Status s = transport_->DeregisterMemory(old);
  LOG_IF(WARNING, !s.ok()) << "deregistering a fenced log region: " << s.ToString();
  MutexLock lock(&mu_);
  auto mr =
      RegisterFreshLocked(f->mem, f->capacity, transport::kRemoteRead | transport::kRemoteWrite);
  if (!mr.ok()) return mr.status().Prepend("re-registering a log region taken over");
  MutexLock file_lock(&f->mu);
  f->mr = mr.value();
  f->epoch = epoch;
  f->fenced = false;
  LOG(INFO) << "LogC " << options_.logc_id << ": " << KeyName(f->range, f->memtable, f->segment)
            << " taken over by owner epoch " << epoch;
  return Status::OK();
}

// ---- Persisted appends --------------------------------------------------------------

bool LogcServer::OnWriteWithImm(transport::PeerId peer, uint32_t imm, uint64_t length) {
  std::shared_ptr<LogFile> f;
  {
    MutexLock lock(&mu_);
    auto it = by_handle_.find(imm);
    if (it != by_handle_.end()) f = it->second;
  }
  Status refused;
  bool schedule = false;
  if (f == nullptr) {
    refused = Status::NotFound("append to unknown log handle " + std::to_string(imm));
  } else {
    MutexLock lock(&f->mu);
    if (!f->persist) {
      refused = Status::InvalidArgument("immediate for an in-memory log");
    } else if (f->fenced) {
      // Invariant 1: never received, so never persisted nor acknowledged.
      refused = Status::Fenced(KeyName(f->range, f->memtable, f->segment) +
                               " was fenced by a newer owner of the range");
    } else if (length > f->capacity - f->received) {
      refused = Status::OutOfRange("immediate says " + std::to_string(length) + " bytes after " +
                                   std::to_string(f->received) + " of a " +
                                   std::to_string(f->capacity) + "-byte log");
      f->health = refused;  // the client and we disagree on the offset: fence the file
    } else {
      f->received += length;
      f->writer = peer;
      schedule = !f->scheduled;
      f->scheduled = true;
    }
  }
  if (!refused.ok()) {
    errors_->Increment();
    LOG_EVERY_N(WARNING, 100) << "LogC refused an immediate from peer " << peer << ": "
                              << refused.ToString();
    if (f != nullptr) {
      endpoint_.Notify(peer, kLogPersisted, Encode(LogPersisted{imm, 0, refused})).IgnoreError();
    }
    return true;
  }
  received_bytes_->Increment(length);
  if (schedule) {
    Status s = storage_pool_.Submit([this, f] { PersistLoop(f); });
    if (!s.ok()) {
      // Shutting down or saturated: the client's ack times out and it fails this replica.
      errors_->Increment();
      LOG(WARNING) << "storage pool refused a log persist task: " << s.ToString();
      MutexLock lock(&f->mu);
      f->scheduled = false;
      f->cv.NotifyAll();
    }
  }
  return true;
}

void LogcServer::PersistLoop(const std::shared_ptr<LogFile>& f) {
  while (true) {
    uint64_t from, to;
    transport::PeerId peer;
    {
      MutexLock lock(&f->mu);
      if (f->deleted || !f->health.ok() || f->persisted >= f->received) {
        f->scheduled = false;
        f->cv.NotifyAll();
        if (!f->health.ok() && !f->deleted) {
          endpoint_.Notify(f->writer, kLogPersisted,
                           Encode(LogPersisted{f->handle, f->persisted, f->health}))
              .IgnoreError();
        }
        return;
      }
      from = f->persisted;
      to = f->received;  // group commit: everything received so far
      peer = f->writer;
    }
    const MonoTime start = MonoNow();
    // Bytes [from, to) are not written again by the client (it appends past them), so
    // they are read without the lock.
    Status s = MAYBE_FAULT(kPersistFault);
    if (s.ok()) s = PwriteAll(f->fd, f->mem + from, to - from, from);
    if (s.ok() && ::fdatasync(f->fd) != 0) s = Status::FromErrno("fdatasync " + f->path, errno);
    fsyncs_->Increment();
    fsync_latency_us_->Record(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()));
    {
      MutexLock lock(&f->mu);
      if (s.ok()) {
        f->persisted = to;
      } else {
        // What reached the disk is unknown: fence the file (the client fails this replica).
        f->health = s;
      }
    }
    if (s.ok()) {
      persisted_bytes_->Increment(to - from);
    } else {
      errors_->Increment();
      LOG(ERROR) << "persisting " << f->path << ": " << s.ToString();
    }
    Status sent = endpoint_.Notify(peer, kLogPersisted,
                                   Encode(LogPersisted{f->handle, s.ok() ? to : from, s}));
    LOG_IF(INFO, !sent.ok()) << "cannot notify peer " << peer << " of a persisted log: "
                             << sent.ToString();
    if (!s.ok()) {
      MutexLock lock(&f->mu);
      f->scheduled = false;
      f->cv.NotifyAll();
      return;
    }
  }
}

}  // namespace nova::logc
