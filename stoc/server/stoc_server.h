// StocServer: the storage component. Stores variable-sized blocks of append-only files, in
// memory (registered regions that clients WRITE and READ one-sidedly) or on disk (blocks
// WRITTEN into slots of a shared registered file buffer, made durable by storage threads with
// group commit, then acknowledged). See docs/stoc.md.
//
// Lifecycle: StocServer(options, metrics) cannot fail; Init() opens the catalog, recovers
// files and prepares memory; Start() opens the network; Shutdown() stops it.
//
// Thread safety: all public methods are thread-safe. Locks: slots_mu_ (slots and the
// per-file queues), each file's AppendQueue::mu, and the catalog's and stores' own locks.
// slots_mu_ and a queue's mu are never held together (were they, slots_mu_ would come
// first); the catalog's and stores' locks are innermost (taken with either or none).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
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
  // A slot of the file buffer reserved by one client for appends to one disk file.
  struct Slot {
    uint32_t id = 0;
    transport::Buffer buffer;
    uint64_t file_id = 0;
    transport::PeerId owner = transport::kInvalidPeer;
    bool busy = false;      // an append from it is queued or being written
    bool released = false;  // free it once not busy
  };
  struct PendingAppend {
    uint32_t slot_id;
    transport::PeerId peer;
    const char* data;
    uint32_t size;
    MonoTime arrived;
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
  void HandleClose(std::string_view payload, rpc::Responder* r);
  void HandleDelete(std::string_view payload, rpc::Responder* r);
  void HandleList(rpc::Responder* r);
  void HandleStats(rpc::Responder* r);
  void HandleStatFile(std::string_view payload, rpc::Responder* r);

  Result<SlotInfo> ReserveSlot(transport::PeerId peer, uint64_t file_id, uint64_t bytes)
      EXCLUDES(slots_mu_);
  void ReleaseSlot(uint32_t slot_id) EXCLUDES(slots_mu_);
  // Frees the matching slots now, or (if an append from one is in flight) once it is written.
  void ReleaseSlotsWhere(const std::function<bool(const Slot&)>& pred) EXCLUDES(slots_mu_);
  void FreeSlotLocked(Slot* slot) REQUIRES(slots_mu_);
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

  // Load, for LoadStats.
  std::atomic<uint32_t> queue_depth_{0};
  std::atomic<uint64_t> pending_bytes_{0};
  std::atomic<bool> started_{false};

  // Metrics (owned by metrics_).
  struct Metrics {
    Counter* appends = nullptr;
    Counter* append_bytes = nullptr;
    Counter* reads = nullptr;
    Counter* read_bytes = nullptr;
    Counter* fsyncs = nullptr;
    Counter* errors = nullptr;
    Histogram* append_latency_us = nullptr;
    Histogram* read_latency_us = nullptr;
  };
  Metrics m_;
};

}  // namespace nova::stoc
