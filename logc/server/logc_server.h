// LogcServer: the logging component. Hosts log file segments for LTCs, one registered,
// zero-filled region per segment (DESIGN.md section 6, docs/logc.md):
//  - memory logs: the client appends with one-sided WRITEs into the region and recovers
//    with one-sided READs; no LogC code runs for either;
//  - persisted logs (LogC started with persist on): the client's WRITEs carry the file's
//    handle as immediate; a storage thread writes everything received so far to the
//    file's disk file, fdatasyncs once for the group and notifies the client
//    (kLogPersisted). Persisted files are loaded back into fresh regions at Init().
// Owner fencing (docs/logc.md "Fencing"): the newest owner epoch seen per range is kept
// (and, persisted, written to <dir>/logs/r<range>.fence); files opened under an older one
// are fenced: read-only under a fresh rkey, their immediates refused. Invariants:
//  1. a file is fenced (fenced == true) before its old region is deregistered, so an
//     immediate processed after the deregistration is refused (never received);
//  2. a fence is answered only after every fenced file's old region was deregistered
//     (in-flight WRITEs finished) and drained (not scheduled: persisted == received unless
//     the file failed), so a listing after the answer shows every byte that was or will be
//     acknowledged to the fenced writer;
//  3. an rkey of a fenced region (retired_rkeys_) is never given to a region again in this
//     process;
//  4. fences, opens, deletes and in-sync marks are serialized by open_mu_.
// Files belong to their range, not to the connection that opened them: a client that
// disconnects leaves them in place until kDeleteLogs.
//
// Lifecycle: LogcServer(options, metrics) cannot fail; Init() validates the options,
// loads persisted files and creates the transport; Start() opens the network; Shutdown()
// stops it (idempotent; the destructor calls it).
//
// Thread safety: all public methods are thread-safe. Lock order: open_mu_, then mu_, then a
// file's mu (InfoOf takes a file's mu; it is never held while taking mu_). A fence waits on a
// file's cv (PersistLoop ending) holding open_mu_ only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/thread_pool.h"
#include "common/transport/transport.h"
#include "logc/client/logc_protocol.h"
#include "logc/server/logc_options.h"

namespace nova::logc {

class LogcServer : public rpc::RpcService, public rpc::EndpointObserver {
 public:
  // `metrics` must outlive the server.
  LogcServer(const LogcOptions& options, MetricsRegistry* metrics);
  ~LogcServer() override;
  LogcServer(const LogcServer&) = delete;
  LogcServer& operator=(const LogcServer&) = delete;

  // InvalidArgument for unusable options (persist without a directory, zero limits), the
  // IOError of an unreadable directory, or the transport's error.
  Status Init();
  // REQUIRES: Init() succeeded.
  Status Start();
  void Shutdown();

  // "host:port" of the exchange transport. REQUIRES: Start() succeeded.
  std::string address() const { return transport_->listen_address(); }
  LogcStatsResponse GetStats() const EXCLUDES(mu_);

  // rpc::RpcService
  void HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) override;
  // rpc::EndpointObserver: appends to persisted files.
  bool OnWriteWithImm(transport::PeerId peer, uint32_t imm, uint64_t length) override
      EXCLUDES(mu_);

 private:
  using Key = std::tuple<uint32_t, uint64_t, uint32_t>;  // (range, memtable, segment)
  struct LogFile;

  void HandleOpen(std::string_view payload, rpc::Responder* r) EXCLUDES(open_mu_, mu_);
  void HandleList(std::string_view payload, rpc::Responder* r) EXCLUDES(mu_);
  void HandleRead(std::string_view payload, rpc::Responder* r) EXCLUDES(mu_);
  void HandleDelete(std::string_view payload, rpc::Responder* r) EXCLUDES(mu_);
  void HandleMarkInSync(std::string_view payload, rpc::Responder* r) EXCLUDES(open_mu_, mu_);
  void HandleFence(std::string_view payload, rpc::Responder* r) EXCLUDES(open_mu_, mu_);

  // Raises `range`'s fence to `epoch` and fences its files of older epochs (invariants 1-3);
  // *fenced (if not null) counts them. OK when `epoch` is the newest (or the same); Fenced
  // when an older one; the error of writing the fence file or of a re-registration.
  Status FenceLocked(uint32_t range, uint64_t epoch, uint32_t* fenced) REQUIRES(open_mu_)
      EXCLUDES(mu_);
  // Fenced when `epoch` is older than `range`'s fence; `what` names the request.
  Status CheckEpochLocked(uint32_t range, uint64_t epoch, const char* what) const REQUIRES(mu_);
  // Registers `mem` under an rkey that no fenced region had (invariant 3).
  Result<transport::MemoryRegion> RegisterFreshLocked(char* mem, uint64_t length, uint32_t access)
      REQUIRES(mu_);
  // Writes <dir>/logs/r<range>.fence (temporary file, fsync, rename, directory fsync).
  Status WriteFenceFile(uint32_t range, uint64_t epoch) REQUIRES(open_mu_);
  // An opener of the range's newest epoch takes over a fenced file: writable again under a
  // fresh rkey, its immediates accepted. REQUIRES: f is fenced and drained.
  Status UnfenceLocked(LogFile* f, uint64_t epoch) REQUIRES(open_mu_) EXCLUDES(mu_);

  // Allocates and registers a zero-filled region of `capacity` bytes for a new file of owner
  // epoch `epoch`; a file of a fenced range's older epoch (loaded from disk) is registered
  // fenced, read-only. REQUIRES: mu_ held (memory accounting).
  // enforce_limit: refuse (ResourceExhausted) past options_.memory_limit_bytes.
  Result<std::shared_ptr<LogFile>> NewFileLocked(const Key& key, uint64_t capacity, bool persist,
                                                 bool enforce_limit, uint64_t epoch) REQUIRES(mu_);
  // Loads <dir>/logs back into regions.
  Status LoadPersistedFiles() EXCLUDES(mu_);
  // Writes, fdatasyncs and acknowledges what `file` received; runs on the storage pool.
  void PersistLoop(const std::shared_ptr<LogFile>& file);
  // Deregisters and unlinks a file removed from the maps.
  void DestroyFile(const std::shared_ptr<LogFile>& file) EXCLUDES(mu_);
  LogFileInfo InfoOf(const LogFile& f) const;
  std::string LogsDir() const { return options_.dir + "/logs"; }

  // Constant after construction.
  const LogcOptions options_;
  MetricsRegistry* const metrics_;  // must outlive this
  // Random and non-zero, new at every start: tells a client that this process may have lost
  // the in-memory log copies (and in-sync marks) of an earlier one.
  const uint64_t incarnation_;

  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  ThreadPool storage_pool_;
  ThreadPool control_pool_;

  // Serializes opens, fences, deletes and the creation of in-sync mark files (invariant 4).
  Mutex open_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  std::map<Key, std::shared_ptr<LogFile>> files_ GUARDED_BY(mu_);
  std::unordered_map<uint32_t, std::shared_ptr<LogFile>> by_handle_ GUARDED_BY(mu_);
  uint32_t next_handle_ GUARDED_BY(mu_) = 1;
  uint64_t memory_bytes_ GUARDED_BY(mu_) = 0;
  // Ranges marked in sync (kMarkInSync) in this incarnation, or loaded from their persisted
  // marks (docs/durability.md "Recovery").
  std::set<uint32_t> in_sync_ GUARDED_BY(mu_);
  // The newest owner epoch seen per range (absent: 0, unfenced); loaded from .fence files.
  std::map<uint32_t, uint64_t> fences_ GUARDED_BY(mu_);
  // rkeys of regions deregistered by a fence: never registered again (invariant 3). One
  // entry per fenced file in this process's life.
  std::set<uint32_t> retired_rkeys_ GUARDED_BY(mu_);

  // Metrics (owned by metrics_).
  Counter* received_bytes_;
  Counter* persisted_bytes_;
  Counter* fsyncs_;
  Counter* errors_;
  Histogram* fsync_latency_us_;
};

}  // namespace nova::logc
