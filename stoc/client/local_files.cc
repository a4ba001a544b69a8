#include "stoc/client/local_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <glog/logging.h>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::stoc {

namespace {

// A StoC block's header (stoc/server/block_format.h, persisted): length u32, masked CRC
// u32, both little-endian, right before the block's data.
constexpr uint64_t kBlockHeaderBytes = 8;

// True if `header` (the 8 bytes before data) gives n as its block's length and a CRC that
// data[0, n) does not match: a whole block that fails its check. A read of part of a block
// has no CRC to check (false).
bool WholeBlockFailsCrc(const char* header, const char* data, uint64_t n) {
  return DecodeFixed32(header) == n &&
         crc32c::Mask(crc32c::Value(data, n)) != DecodeFixed32(header + 4);
}

}  // namespace

Result<std::string> HostIdentity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(in, id) || id.empty()) {
    return Status::NotSupported("cannot read /proc/sys/kernel/random/boot_id");
  }
  struct stat net;
  if (::stat("/proc/self/ns/net", &net) != 0) {
    return Status::NotSupported("cannot stat /proc/self/ns/net");
  }
  return id + " net:" + std::to_string(net.st_ino);
}

LocalFiles::Fd::~Fd() { ::close(fd); }

MappedFile::~MappedFile() {
  ::munmap(const_cast<char*>(data_), size_);
  live_->fetch_sub(1, std::memory_order_relaxed);
}

const char* MappedFile::Find(uint64_t offset, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) return nullptr;
  const char* p = data_ + offset;
  // A whole block (the header before it gives its length): checked as Read checks it.
  if (offset >= kBlockHeaderBytes && WholeBlockFailsCrc(p - kBlockHeaderBytes, p, n)) {
    return nullptr;
  }
  return p;
}

size_t LocalFiles::MaxMappings() {
  constexpr size_t kMost = 16384;
  std::ifstream in("/proc/sys/vm/max_map_count");
  size_t limit = 0;
  if (!(in >> limit) || limit == 0) return kMost;
  return std::clamp<size_t>(limit / 4, 1, kMost);
}

size_t LocalFiles::MaxOpenFiles() {
  constexpr size_t kMost = 4096;
  struct rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kMost;
  return std::clamp<size_t>(static_cast<size_t>(lim.rlim_cur) / 4, 1, kMost);
}

LocalFiles::LocalFiles(Locate locate)
    : locate_(std::move(locate)),
      host_id_(HostIdentity()),
      max_open_(MaxOpenFiles()),
      max_mappings_(MaxMappings()) {
  LOG_IF(INFO, !host_id_.ok()) << "StoC files are read by request only: "
                               << host_id_.status().ToString();
  sweeper_ = std::thread([this] { SweepLoop(); });
}

LocalFiles::~LocalFiles() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.NotifyAll();
  }
  sweeper_.join();
}

void LocalFiles::SweepLoop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    if (cv_.WaitFor(&lock, kSweepInterval, [this]() REQUIRES(mu_) { return stop_; })) break;
    lock.Unlock();
    Sweep();
    lock.Lock();
  }
}

bool LocalFiles::Read(uint32_t stoc_id, uint64_t file_id, uint64_t offset, uint64_t size,
                      char* dst) {
  if (!host_id_.ok()) return false;
  std::shared_ptr<Fd> f = FdOf(stoc_id, file_id);
  if (f == nullptr) return false;
  // With the 8 bytes before the range: the header, if the range is a whole block.
  char header[kBlockHeaderBytes];
  const uint64_t lead = offset >= kBlockHeaderBytes ? kBlockHeaderBytes : 0;
  uint64_t done = 0;
  while (done < size + lead) {
    struct iovec iov[2];
    int n_iov = 0;
    if (done < lead) iov[n_iov++] = {header + done, lead - done};
    const uint64_t into_dst = done > lead ? done - lead : 0;
    iov[n_iov++] = {dst + into_dst, size - into_dst};
    const ssize_t n = ::preadv(f->fd, iov, n_iov, static_cast<off_t>(offset - lead + done));
    if (n < 0 && errno == EINTR) continue;
    // End of file (cannot happen for acknowledged bytes) or an I/O error: the StoC's answer
    // to the request is the authoritative one.
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  if (lead > 0 && WholeBlockFailsCrc(header, dst, size)) {
    // A whole block that fails its check: the request reports the corruption (and a reader
    // tries another replica).
    LOG(WARNING) << "StoC " << stoc_id << " file " << file_id << ": block at " << offset
                 << " fails its CRC when read locally; reading it by request";
    return false;
  }
  local_reads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::shared_ptr<const MappedFile> LocalFiles::Map(uint32_t stoc_id, uint64_t file_id) {
  if (!host_id_.ok()) return nullptr;
  std::shared_ptr<Fd> f = FdOf(stoc_id, file_id);
  if (f == nullptr) return nullptr;
  MutexLock lock(&f->map_mu);
  if (f->map_tried) return f->mapped;
  // Not counted as tried when the limit refuses it: a later call may find room.
  if (live_mappings_->fetch_add(1, std::memory_order_relaxed) >= max_mappings_) {
    live_mappings_->fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  f->map_tried = true;
  struct stat st;
  void* p = MAP_FAILED;
  if (::fstat(f->fd, &st) == 0 && st.st_size > 0) {
    p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, f->fd, 0);
    LOG_IF(WARNING, p == MAP_FAILED) << "StoC " << stoc_id << " file " << file_id
                                     << ": cannot map it (" << std::strerror(errno)
                                     << "); reading it with pread";
  }
  if (p == MAP_FAILED) {
    live_mappings_->fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  f->mapped = std::make_shared<MappedFile>(static_cast<const char*>(p),
                                           static_cast<uint64_t>(st.st_size), live_mappings_);
  return f->mapped;
}

std::shared_ptr<LocalFiles::Fd> LocalFiles::FdOf(uint32_t stoc_id, uint64_t file_id) {
  const FileKey key{stoc_id, file_id};
  uint64_t generation;
  {
    MutexLock lock(&mu_);
    auto it = files_.find(key);
    if (it != files_.end()) return it->second;  // null: read by request
    auto remote = remote_until_.find(stoc_id);
    if (remote != remote_until_.end()) {
      if (MonoNow() < remote->second) return nullptr;
      remote_until_.erase(remote);
    }
    generation = generation_[stoc_id];
  }
  // Outside mu_: a round trip. Two threads may both ask; the second's descriptor is dropped.
  bool whole_stoc = false;
  std::shared_ptr<Fd> f = OpenChecked(stoc_id, file_id, locate_(stoc_id, file_id), &whole_stoc);
  MutexLock lock(&mu_);
  if (generation_[stoc_id] != generation) {
    // The StoC went down (or was re-addressed) while we asked: its answer may be stale.
    to_close_.push_back(std::move(f));
    return nullptr;
  }
  if (whole_stoc) {
    remote_until_[stoc_id] = MonoNow() + kRetryInterval;
    return nullptr;
  }
  auto it = files_.find(key);
  if (it != files_.end()) {
    to_close_.push_back(std::move(f));  // another thread's came first
    return it->second;
  }
  if (files_.size() >= max_open_) EvictLocked();
  files_.emplace(key, f);
  return f;
}

void LocalFiles::EvictLocked() {
  for (auto it = files_.begin(); it != files_.end();) {
    it = it->second == nullptr ? files_.erase(it) : std::next(it);
  }
  if (files_.size() >= max_open_ && !files_.empty()) {
    to_close_.push_back(std::move(files_.begin()->second));
    files_.erase(files_.begin());
  }
}

std::shared_ptr<LocalFiles::Fd> LocalFiles::OpenChecked(uint32_t stoc_id, uint64_t file_id,
                                                        const Result<LocalFileResponse>& where,
                                                        bool* whole_stoc) {
  if (!where.ok()) {
    // NotFound: this file is gone (read by request, which says so). NotSupported: an older
    // StoC, or local reads switched off there. Anything else (the StoC unreachable) says
    // nothing about locality; the read's request gets the error.
    *whole_stoc = where.status().code() == Status::Code::kNotSupported;
    LOG_IF(INFO, *whole_stoc) << "StoC " << stoc_id << " is read by request: "
                              << where.status().ToString();
    return nullptr;
  }
  const LocalFileResponse& w = where.value();
  if (w.host_id != host_id_.value()) {
    *whole_stoc = true;  // another host: expected, not worth a log line per StoC and minute
    return nullptr;
  }
  // Not through a symbolic link, and never blocking (a FIFO put at the path).
  const int fd = ::open(w.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    // A file deleted since the StoC answered: this file only. A path that does not exist
    // here at all (another mount namespace) or may not be opened: the whole StoC.
    struct stat dir_st;
    const std::string dir = w.path.substr(0, w.path.rfind('/') + 1);
    *whole_stoc = err != ENOENT || ::stat(dir.c_str(), &dir_st) != 0;
    LOG_IF(INFO, *whole_stoc) << "StoC " << stoc_id << " is read by request: cannot open "
                              << w.path << ": " << std::strerror(err);
    return nullptr;
  }
  auto f = std::make_shared<Fd>(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_dev) != w.device ||
      static_cast<uint64_t>(st.st_ino) != w.inode) {
    // Another file at that path: a container with its own view of the file system.
    *whole_stoc = true;
    LOG(INFO) << "StoC " << stoc_id << " is read by request: " << w.path
              << " here is not the StoC's data file of file " << file_id;
    return nullptr;
  }
  return f;
}

void LocalFiles::ForgetStoc(uint32_t stoc_id) {
  MutexLock lock(&mu_);
  auto first = files_.lower_bound(FileKey{stoc_id, 0});
  auto last = files_.upper_bound(FileKey{stoc_id, UINT64_MAX});
  for (auto it = first; it != last; ++it) {
    if (it->second != nullptr) to_close_.push_back(std::move(it->second));
  }
  files_.erase(first, last);
  ++generation_[stoc_id];
  remote_until_[stoc_id] = MonoNow() + kDownInterval;
}

void LocalFiles::Sweep() {
  std::vector<std::pair<FileKey, std::shared_ptr<Fd>>> open;
  std::vector<std::shared_ptr<Fd>> closing;  // closed below, outside mu_
  {
    MutexLock lock(&mu_);
    closing.swap(to_close_);
    for (auto it = files_.begin(); it != files_.end();) {
      if (it->second == nullptr) {
        it = files_.erase(it);  // retried: a file may have been unknown only for a moment
      } else {
        open.emplace_back(*it);
        ++it;
      }
    }
  }
  closing.clear();
  std::vector<FileKey> unlinked;
  for (const auto& [key, f] : open) {
    struct stat st;
    if (::fstat(f->fd, &st) != 0 || st.st_nlink == 0) unlinked.push_back(key);
  }
  {
    MutexLock lock(&mu_);
    for (const FileKey& key : unlinked) {
      auto it = files_.find(key);
      if (it != files_.end()) files_.erase(it);  // the last reference is in `open`
    }
  }
  open.clear();  // closes the unlinked files' descriptors here, outside mu_
}

size_t LocalFiles::open_files() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, f] : files_) n += f != nullptr;
  return n;
}

}  // namespace nova::stoc
