// StocClient: the client library of StoCs, used by LTCs, LogCs and tools (paper Figure 4.1):
// Open a file in memory or on disk, Append blocks, Read blocks, Close, Delete, List, Stats.
//
//  - In-memory files: appends are one-sided WRITEs at the offset this client tracks and
//    reads are one-sided READs: the StoC's CPU is not involved (only open/new-region are).
//  - Persistent files: an append WRITEs the block into the slot the StoC reserved for this
//    client in its file buffer, with the slot id as immediate, and waits for the StoC's
//    acknowledgment that the block is durable. A read asks the StoC, whose storage thread
//    WRITEs the block into the caller's registered buffer, then answers.
// Every response carries the StoC's queue depth; load_view() keeps the latest for
// power-of-d placement (placement.h).
//
// Operations block the calling thread until done or until options.timeout passes.
// Thread safety: StocClient is thread-safe; one StocFile must be used by one thread at a time.
// Locks: mu_ (peers, waiters, regions) and each append's AckWaiter::mu, never held together;
// the LoadView's lock is taken with neither.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/transport/transport.h"
#include "stoc/client/local_files.h"
#include "stoc/client/placement.h"
#include "stoc/client/stoc_protocol.h"

namespace nova::stoc {

// Where a block lives. Plain value.
struct BlockHandle {
  uint32_t stoc_id = 0;
  uint64_t file_id = 0;
  FileKind kind = FileKind::kDisk;
  uint64_t offset = 0;  // of the block's first byte in the file
  uint64_t size = 0;
  // A handle for the sub-range [offset + delta, +size) of this block.
  BlockHandle Slice(uint64_t delta, uint64_t n) const {
    BlockHandle b = *this;
    b.offset += delta;
    b.size = n;
    return b;
  }
};

// An open file, owned by the caller. Use from one thread at a time.
struct StocFile {
  uint32_t stoc_id = 0;
  uint64_t file_id = 0;
  FileKind kind = FileKind::kDisk;
  std::string name;
  uint64_t length = 0;               // memory: next append offset; disk: bytes in the file
  std::vector<RegionInfo> regions;   // memory files
  SlotInfo slot;                     // disk files opened for append
  uint64_t owner_epoch = 0;          // OpenOptions::owner_epoch, sent with slot reservations
  // Set when an append's outcome is unknown (timeout): the handle must be reopened.
  bool broken = false;
};

struct OpenOptions {
  bool create = true;         // create if missing (else NotFound)
  bool for_append = true;     // disk files: reserve an append slot
  uint64_t slot_bytes = 0;    // disk: largest block expected (0 = the StoC's default, 1 MiB)
  // The writer's owner epoch of the file's range (0 = legacy, never fenced off). The StoC
  // refuses the open, and later appends through it, with Status::Fenced once the range is
  // fenced at a newer epoch (stoc_protocol.h).
  uint64_t owner_epoch = 0;
};

struct StocClientOptions {
  std::chrono::milliseconds timeout{30000};
  // Disk blocks of at most kMaxInlineReadBytes (stoc_protocol.h) come back in the StoC's
  // response (kReadInline: one round trip over tcp); false, and for bigger reads: the StoC
  // WRITEs them into the destination (kRead: one-sided, zero-copy with RDMA, but a WRITE,
  // its acknowledgment and a response over tcp). A StoC too old for kReadInline is read
  // with kRead. Users on the verbs backend set it false.
  bool inline_reads = true;
  // Disk blocks of a StoC on this host (and network namespace) are read from its data file
  // with pread, without a request (local_files.h, docs/stoc.md "Local reads"), while the
  // StoC is up; every read that cannot be served that way is sent as above. Off by default
  // for library users (a test that arms the StoC's "stoc.read" fault point reads by
  // request); the LTC turns it on (--ltc_local_reads).
  bool local_reads = false;
  // With local_reads: MapLocal maps such files, for readers that use their bytes in place
  // (StocTableStore's table reads: no system call, copy or buffer per block, as LevelDB
  // reads its own tables). The LTC sets it from --ltc_local_reads_mmap.
  bool map_local_files = true;
  // Where Read counts itself: stoc_client_reads_total and stoc_client_read_us_total (every
  // block read, failed ones included). Null: not counted. Must outlive the client.
  MetricsRegistry* metrics = nullptr;
};

class StocClient : public rpc::RpcService, public rpc::EndpointObserver {
 public:
  // Registers itself with `endpoint` for append acknowledgments and peer events.
  // REQUIRES: before the endpoint's transport starts. `endpoint` must outlive this.
  StocClient(rpc::RpcEndpoint* endpoint, const StocClientOptions& options = StocClientOptions());
  ~StocClient() override;
  StocClient(const StocClient&) = delete;
  StocClient& operator=(const StocClient&) = delete;

  // Connects to StoC `stoc_id` at `address` (idempotent). A StoC that cannot be reached
  // now (down, or removed and stopped) gives the connection error, but its address is kept
  // unless the id is connected already: the first request to it after kReconnectInterval
  // connects again (requests before, and while it dials, fail at once with NetworkError;
  // the interval counts from the end of the failed dial), so a StoC that is down
  // when it is added is used once it is back, as one that goes down after connecting is
  // (the transport reconnects those).
  Status AddStoc(uint32_t stoc_id, const std::string& address) EXCLUDES(mu_);
  // The StoCs connected (by AddStoc or a later request).
  std::vector<uint32_t> stocs() const EXCLUDES(mu_);
  // How long a StoC that could not be connected is left alone before a request tries again.
  static constexpr std::chrono::milliseconds kReconnectInterval{1000};
  static constexpr std::chrono::milliseconds kLocateTimeout{1000};

  Result<std::unique_ptr<StocFile>> Open(uint32_t stoc_id, const std::string& name, FileKind kind,
                                         const OpenOptions& options = OpenOptions()) EXCLUDES(mu_);
  // Appends src.base[src_offset, +length) as one block. Returns where it lives. On error the
  // block was not appended, unless file->broken was set (outcome unknown).
  // REQUIRES: length <= the StoC's maximum block size; src is registered with this transport.
  Result<BlockHandle> Append(StocFile* file, const transport::MemoryRegion& src,
                             uint64_t src_offset, uint64_t length) EXCLUDES(mu_);
  // Reads block.size bytes into dst.base[dst_offset, ...): disk blocks by one request
  // (kReadInline, or kRead with options.inline_reads false), memory blocks by a one-sided
  // READ; disk blocks of a StoC on this host with pread where options.local_reads allows.
  // REQUIRES: dst is registered with kRemoteWrite (the StoC may write into it for disk files).
  Status Read(const BlockHandle& block, const transport::MemoryRegion& dst, uint64_t dst_offset)
      EXCLUDES(mu_);
  // Reads a disk block of a StoC on this host straight into dst with pread (local_files.h),
  // counted and timed as Read. False, having done nothing, where Read would send a request
  // (options.local_reads off, not local, any failure): then call Read.
  bool ReadLocal(const BlockHandle& block, char* dst);
  // A read-only mapping of disk file `file_id` of StoC `stoc_id` on this host, for reads in
  // place (LocalFiles::Map); null without options.local_reads and options.map_local_files,
  // or where the file cannot be mapped (then use ReadLocal or Read). A reader counts each
  // block it reads through one with CountMappedRead.
  std::shared_ptr<const MappedFile> MapLocal(uint32_t stoc_id, uint64_t file_id);
  // stoc_client_mapped_reads_total (not in stoc_client_reads_total).
  void CountMappedRead() {
    if (mapped_reads_ != nullptr) mapped_reads_->Increment();
  }
  // Nanoseconds the calling thread has spent in Read (of any StocClient) since it started:
  // a server attributes the block reads of the request a thread serves to it by the
  // difference around the request. Per thread, no synchronization; a read the client fans
  // out to another thread (StocTableStore's io pool) counts on that thread.
  static uint64_t ThreadReadNanos();
  // Releases the append slot; for memory files records the appended length for readers.
  Status Close(StocFile* file) EXCLUDES(mu_);
  // Deletes a file; with owner_epoch > 0 the StoC refuses (Fenced) if the file's range is
  // fenced at a newer epoch.
  Status Delete(uint32_t stoc_id, const std::string& name, uint64_t owner_epoch = 0) EXCLUDES(mu_);
  // Fences range `range_id` at StoC `stoc_id` at `owner_epoch` (> 0): from the answer on the
  // StoC refuses every write of the range by an older epoch, and has written every append it
  // accepted from one. OK also if the StoC was already fenced at exactly this epoch;
  // Fenced if it knows a newer one; otherwise the StoC's or the transport's error.
  Status FenceRange(uint32_t stoc_id, uint32_t range_id, uint64_t owner_epoch) EXCLUDES(mu_);
  Result<std::vector<FileState>> List(uint32_t stoc_id) EXCLUDES(mu_);
  Result<StatsResponse> Stats(uint32_t stoc_id) EXCLUDES(mu_);
  Result<FileState> StatFile(uint32_t stoc_id, uint64_t file_id) EXCLUDES(mu_);
  // A request of a type another library encodes (kCompact): sends `request`, waits up to
  // `timeout`, records the LoadStats the response starts with and returns the rest of it,
  // or the StoC's (or the transport's) error.
  Result<std::string> Call(uint32_t stoc_id, uint16_t type, std::string_view request,
                           std::chrono::milliseconds timeout) EXCLUDES(mu_);

  const LoadView& load_view() const { return load_; }
  // The short-circuit reader of co-located StoCs' files; null without options.local_reads.
  LocalFiles* local_files() const { return local_.get(); }
  // The transport the client's endpoint runs on: where callers register the memory they
  // pass to Append and Read.
  transport::Transport* transport() const { return endpoint_->transport(); }

  // rpc::RpcService: append acknowledgments.
  void HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) EXCLUDES(mu_) override;
  // rpc::EndpointObserver: fails the acknowledgments a dead StoC owes.
  void OnPeerDown(transport::PeerId peer, const Status& why) EXCLUDES(mu_) override;

 private:
  // One append waiting for the StoC's acknowledgment: shared by the appending thread and
  // the thread that delivers the acknowledgment (or the peer's failure).
  struct AckWaiter {
    Mutex mu;
    CondVar cv;
    bool done GUARDED_BY(mu) = false;
    AppendAck ack GUARDED_BY(mu);
  };

  // The StoC's peer; connects one added but not connected yet (AddStoc) from the calling
  // thread (outside mu_: it may take the transport's connect timeout), one caller at a time
  // and kReconnectInterval after the last failed dial ended; other callers get NetworkError
  // at once.
  Result<transport::PeerId> PeerOf(uint32_t stoc_id) EXCLUDES(mu_);
  // Sends a request and decodes the response into *resp (which must have a `load` field).
  // Waits options_.timeout, or `timeout` if not zero.
  template <typename Resp>
  Status Rpc(uint32_t stoc_id, uint16_t type, const std::string& request, Resp* resp,
             std::chrono::milliseconds timeout = std::chrono::milliseconds::zero())
      EXCLUDES(mu_);
  // Runs a one-sided op and waits for its completion.
  Status WaitOp(const std::function<Status(transport::Completion)>& post);
  Result<BlockHandle> AppendMemory(StocFile* file, transport::PeerId peer,
                                   const transport::MemoryRegion& src, uint64_t src_offset,
                                   uint64_t length) EXCLUDES(mu_);
  Result<BlockHandle> AppendDisk(StocFile* file, transport::PeerId peer,
                                 const transport::MemoryRegion& src, uint64_t src_offset,
                                 uint64_t length) EXCLUDES(mu_);
  // Read, untimed.
  Status ReadBlock(const BlockHandle& block, const transport::MemoryRegion& dst,
                   uint64_t dst_offset) EXCLUDES(mu_);
  // Counts a block read that began at MonoNanos() `start`: the calling thread's tally
  // (ThreadReadNanos) and, with options.metrics, stoc_client_reads_total and _read_us_total.
  void CountRead(uint64_t start);
  // A disk block of a StoC on this host read with pread (counted in
  // stoc_client_local_reads_total); false if it must be read by request.
  bool ReadFromFile(const BlockHandle& block, char* dst);
  // kLocalFile: where a disk file's data lies on the StoC's host (LocalFiles asks). Waits
  // at most kLocateTimeout: the read it precedes is sent as a request if this fails.
  Result<LocalFileResponse> LocateFile(uint32_t stoc_id, uint64_t file_id) EXCLUDES(mu_);
  Result<std::vector<RegionInfo>> RegionsOf(uint32_t stoc_id, uint64_t file_id, bool refresh)
      EXCLUDES(mu_);

  rpc::RpcEndpoint* const endpoint_;  // must outlive this
  const StocClientOptions options_;
  LoadView load_;
  // options_.inline_reads until a StoC answers kReadInline with NotSupported (older).
  std::atomic<bool> inline_reads_;
  Counter* const reads_;    // stoc_client_reads_total; null without options.metrics
  Counter* const read_us_;  // stoc_client_read_us_total; as reads_
  Counter* const local_reads_;  // stoc_client_local_reads_total; as reads_
  Counter* const mapped_reads_;  // stoc_client_mapped_reads_total; as reads_
  // Short-circuit reads of co-located StoCs; null without options.local_reads.
  std::unique_ptr<LocalFiles> local_;

  mutable Mutex mu_;
  std::map<uint32_t, transport::PeerId> peers_ GUARDED_BY(mu_);
  // StoCs added whose connection failed (never in peers_): address, when to try again, and
  // whether a request is dialing it now. At most one request dials an Unconnected StoC at a
  // time (others fail at once with NetworkError rather than queue behind it on the
  // transport's per-address dial lock, each waiting up to its connect timeout); next_try
  // counts from the end of the last failed dial.
  struct Unconnected {
    std::string address;
    MonoTime next_try;
    bool dialing = false;
  };
  std::map<uint32_t, Unconnected> unconnected_ GUARDED_BY(mu_);
  std::map<std::pair<transport::PeerId, uint32_t>, std::shared_ptr<AckWaiter>> waiters_
      GUARDED_BY(mu_);
  // Memory files' regions.
  std::map<std::pair<uint32_t, uint64_t>, std::vector<RegionInfo>> regions_ GUARDED_BY(mu_);
};

}  // namespace nova::stoc
