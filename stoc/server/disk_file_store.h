// Persistent StoC files on the local disk: one data file per StoC file, holding appended
// blocks in the block format of block_format.h (header with length and CRC, then data).
//
// Appends come in groups: a storage thread writes every block queued for a file, then
// fdatasyncs once, and only then are the blocks acknowledged (group commit). A block that
// fails to write is cut off again (ftruncate) so a torn block is never visible; after a
// failed fdatasync the file refuses further appends (what reached the disk is unknown).
//
// Thread safety: DiskFileStore is thread-safe. A DiskFile's mutable state is guarded by its
// own mutex; AppendGroup for one file must not run concurrently with itself (the StoC
// schedules at most one drain per file). Lock order: a DiskFile's mu_ and the store's mu_
// are never held together.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "stoc/server/block_format.h"
#include "stoc/server/file_catalog.h"

namespace nova::stoc {

// One block waiting to be appended. `data` must stay valid until AppendGroup returns.
struct BlockToAppend {
  const char* data = nullptr;
  uint32_t size = 0;
  // Results:
  Status status;
  uint64_t offset = 0;  // file offset of the block's data
};

class DiskFile {
 public:
  DiskFile(uint64_t file_id, int fd) : file_id_(file_id), fd_(fd) {}
  ~DiskFile();  // closes the fd
  DiskFile(const DiskFile&) = delete;
  DiskFile& operator=(const DiskFile&) = delete;

  uint64_t file_id() const { return file_id_; }
  // Bytes in the data file (headers included): where the next block goes.
  uint64_t size() const EXCLUDES(mu_);
  // Non-OK if the file is corrupt or failed an fdatasync.
  Status health() const EXCLUDES(mu_);
  // The valid blocks, in file order (a copy: appends may follow).
  std::vector<BlockExtent> blocks() const EXCLUDES(mu_);
  // The data file's st_dev and st_ino (for clients that read it locally); IOError if fstat
  // fails.
  Status Identity(uint64_t* device, uint64_t* inode) const;

  // Writes the blocks in order, fdatasyncs once, and records them. Each block's status says
  // whether it is durable. `*fsyncs` counts the fdatasyncs done.
  // Takes mu_ only around reading and recording the state, not around the I/O.
  void AppendGroup(std::vector<BlockToAppend>* blocks, uint64_t* fsyncs) EXCLUDES(mu_);

  // Reads [offset, offset+size) into dst. The range must lie inside one block's data
  // (OutOfRange otherwise). A whole-block read is checked against its CRC (Corruption).
  // With `cached_only` it never waits for the disk: Unavailable unless every byte is in
  // the page cache (preadv2 RWF_NOWAIT), NotSupported where the kernel, the file system or
  // a seccomp filter refuses such reads.
  Status Read(uint64_t offset, uint64_t size, char* dst, bool cached_only = false) const
      EXCLUDES(mu_);

 private:
  friend class DiskFileStore;
  const uint64_t file_id_;
  const int fd_;
  mutable Mutex mu_;
  std::vector<BlockExtent> blocks_ GUARDED_BY(mu_);  // sorted by data_offset
  uint64_t size_ GUARDED_BY(mu_) = 0;
  Status health_ GUARDED_BY(mu_);
};

class DiskFileStore {
 public:
  // Files live in `dir` as <file_id in hex>.dat.
  explicit DiskFileStore(std::string dir) : dir_(std::move(dir)) {}
  DiskFileStore(const DiskFileStore&) = delete;
  DiskFileStore& operator=(const DiskFileStore&) = delete;

  // Opens the data files of `entries` (the catalog's disk files) after a restart: scans each,
  // cuts a torn tail, marks a corrupt file (it stays listed; reads and appends fail).
  // A missing data file is recreated empty (the catalog entry was durable, its first block
  // was not). Returns an error only for failures to create the directory.
  Status Recover(const std::vector<FileEntry>& entries) EXCLUDES(mu_);
  // Creates an empty data file.
  Status Create(uint64_t file_id) EXCLUDES(mu_);
  // nullptr if unknown.
  std::shared_ptr<DiskFile> Get(uint64_t file_id) const EXCLUDES(mu_);
  // Forgets the file and unlinks its data. Readers holding it keep a valid fd.
  Status Delete(uint64_t file_id) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);
  // Where file `file_id`'s data file is (dir/<file_id in hex>.dat), as given to the
  // constructor (relative if `dir` was).
  std::string PathOf(uint64_t file_id) const;

 private:

  const std::string dir_;
  mutable Mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<DiskFile>> files_ GUARDED_BY(mu_);
};

}  // namespace nova::stoc
