// StocServer: the storage component. Stores variable-sized blocks of append-only files, in
// memory (registered regions that clients WRITE and READ one-sidedly) or on disk (blocks
// WRITTEN into slots of a shared registered file buffer, made durable by storage threads with
// group commit, then acknowledged). See docs/stoc.md.
//
// Lifecycle: StocServer(options, metrics) cannot fail; Init() opens the catalog, recovers
// files and prepares memory; Start() opens the network; Shutdown() stops it.
//
// Owner fencing (docs/stoc.md "Owner fencing"): per range, the newest owner epoch a
// kFenceRange (or an open or delete by a newer owner) raised, persisted in the catalog.
// Invariants:
//  1. An open, slot reservation or delete whose epoch is below its range's fence is refused
//     (Fenced) and changes nothing; so is an append whose slot's epoch is below it when it
//     arrives (OnWriteWithImm), before it is queued.
//  2. A raise is durable (catalog) before the new epoch refuses anything, and is answered
//     only once every append accepted under an older epoch is written and acknowledged (the
//     "drain"): after the answer no older-epoch byte of the range becomes durable here.
//
// Thread safety: all public methods are thread-safe. Locks: slots_mu_ (slots and the
// per-file queues), each file's AppendQueue::mu, fences_mu_ (the map of ranges), each
// range's RangeFence::mu, and the catalog's and stores' own locks. Order: slots_mu_ before
// a RangeFence::mu (OnWriteWithImm admits an append under both); slots_mu_ and a queue's
// mu are never held together (were they, slots_mu_ would come first); fences_mu_ is taken
// alone; the catalog's and stores' locks are innermost (taken with any or none).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "common/mutex.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/thread_pool.h"
#include "common/transport/slab_allocator.h"
#include "common/transport/transport.h"
#include "stoc/client/stoc_protocol.h"
#include "stoc/server/disk_file_store.h"
#include "stoc/server/file_catalog.h"
#include "stoc/server/memory_file_store.h"
#include "stoc/server/stoc_options.h"

namespace nova::stoc {

class StocServer : public rpc::RpcService, public rpc::EndpointObserver {
 public:
  // `metrics` must outlive the server.
  StocServer(const StocOptions& options, MetricsRegistry* metrics);
  ~StocServer() override;
  StocServer(const StocServer&) = delete;
  StocServer& operator=(const StocServer&) = delete;

  Status Init();
  // Routes kCompact requests to `service`, run on the compaction pool
  // (--stoc_compaction_threads). Without one they are answered NotSupported.
  // REQUIRES: after Init(), before Start(). `service` must outlive the server.
  void RegisterCompactionService(rpc::RpcService* service);
  Status Start();
  void Shutdown();

  // "host:port" of the exchange transport. REQUIRES: Start() succeeded.
  std::string address() const { return transport_->listen_address(); }
  LoadStats CurrentLoad() const;

  // rpc::RpcService
  void HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                     rpc::Responder responder) EXCLUDES(slots_mu_) override;
  // rpc::EndpointObserver
  void OnPeerDown(transport::PeerId peer, const Status& why) EXCLUDES(slots_mu_) override;
  bool OnWriteWithImm(transport::PeerId peer, uint32_t imm, uint64_t length)
      EXCLUDES(slots_mu_) override;

 private:
  // Owner fencing of one range (invariants in the file comment).
  struct RangeFence {
    Mutex mu;
    CondVar drained;                    // signalled when `inflight` goes down
    uint64_t epoch GUARDED_BY(mu) = 0;  // newest owner epoch; 0: never fenced
    // Appends admitted and not yet acknowledged, counted by their slot's owner epoch.
    std::map<uint64_t, uint32_t> inflight GUARDED_BY(mu);
  };
  // A slot of the file buffer reserved by one client for appends to one disk file.
  struct Slot {
    uint32_t id = 0;
    transport::Buffer buffer;
    uint64_t file_id = 0;
    transport::PeerId owner = transport::kInvalidPeer;
    bool busy = false;      // an append from it is queued or being written
    bool released = false;  // free it once not busy
    // Its file was deleted by another client (a newer owner deletes an older owner's
    // MANIFEST).
    // Appends into it are refused, but the buffer stays the holder's until it releases the
    // slot or goes down: a holder still WRITing into freed memory would corrupt whichever
    // slot reused it.
    bool orphaned = false;
    // The file's range (null: its name names none, never fenced) and the owner epoch of
    // the open or reservation that made the slot.
    std::shared_ptr<RangeFence> fence;
    uint64_t owner_epoch = 0;
  };
  struct PendingAppend {
    uint32_t slot_id;
    transport::PeerId peer;
    const char* data;
    uint32_t size;
    MonoTime arrived;
    std::shared_ptr<RangeFence> fence;  // the slot's, counted in its inflight until acked
    uint64_t owner_epoch;
  };
  // Per disk file: appends waiting for a storage thread.
  struct AppendQueue {
    Mutex mu;
    std::deque<PendingAppend> pending GUARDED_BY(mu);
    bool scheduled GUARDED_BY(mu) = false;  // a drain task is queued or running
  };

  void HandleOpen(transport::PeerId peer, std::string_view payload, rpc::Responder* r);
  void HandleNewRegion(std::string_view payload, rpc::Responder* r);
  void HandleReserveSlot(transport::PeerId peer, std::string_view payload, rpc::Responder* r);
  void HandleRead(transport::PeerId peer, std::string_view payload, rpc::Responder r);
  // kReadInline: the bytes in the response (no staging buffer, no WRITE). `on_xchg`: on
  // the receiving xchg thread, which answers only from the page cache and hands reads
  // that would wait (or any while a fault point is armed) to the storage pool.
  void HandleReadInline(std::string_view payload, rpc::Responder r, bool on_xchg);
  void ReadInlineOnPool(std::string_view payload, rpc::Responder r);
  // Before a disk read by request: NotFound, InvalidArgument for an in-memory file, or
  // the "stoc.read" fault point's error. Takes the catalog lock (not on an xchg thread).
  Status CheckDiskRead(uint64_t file_id);
  void HandleClose(std::string_view payload, rpc::Responder* r);
  void HandleDelete(transport::PeerId peer, std::string_view payload, rpc::Responder* r);
  void HandleList(rpc::Responder* r);
  void HandleStats(rpc::Responder* r);
  void HandleStatFile(std::string_view payload, rpc::Responder* r);
  void HandleLocalFile(std::string_view payload, rpc::Responder* r);
  void HandleFence(std::string_view payload, rpc::Responder* r);

  // The range's fence state, made on first use. Never null.
  std::shared_ptr<RangeFence> FenceOf(uint32_t range_id) EXCLUDES(fences_mu_);
  // Admits a writer of range `range_id` at `epoch`: Fenced if the range's fence is newer;
  // raises the fence if `epoch` is newer (durably: invariant 2); in both OK cases waits
  // until no append of an older epoch is in flight. Returns the range's fence.
  Result<std::shared_ptr<RangeFence>> AdmitRange(uint32_t range_id, uint64_t epoch,
                                                 std::string_view what) EXCLUDES(fences_mu_);
  // AdmitRange for the range a file name names; OK with null for a name that names none.
  Result<std::shared_ptr<RangeFence>> AdmitWriter(const std::string& name, uint64_t epoch)
      EXCLUDES(fences_mu_);

  Result<SlotInfo> ReserveSlot(transport::PeerId peer, uint64_t file_id, uint64_t bytes,
                               std::shared_ptr<RangeFence> fence, uint64_t owner_epoch)
      EXCLUDES(slots_mu_);
  void ReleaseSlot(uint32_t slot_id) EXCLUDES(slots_mu_);
  // Frees the matching slots now, or (if an append from one is in flight) once it is written.
  void ReleaseSlotsWhere(const std::function<bool(const Slot&)>& pred) EXCLUDES(slots_mu_);
  void FreeSlotLocked(Slot* slot) REQUIRES(slots_mu_);
  // Marks the slots of a deleted file that other clients than `deleter` hold orphaned (see
  // Slot); the deleter's own go as before.
  void OrphanSlotsOf(uint64_t file_id, transport::PeerId deleter) EXCLUDES(slots_mu_);
  // Takes slots_mu_ and the file's queue mu, one at a time.
  void DrainAppends(uint64_t file_id) EXCLUDES(slots_mu_);
  void SendAck(transport::PeerId peer, const AppendAck& ack);
  // The file's state; with_blocks adds a disk file's block extents (kStatFile only: a
  // listing of many files stays small).
  Result<FileState> StateOf(const FileEntry& e, bool with_blocks = false) const;
  std::shared_ptr<AppendQueue> QueueFor(uint64_t file_id) EXCLUDES(slots_mu_);

  const StocOptions options_;
  MetricsRegistry* const metrics_;  // must outlive this

  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::SlabAllocator> file_buffer_;
  std::unique_ptr<FileCatalog> catalog_;
  std::unique_ptr<DiskFileStore> disk_;
  std::unique_ptr<MemoryFileStore> memory_;
  ThreadPool storage_pool_;
  ThreadPool control_pool_;
  ThreadPool compaction_pool_;  // offloaded compactions (RegisterCompactionService)

  Mutex slots_mu_;
  std::unordered_map<uint32_t, Slot> slots_ GUARDED_BY(slots_mu_);
  uint32_t next_slot_id_ GUARDED_BY(slots_mu_) = 1;
  std::unordered_map<uint64_t, std::shared_ptr<AppendQueue>> queues_ GUARDED_BY(slots_mu_);

  Mutex fences_mu_;
  // Loaded from the catalog by Init; entries are never removed.
  std::unordered_map<uint32_t, std::shared_ptr<RangeFence>> fences_ GUARDED_BY(fences_mu_);

  // Load, for LoadStats.
  std::atomic<uint32_t> queue_depth_{0};
  std::atomic<uint64_t> pending_bytes_{0};
  std::atomic<bool> started_{false};
  // Reads that never wait for the disk (preadv2 RWF_NOWAIT) work here: ReadInline is tried
  // on the receiving xchg thread. Cleared for good by the first NotSupported.
  std::atomic<bool> nowait_reads_{true};

  // Metrics (owned by metrics_).
  struct Metrics {
    Counter* appends = nullptr;
    Counter* append_bytes = nullptr;
    Counter* reads = nullptr;
    Counter* reads_handed_off = nullptr;  // inline reads the page cache did not hold
    Counter* read_bytes = nullptr;
    Counter* fsyncs = nullptr;
    Counter* errors = nullptr;
    Histogram* append_latency_us = nullptr;
    Histogram* read_latency_us = nullptr;
  };
  Metrics m_;
};

}  // namespace nova::stoc
