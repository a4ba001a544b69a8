#include "stoc/server/disk_file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <glog/logging.h>

namespace nova::stoc {

namespace {

Status WriteAllAt(int fd, const iovec* iov, int n, uint64_t offset, uint64_t total) {
  std::vector<iovec> v(iov, iov + n);
  uint64_t done = 0;
  size_t first = 0;
  while (done < total) {
    ssize_t w = ::pwritev(fd, v.data() + first, static_cast<int>(v.size() - first),
                          static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write", errno);
    }
    if (w == 0) return Status::IOError("write made no progress");
    done += static_cast<uint64_t>(w);
    // Advance the iovecs past what was written.
    uint64_t left = static_cast<uint64_t>(w);
    while (left > 0 && first < v.size()) {
      if (left >= v[first].iov_len) {
        left -= v[first].iov_len;
        ++first;
      } else {
        v[first].iov_base = static_cast<char*>(v[first].iov_base) + left;
        v[first].iov_len -= left;
        left = 0;
      }
    }
  }
  return Status::OK();
}

}  // namespace

DiskFile::~DiskFile() { ::close(fd_); }

uint64_t DiskFile::size() const {
  MutexLock lock(&mu_);
  return size_;
}

Status DiskFile::Identity(uint64_t* device, uint64_t* inode) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    return Status::FromErrno("fstat of StoC file " + std::to_string(file_id_), errno);
  }
  *device = static_cast<uint64_t>(st.st_dev);
  *inode = static_cast<uint64_t>(st.st_ino);
  return Status::OK();
}

Status DiskFile::health() const {
  MutexLock lock(&mu_);
  return health_;
}

std::vector<BlockExtent> DiskFile::blocks() const {
  MutexLock lock(&mu_);
  return blocks_;
}

void DiskFile::AppendGroup(std::vector<BlockToAppend>* blocks, uint64_t* fsyncs) {
  uint64_t offset;
  {
    MutexLock lock(&mu_);
    if (!health_.ok()) {
      for (auto& b : *blocks) b.status = health_;
      return;
    }
    offset = size_;
  }
  std::vector<BlockExtent> written;
  Status failure;
  for (auto& b : *blocks) {
    if (!failure.ok()) {
      b.status = failure;
      continue;
    }
    if (b.size > kMaxBlockBytes) {
      b.status = Status::InvalidArgument("block larger than the maximum block size");
      continue;
    }
    char header[kBlockHeaderBytes];
    const uint32_t crc = MaskedBlockCrc(std::string_view(b.data, b.size));
    EncodeBlockHeader(b.size, crc, header);
    iovec iov[2] = {{header, kBlockHeaderBytes}, {const_cast<char*>(b.data), b.size}};
    Status s = WriteAllAt(fd_, iov, 2, offset, kBlockHeaderBytes + b.size);
    if (!s.ok()) {
      // Cut off whatever part of the block made it, so no torn block is ever visible.
      if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0) {
        LOG(ERROR) << "file " << file_id_ << ": cannot cut a failed append: " << strerror(errno);
      }
      failure = s.Prepend("append to StoC file " + std::to_string(file_id_));
      LOG(WARNING) << failure.ToString();
      b.status = failure;
      continue;
    }
    written.push_back(BlockExtent{offset + kBlockHeaderBytes, b.size, crc});
    b.offset = offset + kBlockHeaderBytes;
    offset += kBlockHeaderBytes + b.size;
  }
  if (written.empty()) return;
  Status synced;
  if (::fdatasync(fd_) != 0) synced = Status::FromErrno("fdatasync", errno);
  ++*fsyncs;
  MutexLock lock(&mu_);
  if (!synced.ok()) {
    // What reached the disk is unknown: refuse everything from now on.
    health_ = synced.Prepend("StoC file " + std::to_string(file_id_) + " failed to sync");
    LOG(ERROR) << health_.ToString();
    for (auto& b : *blocks) {
      if (b.status.ok()) b.status = health_;
    }
    return;
  }
  blocks_.insert(blocks_.end(), written.begin(), written.end());
  size_ = offset;
}

Status DiskFile::Read(uint64_t offset, uint64_t size, char* dst, bool cached_only) const {
  BlockExtent extent;
  {
    MutexLock lock(&mu_);
    if (!health_.ok() && health_.IsCorruption()) return health_;
    auto it = std::upper_bound(
        blocks_.begin(), blocks_.end(), offset,
        [](uint64_t off, const BlockExtent& e) { return off < e.data_offset; });
    if (it == blocks_.begin()) {
      return Status::OutOfRange("read at " + std::to_string(offset) + " is not inside a block");
    }
    extent = *(it - 1);
  }
  if (offset + size < offset || offset + size > extent.data_offset + extent.size) {
    return Status::OutOfRange("read [" + std::to_string(offset) + ", +" + std::to_string(size) +
                              ") crosses the end of its block");
  }
  uint64_t done = 0;
  while (done < size) {
    ssize_t r;
    if (cached_only) {
      iovec iov{dst + done, size - done};
      r = ::preadv2(fd_, &iov, 1, static_cast<off_t>(offset + done), RWF_NOWAIT);
      if (r < 0 && errno == EAGAIN) return Status::Unavailable("not in the page cache");
      if (r < 0 && (errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL || errno == EPERM)) {
        // No RWF_NOWAIT here (old kernel, file system), or a seccomp filter refuses it.
        return Status::NotSupported(std::string("preadv2(RWF_NOWAIT): ") + std::strerror(errno));
      }
    } else {
      r = ::pread(fd_, dst + done, size - done, static_cast<off_t>(offset + done));
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read StoC file " + std::to_string(file_id_), errno);
    }
    if (r == 0) return Status::Corruption("StoC file " + std::to_string(file_id_) + " is short");
    done += static_cast<uint64_t>(r);
  }
  if (offset == extent.data_offset && size == extent.size) {
    return VerifyBlock(extent, std::string_view(dst, size));
  }
  return Status::OK();
}

std::string DiskFileStore::PathOf(uint64_t file_id) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016" PRIx64 ".dat", file_id);
  return dir_ + "/" + name;
}

Status DiskFileStore::Recover(const std::vector<FileEntry>& entries) {
  if (::mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno("mkdir " + dir_, errno);
  }
  for (const FileEntry& e : entries) {
    if (e.kind != FileKind::kDisk) continue;
    const std::string path = PathOf(e.file_id);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      LOG(ERROR) << "cannot open StoC file " << e.name << " (" << path << "): " << strerror(errno);
      continue;
    }
    auto file = std::make_shared<DiskFile>(e.file_id, fd);
    {
      // Not shared yet; the lock only satisfies the analysis.
      MutexLock file_lock(&file->mu_);
      auto scan = ScanBlockFile(fd);
      if (!scan.ok()) {
        file->health_ = scan.status();
      } else {
        if (scan->torn_bytes > 0) {
          LOG(WARNING) << "StoC file " << e.name << ": cutting a torn tail of " << scan->torn_bytes
                       << " bytes (an append that was never acknowledged)";
          Status t = TruncateTornTail(fd, scan.value());
          if (!t.ok()) file->health_ = t;
        }
        if (scan->corrupt) {
          file->health_ = Status::Corruption("StoC file " + e.name + ": " + scan->corruption);
          LOG(ERROR) << file->health_.ToString() << "; its reads and appends will fail";
        }
        file->blocks_ = std::move(scan->blocks);
        file->size_ = scan->valid_length;
      }
    }
    MutexLock lock(&mu_);
    files_[e.file_id] = std::move(file);
  }
  return Status::OK();
}

Status DiskFileStore::Create(uint64_t file_id) {
  const std::string path = PathOf(file_id);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("create " + path, errno);
  // Make the new name durable: fdatasync of the file later does not cover the directory.
  int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0 || ::fsync(dir_fd) != 0) {
    Status s = Status::FromErrno("fsync " + dir_, errno);
    if (dir_fd >= 0) ::close(dir_fd);
    ::close(fd);
    return s;
  }
  ::close(dir_fd);
  MutexLock lock(&mu_);
  files_[file_id] = std::make_shared<DiskFile>(file_id, fd);
  return Status::OK();
}

std::shared_ptr<DiskFile> DiskFileStore::Get(uint64_t file_id) const {
  MutexLock lock(&mu_);
  auto it = files_.find(file_id);
  return it == files_.end() ? nullptr : it->second;
}

Status DiskFileStore::Delete(uint64_t file_id) {
  {
    MutexLock lock(&mu_);
    if (files_.erase(file_id) == 0)
      return Status::NotFound("no disk file " + std::to_string(file_id));
  }
  const std::string path = PathOf(file_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("unlink " + path, errno);
  return Status::OK();
}

size_t DiskFileStore::size() const {
  MutexLock lock(&mu_);
  return files_.size();
}

}  // namespace nova::stoc
