// In-memory StoC files: each is a list of contiguous registered regions. Clients append with
// one-sided WRITEs at offsets they track and read with one-sided READs, so only open, delete
// and new-region requests use this StoC's CPU. Contents are volatile: they are lost when the
// StoC stops (the file's catalog entry is dropped at restart).
//
// Thread safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_protocol.h"

namespace nova::stoc {

class MemoryFileStore {
 public:
  // `transport` registers the regions and must outlive the store. New regions are at least
  // `region_bytes`; all regions together stay within `limit_bytes`.
  MemoryFileStore(transport::Transport* transport, uint64_t region_bytes, uint64_t limit_bytes);
  ~MemoryFileStore();  // deregisters and frees every region
  MemoryFileStore(const MemoryFileStore&) = delete;
  MemoryFileStore& operator=(const MemoryFileStore&) = delete;

  // Creates a file with one region. ResourceExhausted past the memory limit.
  Status Create(uint64_t file_id, const std::string& name) EXCLUDES(mu_);
  // Adds a region of at least max(min_bytes, region_bytes).
  Result<RegionInfo> NewRegion(uint64_t file_id, uint64_t min_bytes) EXCLUDES(mu_);
  // The file's state (regions included), or NotFound.
  Result<FileState> Stat(uint64_t file_id) const EXCLUDES(mu_);
  // Records the length a client appended (for later readers).
  Status SetLength(uint64_t file_id, uint64_t length) EXCLUDES(mu_);
  // Copies a range for a two-sided read. Returns the region holding it and the offset.
  Result<std::pair<transport::MemoryRegion, uint64_t>> Locate(uint64_t file_id, uint64_t offset,
                                                              uint64_t size) const EXCLUDES(mu_);
  // Deregisters (waiting for in-flight one-sided ops) and frees the file's regions.
  Status Delete(uint64_t file_id) EXCLUDES(mu_);

  uint64_t bytes_used() const EXCLUDES(mu_);
  uint64_t limit_bytes() const { return limit_bytes_; }

 private:
  struct Region {
    char* mem = nullptr;  // mmap'ed: pages are only backed once written
    transport::MemoryRegion mr;
    uint64_t logical_offset = 0;
  };
  struct File {
    std::string name;
    std::vector<Region> regions;
    uint64_t length = 0;
  };

  Result<Region> AllocateRegion(uint64_t bytes, uint64_t logical_offset) REQUIRES(mu_);
  // Deregisters and unmaps a region no file holds any more; called without mu_ (it waits
  // for in-flight one-sided operations).
  void FreeRegion(const Region& r) EXCLUDES(mu_);

  transport::Transport* const transport_;  // must outlive this
  const uint64_t region_bytes_;
  const uint64_t limit_bytes_;

  mutable Mutex mu_;
  std::unordered_map<uint64_t, File> files_ GUARDED_BY(mu_);
  uint64_t bytes_used_ GUARDED_BY(mu_) = 0;
};

}  // namespace nova::stoc
