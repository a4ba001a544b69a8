#include "stoc/server/memory_file_store.h"

#include <sys/mman.h>

#include <glog/logging.h>

namespace nova::stoc {

namespace {
RegionInfo Info(const transport::MemoryRegion& mr, uint64_t logical_offset) {
  auto remote = mr.Remote();
  return RegionInfo{logical_offset, remote.addr, remote.rkey, mr.length};
}
}  // namespace

MemoryFileStore::MemoryFileStore(transport::Transport* transport, uint64_t region_bytes,
                                 uint64_t limit_bytes)
    : transport_(transport), region_bytes_(region_bytes), limit_bytes_(limit_bytes) {}

MemoryFileStore::~MemoryFileStore() {
  for (auto& [id, f] : files_) {
    for (auto& r : f.regions) FreeRegion(r);
  }
}

Result<MemoryFileStore::Region> MemoryFileStore::AllocateRegion(uint64_t bytes,
                                                                uint64_t logical_offset) {
  if (bytes_used_ + bytes > limit_bytes_) {
    return Status::ResourceExhausted("StoC memory limit reached: " + std::to_string(bytes_used_) +
                                     " of " + std::to_string(limit_bytes_) + " bytes in use, " +
                                     std::to_string(bytes) + " more asked");
  }
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Status::FromErrno("mmap memory region", errno);
  auto mr =
      transport_->RegisterMemory(mem, bytes, transport::kRemoteRead | transport::kRemoteWrite);
  if (!mr.ok()) {
    ::munmap(mem, bytes);
    return mr.status();
  }
  bytes_used_ += bytes;
  return Region{static_cast<char*>(mem), mr.value(), logical_offset};
}

void MemoryFileStore::FreeRegion(const Region& r) {
  Status s = transport_->DeregisterMemory(r.mr);
  if (!s.ok()) {
    // A peer may still write into it: leaking is the safe choice.
    LOG(ERROR) << "cannot deregister a memory-file region, leaking it: " << s.ToString();
    return;
  }
  ::munmap(r.mem, r.mr.length);
}

Status MemoryFileStore::Create(uint64_t file_id, const std::string& name) {
  MutexLock lock(&mu_);
  if (files_.count(file_id)) return Status::AlreadyExists("memory file exists: " + name);
  auto region = AllocateRegion(region_bytes_, 0);
  if (!region.ok()) return region.status();
  File& f = files_[file_id];
  f.name = name;
  f.regions.push_back(region.value());
  return Status::OK();
}

Result<RegionInfo> MemoryFileStore::NewRegion(uint64_t file_id, uint64_t min_bytes) {
  MutexLock lock(&mu_);
  auto it = files_.find(file_id);
  if (it == files_.end()) return Status::NotFound("no memory file " + std::to_string(file_id));
  File& f = it->second;
  const Region& last = f.regions.back();
  const uint64_t logical = last.logical_offset + last.mr.length;
  auto region = AllocateRegion(std::max(min_bytes, region_bytes_), logical);
  if (!region.ok()) return region.status();
  f.regions.push_back(region.value());
  return Info(region->mr, logical);
}

Result<FileState> MemoryFileStore::Stat(uint64_t file_id) const {
  MutexLock lock(&mu_);
  auto it = files_.find(file_id);
  if (it == files_.end()) return Status::NotFound("no memory file " + std::to_string(file_id));
  FileState st;
  st.file_id = file_id;
  st.kind = FileKind::kMemory;
  st.name = it->second.name;
  st.length = it->second.length;
  for (const Region& r : it->second.regions) st.regions.push_back(Info(r.mr, r.logical_offset));
  return st;
}

Status MemoryFileStore::SetLength(uint64_t file_id, uint64_t length) {
  MutexLock lock(&mu_);
  auto it = files_.find(file_id);
  if (it == files_.end()) return Status::NotFound("no memory file " + std::to_string(file_id));
  const Region& last = it->second.regions.back();
  if (length > last.logical_offset + last.mr.length) {
    return Status::OutOfRange("length beyond the file's regions");
  }
  it->second.length = length;
  return Status::OK();
}

Result<std::pair<transport::MemoryRegion, uint64_t>> MemoryFileStore::Locate(
    uint64_t file_id, uint64_t offset, uint64_t size) const {
  MutexLock lock(&mu_);
  auto it = files_.find(file_id);
  if (it == files_.end()) return Status::NotFound("no memory file " + std::to_string(file_id));
  for (const Region& r : it->second.regions) {
    if (offset >= r.logical_offset && offset - r.logical_offset <= r.mr.length &&
        size <= r.mr.length - (offset - r.logical_offset)) {
      return std::make_pair(r.mr, offset - r.logical_offset);
    }
  }
  return Status::OutOfRange("read [" + std::to_string(offset) + ", +" + std::to_string(size) +
                            ") is not inside one region of memory file " + std::to_string(file_id));
}

Status MemoryFileStore::Delete(uint64_t file_id) {
  File f;
  {
    MutexLock lock(&mu_);
    auto it = files_.find(file_id);
    if (it == files_.end()) return Status::NotFound("no memory file " + std::to_string(file_id));
    f = std::move(it->second);
    files_.erase(it);
    for (const Region& r : f.regions) bytes_used_ -= r.mr.length;
  }
  for (const Region& r : f.regions) FreeRegion(r);
  return Status::OK();
}

uint64_t MemoryFileStore::bytes_used() const {
  MutexLock lock(&mu_);
  return bytes_used_;
}

}  // namespace nova::stoc
