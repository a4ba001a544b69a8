#include "stoc/server/stoc_server.h"

#include <sys/stat.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include <glog/logging.h>

#include "common/fault_point.h"
#include "common/transport/transport_metrics.h"
#include "common/wire/message.h"
#include "stoc/client/local_files.h"

namespace nova::stoc {

namespace {

constexpr uint64_t kMinSlotBytes = 4096;
constexpr uint64_t kDefaultSlotBytes = 1 << 20;
constexpr uint64_t kSlabBytes = 1 << 20;
constexpr wire::TypeRange kControlLow{kOpen, kReserveSlot};
constexpr wire::TypeRange kStorage{kRead, kRead};
// kAppendAck (0x0110) is left free: it is the client side's notification.
constexpr wire::TypeRange kControlHigh{kClose, kStatFile};
// A fence may wait for a range's queued appends: on the control pool, like the others.
constexpr wire::TypeRange kFence{kFenceRange, kFenceRange};
constexpr wire::TypeRange kStorageInline{kReadInline, kReadInline};
constexpr wire::TypeRange kLocal{kLocalFile, kLocalFile};
// Only the daemon's own fault points: "stoc.storage" (each append drain) and
// "stoc.read" (each read).
constexpr char kStorageFault[] = "stoc.storage";
constexpr char kReadFault[] = "stoc.read";

Status Malformed(const Status& s) { return s.ok() ? s : Status::InvalidArgument(s.message()); }

}  // namespace

StocServer::StocServer(const StocOptions& options, MetricsRegistry* metrics)
    : options_(options),
      metrics_(metrics),
      endpoint_(rpc::RpcEndpointOptions{options.transport.max_message_bytes}),
      storage_pool_("stoc-storage", std::max(1, options.storage_threads),
                    options.max_queued_requests),
      control_pool_("stoc-control", std::max(1, options.control_threads),
                    options.max_queued_requests),
      compaction_pool_("stoc-compact", std::max(1, options.compaction_threads),
                       options.max_queued_requests) {
  m_.appends = metrics_->GetCounter("stoc_appends_total", "Blocks appended to persistent files");
  m_.append_bytes =
      metrics_->GetCounter("stoc_append_bytes_total", "Bytes appended to persistent files");
  m_.reads = metrics_->GetCounter("stoc_reads_total", "Reads served");
  m_.reads_handed_off = metrics_->GetCounter(
      "stoc_inline_reads_handed_off_total",
      "ReadInline requests the page cache did not hold: read by a storage thread instead of "
      "the receiving exchange thread");
  m_.read_bytes = metrics_->GetCounter("stoc_read_bytes_total", "Bytes served by reads");
  m_.fsyncs = metrics_->GetCounter("stoc_fsyncs_total", "fdatasync calls (one per append group)");
  m_.errors = metrics_->GetCounter("stoc_request_errors_total", "Requests answered with an error");
  m_.append_latency_us = metrics_->GetHistogram(
      "stoc_append_latency_us", "From a block's arrival to its durable acknowledgment");
  m_.read_latency_us = metrics_->GetHistogram("stoc_read_latency_us", "Read service time");
}

StocServer::~StocServer() {
  Shutdown();
  metrics_->UnregisterCallbackGauge("stoc_queue_depth");
  metrics_->UnregisterCallbackGauge("stoc_pending_bytes");
  metrics_->UnregisterCallbackGauge("stoc_memory_bytes_used");
  metrics_->UnregisterCallbackGauge("stoc_files");
  if (transport_) transport::UnregisterTransportMetrics(metrics_);
  // Slots go back before the allocator goes away.
  for (auto& [id, slot] : slots_) file_buffer_->Free(slot.buffer);
  slots_.clear();
}

Status StocServer::Init() {
  if (options_.dir.empty()) return Status::InvalidArgument("StoC needs a data directory");
  if (options_.max_block_bytes == 0 || options_.max_block_bytes > kMaxBlockBytes) {
    return Status::InvalidArgument("max block size must be in [1, " +
                                   std::to_string(kMaxBlockBytes) + "] bytes");
  }
  const uint64_t max_class = std::bit_ceil(std::max(options_.max_block_bytes, kMinSlotBytes));
  if (options_.file_buffer_bytes < max_class || options_.file_buffer_bytes % kSlabBytes != 0) {
    return Status::InvalidArgument(
        "file buffer must be a multiple of 1 MiB and hold at least one maximum-size block (" +
        std::to_string(max_class) + " bytes)");
  }
  if (::mkdir(options_.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno("mkdir " + options_.dir, errno);
  }
  auto catalog = FileCatalog::Open(options_.dir);
  if (!catalog.ok()) return catalog.status().Prepend("StoC catalog");
  catalog_ = std::move(catalog.value());

  // In-memory files do not survive a restart: forget them.
  std::vector<FileEntry> disk_files;
  for (const FileEntry& e : catalog_->List()) {
    if (e.kind == FileKind::kDisk) {
      disk_files.push_back(e);
      continue;
    }
    LOG(WARNING) << "in-memory file " << e.name << " was lost with the previous process";
    NOVA_RETURN_NOT_OK(catalog_->RemoveFile(e.file_id));
  }
  disk_ = std::make_unique<DiskFileStore>(options_.dir + "/data");
  NOVA_RETURN_NOT_OK(disk_->Recover(disk_files));
  {
    MutexLock lock(&fences_mu_);
    for (const auto& [range, epoch] : catalog_->Fences()) {
      auto fence = std::make_shared<RangeFence>();
      MutexLock fence_lock(&fence->mu);
      fence->epoch = epoch;
      fences_[range] = std::move(fence);
    }
  }
  LOG(INFO) << "StoC " << options_.stoc_id << ": " << disk_files.size()
            << " persistent files recovered from " << options_.dir;

  transport::TransportOptions topts = options_.transport;
  topts.node_name = "stoc-" + std::to_string(options_.stoc_id);
  auto t = transport::NewTransport(topts, &endpoint_);
  if (!t.ok()) return t.status();
  transport_ = std::move(t.value());
  endpoint_.Attach(transport_.get());
  endpoint_.RegisterService(kControlLow, this, &control_pool_);
  endpoint_.RegisterService(kStorage, this, &storage_pool_);
  endpoint_.RegisterService(kControlHigh, this, &control_pool_);
  endpoint_.RegisterService(kFence, this, &control_pool_);
  endpoint_.RegisterService(kLocal, this, &control_pool_);  // a realpath: not on xchg
  // On the receiving xchg thread: a read the page cache holds is answered there (no
  // hand-off); one that would wait for the disk goes to the storage pool.
  endpoint_.RegisterService(kStorageInline, this, nullptr);
  endpoint_.AddObserver(this);
  NOVA_RETURN_NOT_OK(transport_->Init());

  transport::SlabOptions slab;
  slab.pool_bytes = options_.file_buffer_bytes;
  slab.min_class_bytes = kMinSlotBytes;
  slab.max_class_bytes = max_class;
  slab.slab_bytes = kSlabBytes;
  file_buffer_ = std::make_unique<transport::SlabAllocator>(transport_.get(), slab);
  NOVA_RETURN_NOT_OK_PREPEND(file_buffer_->Init(), "StoC file buffer");
  memory_ = std::make_unique<MemoryFileStore>(transport_.get(), options_.memory_region_bytes,
                                              options_.memory_limit_bytes);

  metrics_->RegisterCallbackGauge("stoc_queue_depth", "Storage requests queued or running", [this] {
    return static_cast<double>(CurrentLoad().queue_depth);
  });
  metrics_->RegisterCallbackGauge("stoc_pending_bytes", "Bytes of queued storage requests",
                                  [this] { return static_cast<double>(pending_bytes_.load()); });
  metrics_->RegisterCallbackGauge("stoc_memory_bytes_used", "Memory of in-memory files",
                                  [this] { return static_cast<double>(memory_->bytes_used()); });
  metrics_->RegisterCallbackGauge("stoc_files", "Files in the catalog",
                                  [this] { return static_cast<double>(catalog_->List().size()); });
  transport::RegisterTransportMetrics(metrics_, transport_.get());
  return Status::OK();
}

void StocServer::RegisterCompactionService(rpc::RpcService* service) {
  endpoint_.RegisterService(wire::TypeRange{kCompact, kCompact}, service, &compaction_pool_);
}

Status StocServer::Start() {
  NOVA_RETURN_NOT_OK(transport_->Start());
  started_ = true;
  return Status::OK();
}

void StocServer::Shutdown() {
  if (transport_) transport_->Shutdown();
  storage_pool_.Shutdown();
  control_pool_.Shutdown();
  compaction_pool_.Shutdown();
}

LoadStats StocServer::CurrentLoad() const {
  LoadStats l;
  l.queue_depth = queue_depth_.load(std::memory_order_relaxed) +
                  static_cast<uint32_t>(storage_pool_.queue_depth());
  l.pending_bytes = pending_bytes_.load(std::memory_order_relaxed);
  return l;
}

// ---- Requests ------------------------------------------------------------------------

void StocServer::HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                               rpc::Responder responder) {
  switch (type) {
    case kOpen: return HandleOpen(peer, payload, &responder);
    case kNewRegion: return HandleNewRegion(payload, &responder);
    case kReserveSlot: return HandleReserveSlot(peer, payload, &responder);
    case kRead: return HandleRead(peer, payload, std::move(responder));
    case kReadInline: return HandleReadInline(payload, std::move(responder), /*on_xchg=*/true);
    case kClose: return HandleClose(payload, &responder);
    case kDelete: return HandleDelete(peer, payload, &responder);
    case kList: return HandleList(&responder);
    case kStats: return HandleStats(&responder);
    case kStatFile: return HandleStatFile(payload, &responder);
    case kFenceRange: return HandleFence(payload, &responder);
    case kLocalFile: return HandleLocalFile(payload, &responder);
    default:
      m_.errors->Increment();
      responder.ReplyError(Status::NotSupported("unknown StoC request " + std::to_string(type)));
  }
}

Result<FileState> StocServer::StateOf(const FileEntry& e, bool with_blocks) const {
  if (e.kind == FileKind::kMemory) return memory_->Stat(e.file_id);
  auto file = disk_->Get(e.file_id);
  if (file == nullptr) return Status::NotFound("no data for StoC file " + e.name);
  FileState st;
  st.file_id = e.file_id;
  st.kind = e.kind;
  st.name = e.name;
  st.length = file->size();
  if (with_blocks) {
    for (const BlockExtent& b : file->blocks()) st.blocks.emplace_back(b.data_offset, b.size);
  }
  return st;
}

void StocServer::HandleOpen(transport::PeerId peer, std::string_view payload, rpc::Responder* r) {
  OpenRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  NOVA_REPLY_IF_ERROR(r, ValidateFileName(req.name), m_.errors);
  // Before anything is created: a fenced-off owner leaves no trace (invariant 1).
  auto fence = AdmitWriter(req.name, req.owner_epoch);
  NOVA_REPLY_IF_ERROR(r, fence.status(), m_.errors);
  auto entry = catalog_->Lookup(req.name);
  if (!entry) {
    if (!req.create)
      NOVA_REPLY_IF_ERROR(r, Status::NotFound("no StoC file named " + req.name), m_.errors);
    auto id = catalog_->AddFile(req.name, req.kind);
    if (!id.ok() && id.status().code() == Status::Code::kAlreadyExists) {
      entry = catalog_->Lookup(req.name);  // created concurrently
    } else {
      NOVA_REPLY_IF_ERROR(r, id.status(), m_.errors);
      Status created = req.kind == FileKind::kDisk ? disk_->Create(id.value())
                                                   : memory_->Create(id.value(), req.name);
      if (!created.ok()) {
        catalog_->RemoveFile(id.value()).IgnoreError();
        NOVA_REPLY_IF_ERROR(r, created, m_.errors);
      }
      entry = catalog_->Get(id.value());
    }
    if (!entry)
      NOVA_REPLY_IF_ERROR(r, Status::NotFound("StoC file vanished: " + req.name), m_.errors);
  }
  if (entry->kind != req.kind) {
    NOVA_REPLY_IF_ERROR(r,
                        Status::InvalidArgument("StoC file " + req.name + " is a " +
                                                FileKindName(entry->kind) + " file"),
                        m_.errors);
  }
  OpenResponse resp;
  auto st = StateOf(*entry);
  NOVA_REPLY_IF_ERROR(r, st.status(), m_.errors);
  resp.file = std::move(st.value());
  if (entry->kind == FileKind::kDisk && req.for_append) {
    auto file = disk_->Get(entry->file_id);
    NOVA_REPLY_IF_ERROR(r, file->health(), m_.errors);
    auto slot =
        ReserveSlot(peer, entry->file_id, req.slot_bytes ? req.slot_bytes : kDefaultSlotBytes,
                    std::move(fence.value()), req.owner_epoch);
    NOVA_REPLY_IF_ERROR(r, slot.status(), m_.errors);
    resp.slot = slot.value();
  }
  resp.load = CurrentLoad();
  r->Reply(Encode(resp));
}

void StocServer::HandleNewRegion(std::string_view payload, rpc::Responder* r) {
  NewRegionRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  auto region = memory_->NewRegion(req.file_id, req.min_bytes);
  NOVA_REPLY_IF_ERROR(r, region.status(), m_.errors);
  r->Reply(Encode(NewRegionResponse{CurrentLoad(), region.value()}));
}

void StocServer::HandleReserveSlot(transport::PeerId peer, std::string_view payload,
                                   rpc::Responder* r) {
  ReserveSlotRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  auto entry = catalog_->Get(req.file_id);
  if (!entry || disk_->Get(req.file_id) == nullptr) {
    NOVA_REPLY_IF_ERROR(r, Status::NotFound("no disk file " + std::to_string(req.file_id)),
                        m_.errors);
  }
  auto fence = AdmitWriter(entry->name, req.owner_epoch);
  NOVA_REPLY_IF_ERROR(r, fence.status(), m_.errors);
  if (req.release_slot_id != 0) ReleaseSlot(req.release_slot_id);
  auto slot = ReserveSlot(peer, req.file_id, req.bytes, std::move(fence.value()), req.owner_epoch);
  NOVA_REPLY_IF_ERROR(r, slot.status(), m_.errors);
  r->Reply(Encode(ReserveSlotResponse{CurrentLoad(), slot.value()}));
}

Status StocServer::CheckDiskRead(uint64_t file_id) {
  auto entry = catalog_->Get(file_id);
  if (!entry) return Status::NotFound("no StoC file " + std::to_string(file_id));
  if (entry->kind != FileKind::kDisk) {
    return Status::InvalidArgument("in-memory files are read with one-sided READs, not requests");
  }
  return MAYBE_FAULT(kReadFault);
}

void StocServer::ReadInlineOnPool(std::string_view payload, rpc::Responder r) {
  auto responder = std::make_shared<rpc::Responder>(std::move(r));
  Status s = storage_pool_.Submit([this, p = std::string(payload), responder] {
    HandleReadInline(p, std::move(*responder), /*on_xchg=*/false);
  });
  if (!s.ok()) {
    m_.errors->Increment();
    responder->ReplyError(s.IsResourceExhausted()
                              ? Status::ResourceExhausted("StoC overloaded: storage queue full")
                              : Status::Unavailable("StoC shutting down"));
  }
}

void StocServer::HandleReadInline(std::string_view payload, rpc::Responder r, bool on_xchg) {
  const MonoTime start = MonoNow();
  // On the xchg thread nothing may wait: not a fault point's delay, not the catalog (its
  // lock is held across fdatasyncs), not the disk. Whatever might is handed to the pool,
  // which also gives the exact errors.
  if (on_xchg && (FaultPoints::AnyArmed() || !nowait_reads_.load(std::memory_order_relaxed))) {
    return ReadInlineOnPool(payload, std::move(r));
  }
  ReadRequest req;
  NOVA_REPLY_IF_ERROR(&r, Malformed(Decode(payload, &req)), m_.errors);
  std::shared_ptr<DiskFile> file;
  if (on_xchg) {
    // A disk file the store has open (its lock is short): else the pool says why not.
    if (req.size > kMaxInlineReadBytes || (file = disk_->Get(req.file_id)) == nullptr) {
      return ReadInlineOnPool(payload, std::move(r));
    }
  } else {
    // The reply must fit in any message limit (--transport_max_message_mb >= 1): clients
    // send at most kMaxInlineReadBytes; this bounds what one that does not may ask.
    constexpr uint64_t kMaxServedInline = 512 << 10;
    if (req.size > std::min<uint64_t>(options_.max_block_bytes, kMaxServedInline)) {
      NOVA_REPLY_IF_ERROR(&r,
                          Status::InvalidArgument("inline read of " + std::to_string(req.size) +
                                                  " bytes exceeds " +
                                                  std::to_string(kMaxServedInline) +
                                                  " bytes or the maximum block size (use Read)"),
                          m_.errors);
    }
    NOVA_REPLY_IF_ERROR(&r, CheckDiskRead(req.file_id), m_.errors);
    file = disk_->Get(req.file_id);
    if (file == nullptr)
      NOVA_REPLY_IF_ERROR(&r, Status::NotFound("StoC file was deleted"), m_.errors);
  }
  ReadInlineResponse resp;
  resp.data.resize(req.size);
  queue_depth_.fetch_add(1);
  pending_bytes_.fetch_add(req.size);
  Status s = req.size == 0 ? Status::OK()
                           : file->Read(req.offset, req.size, resp.data.data(), on_xchg);
  queue_depth_.fetch_sub(1);
  pending_bytes_.fetch_sub(req.size);
  if (on_xchg && file.use_count() == 1) {
    // Deleted meanwhile: closing its last descriptor frees its blocks, which may take a
    // while. Not here.
    storage_pool_.Submit([last = std::move(file)] {}).IgnoreError();
  }
  if (on_xchg && !s.ok()) {
    if (s.code() == Status::Code::kNotSupported) {
      // The kernel or file system cannot read without waiting: the pool reads from now on.
      if (nowait_reads_.exchange(false)) {
        LOG(WARNING) << "reads that never wait for the disk are not supported here ("
                     << s.ToString() << "): every read is served by a storage thread";
      }
    }
    // Not in the page cache (or an error the pool reports exactly): a storage thread reads.
    m_.reads_handed_off->Increment();
    return ReadInlineOnPool(payload, std::move(r));
  }
  NOVA_REPLY_IF_ERROR(&r, s, m_.errors);
  m_.reads->Increment();
  m_.read_bytes->Increment(req.size);
  m_.read_latency_us->Record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()));
  resp.load = CurrentLoad();
  r.Reply(Encode(resp));
}

void StocServer::HandleRead(transport::PeerId peer, std::string_view payload, rpc::Responder r) {
  const MonoTime start = MonoNow();
  ReadRequest req;
  NOVA_REPLY_IF_ERROR(&r, Malformed(Decode(payload, &req)), m_.errors);
  if (req.size > options_.max_block_bytes) {
    NOVA_REPLY_IF_ERROR(&r,
                        Status::InvalidArgument("read of " + std::to_string(req.size) +
                                                " bytes exceeds the maximum block size"),
                        m_.errors);
  }
  NOVA_REPLY_IF_ERROR(&r, CheckDiskRead(req.file_id), m_.errors);
  if (req.size == 0) return r.Reply(Encode(LoadOnlyResponse{CurrentLoad()}));
  auto file = disk_->Get(req.file_id);
  if (file == nullptr)
    NOVA_REPLY_IF_ERROR(&r, Status::NotFound("StoC file was deleted"), m_.errors);
  auto buf = file_buffer_->Allocate(req.size);
  NOVA_REPLY_IF_ERROR(&r, buf.status().Prepend("StoC read staging buffer"), m_.errors);
  queue_depth_.fetch_add(1);
  pending_bytes_.fetch_add(req.size);
  auto finish = [this, size = req.size](const transport::Buffer& b) {
    file_buffer_->Free(b);
    queue_depth_.fetch_sub(1);
    pending_bytes_.fetch_sub(size);
  };
  Status s = file->Read(req.offset, req.size, buf->data);
  if (!s.ok()) {
    finish(buf.value());
    NOVA_REPLY_IF_ERROR(&r, s, m_.errors);
  }
  auto responder = std::make_shared<rpc::Responder>(std::move(r));
  const transport::Buffer b = buf.value();
  // WRITE the bytes into the client's buffer; answer once they are there.
  s = transport_->Write(
      peer, *b.region, b.offset, req.size, transport::RemoteAddr{req.dst_addr, req.dst_rkey},
      std::nullopt,
      [this, b, finish, responder, start, size = req.size](const Status& written) {
        finish(b);
        if (!written.ok()) {
          m_.errors->Increment();
          return responder->ReplyError(written.Prepend("writing the block to the client"));
        }
        m_.reads->Increment();
        m_.read_bytes->Increment(size);
        m_.read_latency_us->Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()));
        responder->Reply(Encode(LoadOnlyResponse{CurrentLoad()}));
      });
  if (!s.ok()) {
    finish(b);
    m_.errors->Increment();
    responder->ReplyError(s);
  }
}

void StocServer::HandleClose(std::string_view payload, rpc::Responder* r) {
  CloseRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  // First: the slot of a file deleted meanwhile (orphaned) is released here too.
  if (req.slot_id != 0) ReleaseSlot(req.slot_id);
  auto entry = catalog_->Get(req.file_id);
  if (!entry)
    NOVA_REPLY_IF_ERROR(r, Status::NotFound("no StoC file " + std::to_string(req.file_id)),
                        m_.errors);
  if (entry->kind == FileKind::kMemory)
    NOVA_REPLY_IF_ERROR(r, memory_->SetLength(req.file_id, req.length), m_.errors);
  r->Reply(Encode(LoadOnlyResponse{CurrentLoad()}));
}

void StocServer::HandleDelete(transport::PeerId peer, std::string_view payload, rpc::Responder* r) {
  NameRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  NOVA_REPLY_IF_ERROR(r, AdmitWriter(req.name, req.owner_epoch).status(), m_.errors);
  auto entry = catalog_->Lookup(req.name);
  if (!entry) NOVA_REPLY_IF_ERROR(r, Status::NotFound("no StoC file named " + req.name), m_.errors);
  OrphanSlotsOf(entry->file_id, peer);
  NOVA_REPLY_IF_ERROR(r, catalog_->RemoveFile(entry->file_id), m_.errors);
  Status s = entry->kind == FileKind::kDisk ? disk_->Delete(entry->file_id)
                                            : memory_->Delete(entry->file_id);
  LOG_IF(WARNING, !s.ok()) << "deleting the data of " << req.name << ": " << s.ToString();
  r->Reply(Encode(LoadOnlyResponse{CurrentLoad()}));
}

void StocServer::HandleList(rpc::Responder* r) {
  ListResponse resp;
  for (const FileEntry& e : catalog_->List()) {
    auto st = StateOf(e);
    if (!st.ok()) continue;  // deleted meanwhile
    st->regions.clear();
    resp.files.push_back(std::move(st.value()));
  }
  resp.load = CurrentLoad();
  r->Reply(Encode(resp));
}

void StocServer::HandleStats(rpc::Responder* r) {
  StatsResponse resp;
  resp.load = CurrentLoad();
  resp.files = catalog_->List().size();
  resp.appends = m_.appends->value();
  resp.append_bytes = m_.append_bytes->value();
  resp.reads = m_.reads->value();
  resp.read_bytes = m_.read_bytes->value();
  resp.fsyncs = m_.fsyncs->value();
  resp.memory_bytes_used = memory_->bytes_used();
  resp.memory_bytes_limit = memory_->limit_bytes();
  auto slab = file_buffer_->GetStats();
  resp.file_buffer_bytes_used = slab.bytes_allocated;
  resp.file_buffer_bytes = slab.pool_bytes_total;
  r->Reply(Encode(resp));
}

void StocServer::HandleStatFile(std::string_view payload, rpc::Responder* r) {
  FileIdRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  auto entry = catalog_->Get(req.file_id);
  if (!entry)
    NOVA_REPLY_IF_ERROR(r, Status::NotFound("no StoC file " + std::to_string(req.file_id)),
                        m_.errors);
  auto st = StateOf(*entry, /*with_blocks=*/true);
  NOVA_REPLY_IF_ERROR(r, st.status(), m_.errors);
  r->Reply(Encode(StatFileResponse{CurrentLoad(), std::move(st.value())}));
}

void StocServer::HandleLocalFile(std::string_view payload, rpc::Responder* r) {
  FileIdRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  if (!options_.local_reads) {
    NOVA_REPLY_IF_ERROR(r, Status::NotSupported("this StoC serves reads by request only "
                                                "(--stoc_local_reads=false)"),
                        m_.errors);
  }
  static const Result<std::string> host_id = HostIdentity();  // never changes while we run
  NOVA_REPLY_IF_ERROR(r, host_id.status(), m_.errors);
  // Not the catalog (its lock is held across fdatasyncs): the disk store knows every
  // persistent file it has open, and no in-memory one.
  auto file = disk_->Get(req.file_id);
  if (file == nullptr) {
    NOVA_REPLY_IF_ERROR(r, Status::NotFound("no persistent StoC file " +
                                            std::to_string(req.file_id)),
                        m_.errors);
  }
  // A corrupt file, or one whose fdatasync failed, is not located: read by request, which
  // refuses a corrupt one.
  NOVA_REPLY_IF_ERROR(r, file->health(), m_.errors);
  LocalFileResponse resp;
  NOVA_REPLY_IF_ERROR(r, file->Identity(&resp.device, &resp.inode), m_.errors);
  const std::string path = disk_->PathOf(req.file_id);
  char* absolute = ::realpath(path.c_str(), nullptr);
  if (absolute == nullptr) {
    // Deleted since (ENOENT) or a directory we may no longer search: read by request.
    NOVA_REPLY_IF_ERROR(r, Status::FromErrno("realpath " + path, errno), m_.errors);
  }
  resp.path = absolute;
  std::free(absolute);
  resp.host_id = host_id.value();
  resp.load = CurrentLoad();
  r->Reply(Encode(resp));
}

void StocServer::HandleFence(std::string_view payload, rpc::Responder* r) {
  FenceRequest req;
  NOVA_REPLY_IF_ERROR(r, Malformed(Decode(payload, &req)), m_.errors);
  if (req.owner_epoch == 0) {
    NOVA_REPLY_IF_ERROR(r, Status::InvalidArgument("a fence needs an owner epoch above 0"),
                        m_.errors);
  }
  NOVA_REPLY_IF_ERROR(r, AdmitRange(req.range_id, req.owner_epoch, "fence").status(), m_.errors);
  r->Reply(Encode(LoadOnlyResponse{CurrentLoad()}));
}

// ---- Owner fencing -------------------------------------------------------------------

std::shared_ptr<StocServer::RangeFence> StocServer::FenceOf(uint32_t range_id) {
  MutexLock lock(&fences_mu_);
  auto& fence = fences_[range_id];
  if (!fence) fence = std::make_shared<RangeFence>();
  return fence;
}

Result<std::shared_ptr<StocServer::RangeFence>> StocServer::AdmitRange(uint32_t range_id,
                                                                       uint64_t epoch,
                                                                       std::string_view what) {
  auto fence = FenceOf(range_id);
  auto stale = [&](uint64_t newest) {
    return Status::Fenced("StoC " + std::to_string(options_.stoc_id) + ": " + std::string(what) +
                          " at owner epoch " + std::to_string(epoch) + " of range " +
                          std::to_string(range_id) + ", which owner epoch " +
                          std::to_string(newest) + " has fenced");
  };
  uint64_t current;
  {
    MutexLock lock(&fence->mu);
    current = fence->epoch;
  }
  if (epoch < current) return stale(current);
  if (epoch > current) {
    // Durable before it refuses anything (invariant 2). Outside fence->mu: an fdatasync
    // there would stall every append admission (OnWriteWithImm holds slots_mu_ for it).
    // The catalog orders concurrent raises: it refuses one that went back meanwhile.
    Status persisted = catalog_->SetFence(range_id, epoch);
    if (persisted.IsInvalidArgument()) return stale(catalog_->Fences()[range_id]);
    NOVA_RETURN_NOT_OK_PREPEND(persisted,
                               "recording the fence of range " + std::to_string(range_id));
  }
  MutexLock lock(&fence->mu);
  if (epoch < fence->epoch) return stale(fence->epoch);
  if (epoch > fence->epoch) {
    LOG(INFO) << "StoC " << options_.stoc_id << ": range " << range_id << " fenced at owner epoch "
              << epoch << " (was " << fence->epoch << ") by a " << what;
    fence->epoch = epoch;
  }
  // The drain of invariant 2: appends admitted under an older epoch are written and
  // acknowledged before the caller goes on (they were accepted before the fence).
  fence->drained.Wait(&lock, [&]() REQUIRES(fence->mu) {
    return fence->inflight.empty() || fence->inflight.begin()->first >= epoch;
  });
  return fence;
}

Result<std::shared_ptr<StocServer::RangeFence>> StocServer::AdmitWriter(const std::string& name,
                                                                        uint64_t epoch) {
  const ParsedFileName parsed = ParseStocFileName(name);
  if (parsed.type == StocFileType::kUnknown) return std::shared_ptr<RangeFence>();
  return AdmitRange(parsed.range_id, epoch, "write of " + name);
}

// ---- Slots and appends ---------------------------------------------------------------

Result<SlotInfo> StocServer::ReserveSlot(transport::PeerId peer, uint64_t file_id, uint64_t bytes,
                                         std::shared_ptr<RangeFence> fence, uint64_t owner_epoch) {
  bytes = std::max(bytes, kMinSlotBytes);
  if (bytes > options_.max_block_bytes) {
    return Status::InvalidArgument("slot of " + std::to_string(bytes) +
                                   " bytes exceeds the maximum block size " +
                                   std::to_string(options_.max_block_bytes));
  }
  auto buf = file_buffer_->Allocate(bytes);
  if (!buf.ok()) return buf.status().Prepend("StoC file buffer");
  MutexLock lock(&slots_mu_);
  uint32_t id;
  do {
    id = next_slot_id_++;
  } while (id == 0 || slots_.count(id) != 0);
  Slot& slot = slots_[id];
  slot.id = id;
  slot.buffer = buf.value();
  slot.file_id = file_id;
  slot.owner = peer;
  slot.fence = std::move(fence);
  slot.owner_epoch = owner_epoch;
  auto remote = slot.buffer.remote();
  return SlotInfo{id, remote.addr, remote.rkey, slot.buffer.capacity};
}

void StocServer::ReleaseSlot(uint32_t slot_id) {
  ReleaseSlotsWhere([slot_id](const Slot& slot) { return slot.id == slot_id; });
}

void StocServer::ReleaseSlotsWhere(const std::function<bool(const Slot&)>& pred) {
  MutexLock lock(&slots_mu_);
  std::vector<uint32_t> ids;
  for (auto& [id, slot] : slots_) {
    if (pred(slot)) ids.push_back(id);
  }
  for (uint32_t id : ids) {
    Slot& slot = slots_[id];
    if (slot.busy) {
      slot.released = true;  // DrainAppends frees it after writing its block
    } else {
      FreeSlotLocked(&slot);
    }
  }
}

void StocServer::OrphanSlotsOf(uint64_t file_id, transport::PeerId deleter) {
  ReleaseSlotsWhere(
      [&](const Slot& slot) { return slot.file_id == file_id && slot.owner == deleter; });
  MutexLock lock(&slots_mu_);
  for (auto& [id, slot] : slots_) {
    if (slot.file_id == file_id) slot.orphaned = true;
  }
}

void StocServer::FreeSlotLocked(Slot* slot) {
  file_buffer_->Free(slot->buffer);
  slots_.erase(slot->id);
}

void StocServer::OnPeerDown(transport::PeerId peer, const Status& why) {
  ReleaseSlotsWhere([peer](const Slot& slot) { return slot.owner == peer; });
}

std::shared_ptr<StocServer::AppendQueue> StocServer::QueueFor(uint64_t file_id) {
  MutexLock lock(&slots_mu_);
  auto& q = queues_[file_id];
  if (!q) q = std::make_shared<AppendQueue>();
  return q;
}

void StocServer::SendAck(transport::PeerId peer, const AppendAck& ack) {
  Status s = endpoint_.Notify(peer, kAppendAck, Encode(ack));
  LOG_IF(INFO, !s.ok()) << "cannot acknowledge an append to peer " << peer << ": " << s.ToString();
}

bool StocServer::OnWriteWithImm(transport::PeerId peer, uint32_t imm, uint64_t length) {
  AppendAck refused;
  refused.slot_id = imm;
  uint64_t file_id = 0;
  const char* data = nullptr;
  std::shared_ptr<RangeFence> fence;
  uint64_t owner_epoch = 0;
  {
    MutexLock lock(&slots_mu_);
    auto it = slots_.find(imm);
    if (it == slots_.end() || it->second.owner != peer || it->second.released) {
      refused.status = Status::PermissionDenied("append into slot " + std::to_string(imm) +
                                                " that this client does not hold");
    } else if (it->second.orphaned) {
      bool stale = false;
      if (RangeFence* f = it->second.fence.get(); f != nullptr) {
        MutexLock fence_lock(&f->mu);
        stale = it->second.owner_epoch < f->epoch;
      }
      refused.status = stale ? Status::Fenced("StoC " + std::to_string(options_.stoc_id) +
                                              ": append at owner epoch " +
                                              std::to_string(it->second.owner_epoch) +
                                              " to a file a newer owner deleted")
                             : Status::NotFound("append into slot " + std::to_string(imm) +
                                                " of a deleted StoC file");
    } else if (it->second.busy) {
      refused.status =
          Status::IllegalState("append into a slot whose previous append is not acknowledged");
    } else if (length > it->second.buffer.capacity || length > options_.max_block_bytes) {
      refused.status = Status::InvalidArgument("append of " + std::to_string(length) +
                                               " bytes exceeds its slot");
    } else if (it->second.fence != nullptr) {
      // Admitted under both locks, so a fence either waits for this append (invariant 2)
      // or this append sees the fence (invariant 1).
      RangeFence* f = it->second.fence.get();
      MutexLock fence_lock(&f->mu);
      if (it->second.owner_epoch < f->epoch) {
        refused.status =
            Status::Fenced("StoC " + std::to_string(options_.stoc_id) + ": append at owner epoch " +
                           std::to_string(it->second.owner_epoch) +
                           " to a range fenced at owner epoch " + std::to_string(f->epoch));
      } else {
        ++f->inflight[it->second.owner_epoch];
      }
    }
    if (refused.status.ok()) {
      it->second.busy = true;
      file_id = it->second.file_id;
      data = it->second.buffer.data;
      fence = it->second.fence;
      owner_epoch = it->second.owner_epoch;
    }
  }
  if (data == nullptr) {
    m_.errors->Increment();
    LOG_EVERY_N(WARNING, 100) << "refused an append from peer " << peer << ": "
                              << refused.status.ToString();
    refused.load = CurrentLoad();
    SendAck(peer, refused);
    return true;
  }
  queue_depth_.fetch_add(1);
  pending_bytes_.fetch_add(length);
  auto queue = QueueFor(file_id);
  bool schedule;
  {
    MutexLock lock(&queue->mu);
    queue->pending.push_back(PendingAppend{imm, peer, data, static_cast<uint32_t>(length),
                                           MonoNow(), std::move(fence), owner_epoch});
    schedule = !queue->scheduled;
    queue->scheduled = true;
  }
  if (schedule) {
    Status s = storage_pool_.Submit([this, file_id] { DrainAppends(file_id); });
    if (!s.ok()) {
      // Shutting down (or the pool is saturated): drain here with an error.
      LOG(WARNING) << "storage pool refused an append drain: " << s.ToString();
      DrainAppends(file_id);
    }
  }
  return true;
}

void StocServer::DrainAppends(uint64_t file_id) {
  auto queue = QueueFor(file_id);
  Status fault = MAYBE_FAULT(kStorageFault);
  std::shared_ptr<DiskFile> file = disk_->Get(file_id);
  while (true) {
    std::vector<PendingAppend> batch;
    {
      MutexLock lock(&queue->mu);
      if (queue->pending.empty()) {
        queue->scheduled = false;
        return;
      }
      batch.assign(queue->pending.begin(), queue->pending.end());
      queue->pending.clear();
    }
    std::vector<BlockToAppend> blocks(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      blocks[i].data = batch[i].data;
      blocks[i].size = batch[i].size;
    }
    if (!fault.ok() || file == nullptr) {
      const Status s = !fault.ok() ? fault : Status::NotFound("StoC file was deleted");
      for (auto& b : blocks) b.status = s;
    } else {
      uint64_t fsyncs = 0;
      file->AppendGroup(&blocks, &fsyncs);
      m_.fsyncs->Increment(fsyncs);
    }
    // Free the slots for their next append before acknowledging this one.
    {
      MutexLock lock(&slots_mu_);
      for (const PendingAppend& p : batch) {
        auto it = slots_.find(p.slot_id);
        if (it == slots_.end()) continue;
        it->second.busy = false;
        if (it->second.released) FreeSlotLocked(&it->second);
      }
    }
    // The load an acknowledgment reports includes its own group: the queue this block
    // waited in, which is what power-of-d should compare.
    const LoadStats load = CurrentLoad();
    uint64_t bytes = 0;
    for (const PendingAppend& p : batch) bytes += p.size;
    queue_depth_.fetch_sub(static_cast<uint32_t>(batch.size()));
    pending_bytes_.fetch_sub(bytes);
    const MonoTime now = MonoNow();
    for (size_t i = 0; i < batch.size(); ++i) {
      AppendAck ack;
      ack.slot_id = batch[i].slot_id;
      ack.status = blocks[i].status;
      ack.file_id = file_id;
      ack.offset = blocks[i].offset;
      ack.size = blocks[i].size;
      ack.load = load;
      if (ack.status.ok()) {
        m_.appends->Increment();
        m_.append_bytes->Increment(ack.size);
        m_.append_latency_us->Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(now - batch[i].arrived).count()));
      } else {
        m_.errors->Increment();
      }
      SendAck(batch[i].peer, ack);
    }
    // Acknowledged: a fence waiting for these appends may answer (invariant 2).
    for (const PendingAppend& p : batch) {
      if (p.fence == nullptr) continue;
      MutexLock lock(&p.fence->mu);
      auto it = p.fence->inflight.find(p.owner_epoch);
      if (it != p.fence->inflight.end() && --it->second == 0) p.fence->inflight.erase(it);
      p.fence->drained.NotifyAll();
    }
  }
}

}  // namespace nova::stoc
