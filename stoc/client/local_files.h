// LocalFiles: short-circuit reads of a StoC's disk files by a client on the same host
// (docs/stoc.md "Local reads").
//
// Over tcp every block a client reads from a StoC is a round trip: a message each way and
// a wake-up of a StoC thread and of the caller, tens of microseconds each on a busy host.
// When the StoC runs on the client's own host, the bytes are already in the shared page
// cache: the client can read the StoC's data file itself with one pread, as LevelDB reads
// its own tables (HDFS's "short-circuit local reads" are the same idea).
//
// The first read of a file asks the StoC where its data file is (kLocalFile: the host's
// identity, the absolute path, the file's device and inode). The client uses the answer
// only if its own identity is the same (same host and boot, same network namespace) and
// the file it opens at that path is a regular file with that device and inode (not a file
// of another mount namespace, nor one recreated since); then it keeps the descriptor and
// reads the file with pread from then on. Only bytes the StoC acknowledged are ever read
// (their offsets come from the appends' acknowledgments), so what a pread returns is what a
// request would. A read of a whole StoC block (block_format.h: the 8-byte header before it
// gives its length) is checked against the header's CRC, as the StoC checks those.
//
// A StoC that cannot be read locally (another host, NotSupported, a path the client may
// not open) is left alone for kRetryInterval; one that went down (ForgetStoc) loses its
// descriptors, and a locate that was under way when it went down is not used, so its files
// are read locally again only once it answers kLocalFile again. Every failure falls back
// to the request, so a local read never fails a read the StoC would serve.
//
// Map lets a reader go one step further, as LevelDB reads its own tables: a read-only
// mapping of the whole file (its size when mapped), whose acknowledged bytes the reader uses
// in place, with no system call, copy or buffer per read (MappedFile::Find). A mapping
// outlives the descriptor it was made from and the file's deletion; its holder keeps it for
// as long as it reads the file (a table's source: while the table is open). Only bytes the
// StoC acknowledged are read through it, and a StoC only ever cuts unacknowledged bytes off
// a file (a failed append, a torn tail at recovery), so no read touches a page past the
// file's end. An I/O error under a mapping is a SIGBUS, as for LevelDB's mapped tables. At
// most MaxMappings() mappings exist at once, so a host with many tables keeps within the
// kernel's limit of mappings per process; past it, reads use pread.
//
// A descriptor keeps a file the StoC deleted readable (as a StoC's own readers do) and its
// disk space allocated: a background thread closes the descriptors of unlinked files every
// kSweepInterval, and closes every descriptor let go of (evicted, forgotten), so a reader
// waits for a close that frees a file's blocks only if it was still reading that file
// then (its reference is the last). At most MaxOpenFiles() stay open.
//
// Thread safety: thread-safe. mu_ guards the maps; reads run outside it, on a descriptor
// kept alive by a shared_ptr.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "stoc/client/stoc_protocol.h"

namespace nova::stoc {

// Who may read a StoC's files locally: the host's boot id (/proc/sys/kernel/random/boot_id)
// and the process's network namespace (the inode of /proc/self/ns/net): processes on one
// host in different network namespaces are "hosts" of their own (the test bed's simulated
// hosts, containers), whose reads must cross their network. An error where either cannot
// be read (then no file is read locally).
Result<std::string> HostIdentity();

// A read-only mapping of a StoC's data file on this host (LocalFiles::Map): the file's first
// size() bytes.
//
// Thread safety: immutable; safe for concurrent use.
class MappedFile {
 public:
  // Takes over the mapping [data, +size); `live` counts the mappings that exist (this one
  // included), shared so that a mapping may outlive its LocalFiles.
  MappedFile(const char* data, uint64_t size, std::shared_ptr<std::atomic<size_t>> live)
      : data_(data), size_(size), live_(std::move(live)) {}
  ~MappedFile();  // unmaps it
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint64_t size() const { return size_; }
  // The bytes [offset, +n) in place, or null if the mapping does not hold all of them, or
  // if they are a whole StoC block whose CRC does not match (as LocalFiles::Read checks).
  // REQUIRES: the StoC acknowledged those bytes.
  const char* Find(uint64_t offset, uint64_t n) const;

 private:
  const char* const data_;
  const uint64_t size_;
  const std::shared_ptr<std::atomic<size_t>> live_;
};

class LocalFiles {
 public:
  // Asks StoC `stoc_id` where file `file_id` lies (a kLocalFile request).
  using Locate = std::function<Result<LocalFileResponse>(uint32_t stoc_id, uint64_t file_id)>;

  static constexpr std::chrono::seconds kRetryInterval{60};
  static constexpr std::chrono::seconds kSweepInterval{5};
  static constexpr std::chrono::seconds kDownInterval{1};

  // Starts the sweeping thread.
  explicit LocalFiles(Locate locate);
  ~LocalFiles();  // stops it, closes every descriptor
  LocalFiles(const LocalFiles&) = delete;
  LocalFiles& operator=(const LocalFiles&) = delete;

  // Reads [offset, +size) of disk file `file_id` of StoC `stoc_id` into dst with pread.
  // True if it did (all `size` bytes); false if the caller must send the request instead
  // (not local, not known to the StoC, a short read, an I/O error, a CRC mismatch).
  bool Read(uint32_t stoc_id, uint64_t file_id, uint64_t offset, uint64_t size, char* dst)
      EXCLUDES(mu_);
  // A read-only mapping of disk file `file_id` of StoC `stoc_id`, made once per open
  // descriptor (later calls return the same one); null if the file must be read by Read or
  // by request (not local, empty, mmap failed, MaxMappings() reached). Reads through it see
  // the file as large as it was when mapped: a caller falls back to Read past its end.
  std::shared_ptr<const MappedFile> Map(uint32_t stoc_id, uint64_t file_id) EXCLUDES(mu_);
  // Closes the descriptors of StoC `stoc_id`'s files and reads none of its files locally
  // for kDownInterval: the StoC is down (its client saw the connection fail) or moved.
  void ForgetStoc(uint32_t stoc_id) EXCLUDES(mu_);
  // Closes the descriptors of files unlinked since they were opened, and forgets which
  // files were unknown. The sweeping thread calls it every kSweepInterval; tests directly.
  void Sweep() EXCLUDES(mu_);

  // Descriptors open now, reads served by pread so far, and mappings that exist (held here
  // or by readers).
  size_t open_files() const EXCLUDES(mu_);
  uint64_t local_reads() const { return local_reads_.load(std::memory_order_relaxed); }
  size_t live_mappings() const { return live_mappings_->load(std::memory_order_relaxed); }
  // The most descriptors kept: 4096, or a quarter of the soft RLIMIT_NOFILE if lower (the
  // process needs descriptors for its connections and files too).
  static size_t MaxOpenFiles();
  // The most mappings at once: 16384, or a quarter of /proc/sys/vm/max_map_count if lower.
  static size_t MaxMappings();

 private:
  struct Fd {
    explicit Fd(int f) : fd(f) {}
    ~Fd();
    const int fd;
    Mutex map_mu;
    bool map_tried GUARDED_BY(map_mu) = false;
    std::shared_ptr<const MappedFile> mapped GUARDED_BY(map_mu);  // null: not mappable
  };
  using FileKey = std::pair<uint32_t, uint64_t>;  // (stoc_id, file_id)

  // The open descriptor of the file, opening it first if this StoC may be local; null
  // if the file must be read by request.
  std::shared_ptr<Fd> FdOf(uint32_t stoc_id, uint64_t file_id) EXCLUDES(mu_);
  // Opens the file the StoC's answer names and checks it is that file; null otherwise
  // (with *whole_stoc set if no file of this StoC can be read locally).
  std::shared_ptr<Fd> OpenChecked(uint32_t stoc_id, uint64_t file_id,
                                  const Result<LocalFileResponse>& where, bool* whole_stoc);
  // Makes room for one more entry: drops the entries of unknown files, then the first.
  void EvictLocked() REQUIRES(mu_);
  void SweepLoop() EXCLUDES(mu_);

  const Locate locate_;
  const Result<std::string> host_id_;
  const size_t max_open_;
  const size_t max_mappings_;
  std::atomic<uint64_t> local_reads_{0};
  const std::shared_ptr<std::atomic<size_t>> live_mappings_ =
      std::make_shared<std::atomic<size_t>>(0);
  mutable Mutex mu_;
  CondVar cv_;  // wakes the sweeping thread to stop
  bool stop_ GUARDED_BY(mu_) = false;
  // Null: read by request (the StoC did not know the file), until the next sweep.
  std::map<FileKey, std::shared_ptr<Fd>> files_ GUARDED_BY(mu_);
  // StoCs not to be read locally before the time given.
  std::map<uint32_t, MonoTime> remote_until_ GUARDED_BY(mu_);
  // Bumped by ForgetStoc: a locate that started under an older generation is not used.
  std::map<uint32_t, uint64_t> generation_ GUARDED_BY(mu_);
  // Descriptors let go of, closed by the sweeping thread (outside mu_).
  std::vector<std::shared_ptr<Fd>> to_close_ GUARDED_BY(mu_);
  std::thread sweeper_;
};

}  // namespace nova::stoc
