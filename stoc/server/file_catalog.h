// FileCatalog: a StoC's persistent list of its files, so file identity survives restarts.
//
// Every StoC file (in-memory or on disk) has
//  - a file_id: a u64 assigned here, never reused. The next id is 1 + the largest id ever
//    assigned, and it stays so after the file is deleted, after a restart and after a
//    rewrite of the catalog (which records it explicitly);
//  - a kind (FileKind);
//  - a client-chosen name (ValidateFileName), unique among live files. DESIGN.md section 4:
//    names encode (range id, table number, fragment, replica) so a restarted StoC can ask
//    each file's owner whether it is still live.
//
// On disk: `<dir>/CATALOG`, an append-only log of records. DO NOT CHANGE: persisted.
//
//   record   := masked_crc u32 | payload_length u32 | type u8 | payload
//     masked_crc = crc32c::Mask(crc32c of type byte and payload); fixed-width integers are
//     little-endian (common/coding.h).
//   kCreate  (1) payload := file_id u64 | kind u8 | name (varint32 length + bytes)
//   kDelete  (2) payload := file_id u64
//   kNextId  (3) payload := next_id u64          written by a rewrite
//   kFence   (4) payload := range_id u32 | owner_epoch u64
//     a range's newest owner epoch (owner fencing, docs/stoc.md); a later record for the
//     same range never goes down. A StoC binary older than this record type cannot open a
//     catalog holding one (unknown record type): StoCs are not downgraded after fencing.
//
// Each mutation appends one record and fdatasyncs it before the call returns.
//
// Recovery (Open) replays the log:
//  1. An incomplete last record, or a CRC-bad one that is the last thing in the file (or
//     is followed only by zero bytes: a filesystem that grew the file before the data
//     reached the disk), is a torn tail: an append interrupted by a crash, never
//     acknowledged. It is truncated away with a LOG(WARNING).
//  2. A CRC-bad record followed by more data, or any record whose CRC is good but whose
//     contents make no sense (unknown type or kind, bad name, duplicate or reused id,
//     delete of an unknown id), is Corruption: Open fails with a message naming the byte
//     offset. Nothing after such a record is ever used.
//  3. A CATALOG.tmp left by a crash during a rewrite is deleted (the rename had not
//     happened, so CATALOG is still complete).
//
// Rewrite (compaction): when the log holds more than max(min_rewrite_records, 2 * live)
// records (live: files and fenced ranges), the live entries (kCreate, ascending id), one
// kFence per fenced range (ascending range) and a kNextId are written to
// CATALOG.tmp, which is fdatasync'd, renamed over CATALOG, and the directory fsync'd.
// Checked by Open and after every mutation.
//
// Errors: if a write or sync of the log fails, the catalog stops accepting mutations (every
// later AddFile/RemoveFile returns the same IOError) because it cannot know what reached
// the disk; reads keep working. Whether the failed mutation survives a restart is
// unspecified. Reopen to recover.
//
// Thread safety: all public methods are thread-safe; one internal mutex serializes them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "stoc/client/file_kind.h"
#include "stoc/client/file_names.h"

namespace nova::stoc {

struct FileEntry {
  uint64_t file_id = 0;
  FileKind kind = FileKind::kMemory;
  std::string name;

  bool operator==(const FileEntry&) const = default;
};

struct FileCatalogOptions {
  // A rewrite happens when the log holds more than max(this, 2 * live entries) records:
  // small catalogs are not rewritten over and over, large ones stay within 2x their size.
  uint64_t min_rewrite_records = 1000;
};

class FileCatalog {
 public:
  // Opens the catalog in `dir`, creating the directory and an empty CATALOG if missing,
  // and recovers it as described above. Returns the catalog (owned by the caller), or
  // Corruption (naming the byte offset) or IOError. At most one FileCatalog may be open on
  // a directory at a time (not enforced).
  static Result<std::unique_ptr<FileCatalog>> Open(const std::string& dir,
                                                   const FileCatalogOptions& options = {});

  ~FileCatalog();
  FileCatalog(const FileCatalog&) = delete;
  FileCatalog& operator=(const FileCatalog&) = delete;

  // Records a new file and returns its id once the record is durable. Returns
  // InvalidArgument for a bad name (ValidateFileName) or kind, AlreadyExists if a live
  // file has this name, IOError if the log could not be written or synced.
  Result<uint64_t> AddFile(std::string_view name, FileKind kind) EXCLUDES(mu_);

  // Forgets a file once the record is durable; its id is never handed out again.
  // Returns NotFound if no live file has this id, IOError as AddFile.
  Status RemoveFile(uint64_t file_id) EXCLUDES(mu_);

  // The live file with this name / id, if any.
  std::optional<FileEntry> Lookup(std::string_view name) const EXCLUDES(mu_);
  std::optional<FileEntry> Get(uint64_t file_id) const EXCLUDES(mu_);

  // All live files, ascending by id.
  std::vector<FileEntry> List() const EXCLUDES(mu_);

  // Records `epoch` as range `range_id`'s newest owner epoch once the record is durable.
  // OK without writing if the catalog already holds it; InvalidArgument if it is older
  // than the one held (or 0); IOError as AddFile.
  Status SetFence(uint32_t range_id, uint64_t epoch) EXCLUDES(mu_);
  // Every fenced range's newest owner epoch.
  std::map<uint32_t, uint64_t> Fences() const EXCLUDES(mu_);

  // The id the next AddFile will return.
  uint64_t next_file_id() const EXCLUDES(mu_);
  // Records currently in the log (for tests and metrics).
  uint64_t log_records() const EXCLUDES(mu_);
  const std::string& dir() const { return dir_; }

 private:
  FileCatalog(std::string dir, const FileCatalogOptions& options);

  // Opening steps, run once by Open before the catalog is shared (under mu_ all the same,
  // so that the helpers below can require it).
  Status Recover() EXCLUDES(mu_);
  Status Replay(std::string_view log, uint64_t* valid_length) REQUIRES(mu_);
  // Applies one CRC-checked record; returns Corruption (without offset) if it makes no
  // sense.
  Status ApplyRecord(uint8_t type, std::string_view payload) REQUIRES(mu_);

  // Appends one record at the end of the log and fdatasyncs it. On failure the log is
  // left unusable and error_ is set.
  Status AppendRecord(uint8_t type, std::string_view payload) REQUIRES(mu_);
  // Rewrites the log if it holds too many records. Returns non-OK only if the catalog is
  // left unusable (a failure before the rename just keeps the old log).
  Status MaybeRewrite() REQUIRES(mu_);
  Status Rewrite() REQUIRES(mu_);

  std::string CatalogPath() const;
  std::string TempPath() const;

  // Constant after construction.
  const std::string dir_;
  const FileCatalogOptions options_;

  mutable Mutex mu_;
  int fd_ GUARDED_BY(mu_) = -1;               // the open CATALOG, positioned by log_size_
  uint64_t log_size_ GUARDED_BY(mu_) = 0;     // bytes of valid records in CATALOG
  uint64_t log_records_ GUARDED_BY(mu_) = 0;  // records in CATALOG
  uint64_t next_id_ GUARDED_BY(mu_) = 1;      // ids start at 1; 0 is never a file id
  Status error_ GUARDED_BY(mu_);              // sticky: set when the log can no longer be trusted
  std::map<uint64_t, FileEntry> by_id_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t, std::less<>> by_name_ GUARDED_BY(mu_);
  std::map<uint32_t, uint64_t> fences_ GUARDED_BY(mu_);  // range -> newest owner epoch
};

}  // namespace nova::stoc
