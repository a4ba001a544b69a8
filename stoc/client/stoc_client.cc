#include "stoc/client/stoc_client.h"

#include <cstring>
#include <future>

#include <glog/logging.h>

#include "common/wire/message.h"

namespace nova::stoc {

namespace {
constexpr wire::TypeRange kAckRange{kAppendAck, kAppendAck};

// StocClient::ThreadReadNanos: written and read by its own thread only.
thread_local uint64_t thread_read_nanos = 0;

Counter* CounterOf(MetricsRegistry* metrics, const char* name, const char* help) {
  return metrics == nullptr ? nullptr : metrics->GetCounter(name, help);
}
}  // namespace

StocClient::StocClient(rpc::RpcEndpoint* endpoint, const StocClientOptions& options)
    : endpoint_(endpoint),
      options_(options),
      inline_reads_(options.inline_reads),
      reads_(CounterOf(options.metrics, "stoc_client_reads_total",
                       "Blocks read from StoCs (failed reads included)")),
      read_us_(CounterOf(options.metrics, "stoc_client_read_us_total",
                         "Microseconds spent reading blocks from StoCs, all threads")),
      local_reads_(CounterOf(options.metrics, "stoc_client_local_reads_total",
                             "Blocks of StoCs on this host read from their files with pread "
                             "(counted in stoc_client_reads_total too)")),
      mapped_reads_(CounterOf(options.metrics, "stoc_client_mapped_reads_total",
                              "Blocks of StoCs on this host read in place from a memory mapping "
                              "of their files (not in stoc_client_reads_total)")) {
  if (options_.local_reads) {
    local_ = std::make_unique<LocalFiles>([this](uint32_t stoc_id, uint64_t file_id) {
      return LocateFile(stoc_id, file_id);
    });
  }
  endpoint_->RegisterService(kAckRange, this, nullptr);  // inline: only wakes a waiter
  endpoint_->AddObserver(this);
}

StocClient::~StocClient() = default;

Status StocClient::AddStoc(uint32_t stoc_id, const std::string& address) {
  auto peer = endpoint_->transport()->Connect(address);
  MutexLock lock(&mu_);
  if (!peer.ok()) {
    if (peers_.count(stoc_id) == 0) {
      Unconnected& u = unconnected_[stoc_id];  // keeps `dialing`: a request may be dialing
      u.address = address;
      u.next_try = MonoNow() + kReconnectInterval;
    }
    return peer.status().Prepend("StoC " + std::to_string(stoc_id));
  }
  unconnected_.erase(stoc_id);
  auto it = peers_.find(stoc_id);
  const bool moved = it != peers_.end() && it->second != peer.value();
  peers_[stoc_id] = peer.value();
  lock.Unlock();
  // Re-addressed: what was located at the old address is not this StoC's.
  if (moved && local_ != nullptr) local_->ForgetStoc(stoc_id);
  return Status::OK();
}

std::vector<uint32_t> StocClient::stocs() const {
  MutexLock lock(&mu_);
  std::vector<uint32_t> ids;
  for (auto& [id, peer] : peers_) ids.push_back(id);
  return ids;
}

Result<transport::PeerId> StocClient::PeerOf(uint32_t stoc_id) {
  const std::string name = "StoC " + std::to_string(stoc_id);
  std::string address;
  {
    MutexLock lock(&mu_);
    auto it = peers_.find(stoc_id);
    if (it != peers_.end()) return it->second;
    auto u = unconnected_.find(stoc_id);
    if (u == unconnected_.end()) return Status::InvalidArgument("unknown " + name);
    // Fail at once rather than dial too: the transport serializes dials to one address, so
    // every request joining would wait out all earlier dials (up to a connect timeout each)
    // and, with a StoC that drops packets, flush, compaction and worker threads would pile up.
    if (u->second.dialing) {
      return Status::NetworkError(name + " at " + u->second.address +
                                  " is not connected (another request is connecting it)");
    }
    if (MonoNow() < u->second.next_try) {
      return Status::NetworkError(name + " at " + u->second.address +
                                  " is not connected (could not be reached lately)");
    }
    u->second.dialing = true;  // this thread is the one dialer until it clears the flag
    address = u->second.address;
  }
  auto peer = endpoint_->transport()->Connect(address);
  MutexLock lock(&mu_);
  // The entry is gone if AddStoc connected meanwhile; AddStoc failing kept our flag.
  auto u = unconnected_.find(stoc_id);
  if (!peer.ok()) {
    if (u != unconnected_.end()) {
      u->second.dialing = false;
      u->second.next_try = MonoNow() + kReconnectInterval;  // from the end of this dial
    }
    return peer.status().Prepend(name);
  }
  if (u != unconnected_.end()) {
    if (u->second.address == address) {
      unconnected_.erase(u);
    } else {
      u->second.dialing = false;  // AddStoc gave a new address meanwhile: dial that one later
    }
  }
  auto [it, added] = peers_.emplace(stoc_id, peer.value());  // AddStoc may have come first
  LOG_IF(INFO, added) << "connected to " << name << " at " << address;
  return it->second;
}

template <typename Resp>
Status StocClient::Rpc(uint32_t stoc_id, uint16_t type, const std::string& request, Resp* resp,
                       std::chrono::milliseconds timeout) {
  auto peer = PeerOf(stoc_id);
  if (!peer.ok()) return peer.status();
  auto reply = endpoint_->CallSync(peer.value(), type, request,
                                   timeout.count() > 0 ? timeout : options_.timeout);
  if (!reply.ok()) return reply.status().Prepend("StoC " + std::to_string(stoc_id));
  NOVA_RETURN_NOT_OK(Decode(reply.value(), resp));
  load_.Update(stoc_id, StocLoad{resp->load.queue_depth, resp->load.pending_bytes, MonoNow()});
  return Status::OK();
}

Status StocClient::WaitOp(const std::function<Status(transport::Completion)>& post) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  NOVA_RETURN_NOT_OK(post([promise](const Status& s) { promise->set_value(s); }));
  if (future.wait_for(options_.timeout) != std::future_status::ready) {
    return Status::TimedOut("one-sided operation did not complete");
  }
  return future.get();
}

Result<std::unique_ptr<StocFile>> StocClient::Open(uint32_t stoc_id, const std::string& name,
                                                   FileKind kind, const OpenOptions& options) {
  OpenRequest req;
  req.name = name;
  req.kind = kind;
  req.create = options.create;
  req.for_append = options.for_append;
  req.slot_bytes = options.slot_bytes;
  req.owner_epoch = options.owner_epoch;
  OpenResponse resp;
  NOVA_RETURN_NOT_OK(Rpc(stoc_id, kOpen, Encode(req), &resp));
  auto f = std::make_unique<StocFile>();
  f->stoc_id = stoc_id;
  f->file_id = resp.file.file_id;
  f->kind = resp.file.kind;
  f->name = resp.file.name;
  f->length = resp.file.length;
  f->regions = resp.file.regions;
  f->slot = resp.slot;
  f->owner_epoch = options.owner_epoch;
  if (kind == FileKind::kMemory) {
    MutexLock lock(&mu_);
    regions_[{stoc_id, f->file_id}] = f->regions;
  }
  return f;
}

Result<BlockHandle> StocClient::Append(StocFile* file, const transport::MemoryRegion& src,
                                       uint64_t src_offset, uint64_t length) {
  if (file->broken) return Status::IllegalState("StoC file handle is broken: reopen it");
  auto peer = PeerOf(file->stoc_id);
  if (!peer.ok()) return peer.status();
  return file->kind == FileKind::kMemory ? AppendMemory(file, peer.value(), src, src_offset, length)
                                         : AppendDisk(file, peer.value(), src, src_offset, length);
}

Result<BlockHandle> StocClient::AppendMemory(StocFile* file, transport::PeerId peer,
                                             const transport::MemoryRegion& src,
                                             uint64_t src_offset, uint64_t length) {
  if (file->regions.empty()) return Status::IllegalState("memory file without regions");
  const RegionInfo* region = &file->regions.back();
  if (file->length < region->logical_offset ||
      file->length - region->logical_offset + length > region->capacity) {
    // A block never straddles regions: continue in a new one (the old one's tail stays unused).
    NewRegionResponse resp;
    NOVA_RETURN_NOT_OK(
        Rpc(file->stoc_id, kNewRegion, Encode(NewRegionRequest{file->file_id, length}), &resp));
    file->regions.push_back(resp.region);
    {
      MutexLock lock(&mu_);
      regions_[{file->stoc_id, file->file_id}] = file->regions;
    }
    region = &file->regions.back();
    file->length = region->logical_offset;
  }
  const uint64_t in_region = file->length - region->logical_offset;
  const transport::RemoteAddr where{region->addr + in_region, region->rkey};
  Status s = WaitOp([&](transport::Completion done) {
    return endpoint_->transport()->Write(peer, src, src_offset, length, where, std::nullopt,
                                         std::move(done));
  });
  if (!s.ok()) {
    if (s.IsTimedOut()) file->broken = true;
    return s.Prepend("append to in-memory StoC file " + file->name);
  }
  BlockHandle h{file->stoc_id, file->file_id, FileKind::kMemory, file->length, length};
  file->length += length;
  return h;
}

Result<BlockHandle> StocClient::AppendDisk(StocFile* file, transport::PeerId peer,
                                           const transport::MemoryRegion& src,
                                           uint64_t src_offset, uint64_t length) {
  if (file->slot.slot_id == 0 || length > file->slot.bytes) {
    ReserveSlotResponse resp;
    NOVA_RETURN_NOT_OK(Rpc(
        file->stoc_id, kReserveSlot,
        Encode(ReserveSlotRequest{file->file_id, length, file->slot.slot_id, file->owner_epoch}),
        &resp));
    file->slot = resp.slot;
  }
  auto waiter = std::make_shared<AckWaiter>();
  const auto key = std::make_pair(peer, file->slot.slot_id);
  {
    MutexLock lock(&mu_);
    waiters_[key] = waiter;
  }
  auto forget = [&]() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = waiters_.find(key);
    if (it != waiters_.end() && it->second == waiter) waiters_.erase(it);
  };
  const transport::RemoteAddr where{file->slot.addr, file->slot.rkey};
  Status s = WaitOp([&](transport::Completion done) {
    return endpoint_->transport()->Write(peer, src, src_offset, length, where,
                                         file->slot.slot_id, std::move(done));
  });
  if (!s.ok()) {
    forget();
    if (s.IsTimedOut()) file->broken = true;
    return s.Prepend("append to StoC file " + file->name);
  }
  MutexLock lock(&waiter->mu);
  if (!waiter->cv.WaitUntil(&lock, std::chrono::steady_clock::now() + options_.timeout,
                            [&]() REQUIRES(waiter->mu) { return waiter->done; })) {
    lock.Unlock();
    forget();
    file->broken = true;
    return Status::TimedOut("StoC did not acknowledge the append to " + file->name);
  }
  const AppendAck ack = waiter->ack;
  lock.Unlock();
  if (!ack.status.ok()) return ack.status.Prepend("append to StoC file " + file->name);
  load_.Update(file->stoc_id, StocLoad{ack.load.queue_depth, ack.load.pending_bytes, MonoNow()});
  file->length = ack.offset + ack.size;
  return BlockHandle{file->stoc_id, file->file_id, FileKind::kDisk, ack.offset, ack.size};
}

void StocClient::HandleRequest(transport::PeerId peer, uint16_t type, std::string payload,
                               rpc::Responder responder) {
  AppendAck ack;
  Status s = Decode(payload, &ack);
  if (!s.ok()) {
    LOG_EVERY_N(WARNING, 100) << "malformed append acknowledgment: " << s.ToString();
    return;
  }
  std::shared_ptr<AckWaiter> waiter;
  {
    MutexLock lock(&mu_);
    auto it = waiters_.find({peer, ack.slot_id});
    if (it == waiters_.end()) return;  // timed out meanwhile
    waiter = std::move(it->second);
    waiters_.erase(it);
  }
  MutexLock lock(&waiter->mu);
  waiter->ack = std::move(ack);
  waiter->done = true;
  waiter->cv.NotifyAll();
}

void StocClient::OnPeerDown(transport::PeerId peer, const Status& why) {
  std::vector<std::shared_ptr<AckWaiter>> failed;
  std::vector<uint32_t> down;  // the StoC ids behind `peer`
  {
    MutexLock lock(&mu_);
    for (const auto& [id, p] : peers_) {
      if (p == peer) down.push_back(id);
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->first.first == peer) {
        failed.push_back(std::move(it->second));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& w : failed) {
    MutexLock lock(&w->mu);
    w->ack.status = Status::NetworkError("StoC went down before acknowledging: " + why.ToString());
    w->done = true;
    w->cv.NotifyAll();
  }
  // A StoC that is down is not read locally either (its files are still there, but the
  // cluster treats its data as unavailable, and a reader fails over as with requests): its
  // files are located again, by a request, once it is back.
  if (local_ != nullptr) {
    for (uint32_t id : down) local_->ForgetStoc(id);
  }
}

Result<std::vector<RegionInfo>> StocClient::RegionsOf(uint32_t stoc_id, uint64_t file_id,
                                                      bool refresh) {
  if (!refresh) {
    MutexLock lock(&mu_);
    auto it = regions_.find({stoc_id, file_id});
    if (it != regions_.end()) return it->second;
  }
  auto st = StatFile(stoc_id, file_id);
  if (!st.ok()) return st.status();
  MutexLock lock(&mu_);
  regions_[{stoc_id, file_id}] = st->regions;
  return st->regions;
}

uint64_t StocClient::ThreadReadNanos() { return thread_read_nanos; }

Status StocClient::Read(const BlockHandle& block, const transport::MemoryRegion& dst,
                        uint64_t dst_offset) {
  const uint64_t start = MonoNanos();
  Status s = ReadBlock(block, dst, dst_offset);
  CountRead(start);
  return s;
}

bool StocClient::ReadLocal(const BlockHandle& block, char* dst) {
  const uint64_t start = MonoNanos();
  if (!ReadFromFile(block, dst)) return false;
  CountRead(start);
  return true;
}

std::shared_ptr<const MappedFile> StocClient::MapLocal(uint32_t stoc_id, uint64_t file_id) {
  if (local_ == nullptr || !options_.map_local_files) return nullptr;
  return local_->Map(stoc_id, file_id);
}

void StocClient::CountRead(uint64_t start) {
  // Two steady-clock readings (vDSO, no system call) per block: cheap next to a round trip.
  const uint64_t ns = MonoNanos() - start;
  thread_read_nanos += ns;
  if (reads_ != nullptr) {
    reads_->Increment();
    read_us_->Increment((ns + 500) / 1000);  // rounded: no bias over many reads
  }
}

bool StocClient::ReadFromFile(const BlockHandle& block, char* dst) {
  if (block.kind != FileKind::kDisk || local_ == nullptr ||
      !local_->Read(block.stoc_id, block.file_id, block.offset, block.size, dst)) {
    return false;
  }
  if (local_reads_ != nullptr) local_reads_->Increment();
  return true;
}

Status StocClient::ReadBlock(const BlockHandle& block, const transport::MemoryRegion& dst,
                             uint64_t dst_offset) {
  if (dst_offset > dst.length || block.size > dst.length - dst_offset) {
    return Status::InvalidArgument("read destination outside its region");
  }
  if (ReadFromFile(block, dst.base + dst_offset)) return Status::OK();
  auto peer = PeerOf(block.stoc_id);
  if (!peer.ok()) return peer.status();
  if (block.kind == FileKind::kMemory) {
    for (bool refresh : {false, true}) {
      auto regions = RegionsOf(block.stoc_id, block.file_id, refresh);
      if (!regions.ok()) return regions.status();
      for (const RegionInfo& r : regions.value()) {
        if (block.offset < r.logical_offset || block.offset - r.logical_offset > r.capacity ||
            block.size > r.capacity - (block.offset - r.logical_offset)) {
          continue;
        }
        const transport::RemoteAddr where{r.addr + (block.offset - r.logical_offset), r.rkey};
        Status s = WaitOp([&](transport::Completion done) {
          return endpoint_->transport()->Read(peer.value(), where, block.size, dst, dst_offset,
                                              std::move(done));
        });
        // A dead rkey means our cached regions are stale (file deleted, StoC restarted):
        // ask the StoC again, which also turns a deleted file into NotFound.
        if (s.IsPermissionDenied() && !refresh) break;
        return s;
      }
    }
    return Status::OutOfRange("block is not inside one region of in-memory file " +
                              std::to_string(block.file_id));
  }
  ReadRequest req;
  req.file_id = block.file_id;
  req.offset = block.offset;
  req.size = block.size;
  if (block.size <= kMaxInlineReadBytes && inline_reads_.load(std::memory_order_relaxed)) {
    ReadInlineResponse resp;
    Status s = Rpc(block.stoc_id, kReadInline, Encode(req), &resp);
    if (s.code() != Status::Code::kNotSupported) {
      if (!s.ok()) return s;
      if (resp.data.size() != block.size) {
        return Status::Corruption("StoC " + std::to_string(block.stoc_id) + " returned " +
                                  std::to_string(resp.data.size()) + " bytes for a block of " +
                                  std::to_string(block.size));
      }
      std::memcpy(dst.base + dst_offset, resp.data.data(), resp.data.size());
      return Status::OK();
    }
    if (inline_reads_.exchange(false)) {
      LOG(INFO) << "StoC " << block.stoc_id
                << " does not answer inline reads (an older version): reading with WRITEs";
    }
  }
  const transport::RemoteAddr where = dst.Remote(dst_offset);
  req.dst_addr = where.addr;
  req.dst_rkey = where.rkey;
  LoadOnlyResponse resp;
  return Rpc(block.stoc_id, kRead, Encode(req), &resp);
}

Result<LocalFileResponse> StocClient::LocateFile(uint32_t stoc_id, uint64_t file_id) {
  LocalFileResponse resp;
  NOVA_RETURN_NOT_OK(
      Rpc(stoc_id, kLocalFile, Encode(FileIdRequest{file_id}), &resp, kLocateTimeout));
  return resp;
}

Status StocClient::Close(StocFile* file) {
  CloseRequest req{file->file_id, file->slot.slot_id,
                   file->kind == FileKind::kMemory ? file->length : 0};
  LoadOnlyResponse resp;
  Status s = Rpc(file->stoc_id, kClose, Encode(req), &resp);
  file->slot = SlotInfo();
  return s;
}

Status StocClient::Delete(uint32_t stoc_id, const std::string& name, uint64_t owner_epoch) {
  LoadOnlyResponse resp;
  return Rpc(stoc_id, kDelete, Encode(NameRequest{name, owner_epoch}), &resp);
}

Status StocClient::FenceRange(uint32_t stoc_id, uint32_t range_id, uint64_t owner_epoch) {
  if (owner_epoch == 0) return Status::InvalidArgument("a fence needs an owner epoch above 0");
  LoadOnlyResponse resp;
  return Rpc(stoc_id, kFenceRange, Encode(FenceRequest{range_id, owner_epoch}), &resp);
}

Result<std::vector<FileState>> StocClient::List(uint32_t stoc_id) {
  ListResponse resp;
  NOVA_RETURN_NOT_OK(Rpc(stoc_id, kList, std::string(), &resp));
  return std::move(resp.files);
}

Result<StatsResponse> StocClient::Stats(uint32_t stoc_id) {
  StatsResponse resp;
  NOVA_RETURN_NOT_OK(Rpc(stoc_id, kStats, std::string(), &resp));
  return resp;
}

Result<FileState> StocClient::StatFile(uint32_t stoc_id, uint64_t file_id) {
  StatFileResponse resp;
  NOVA_RETURN_NOT_OK(Rpc(stoc_id, kStatFile, Encode(FileIdRequest{file_id}), &resp));
  return std::move(resp.file);
}

Result<std::string> StocClient::Call(uint32_t stoc_id, uint16_t type, std::string_view request,
                                     std::chrono::milliseconds timeout) {
  auto peer = PeerOf(stoc_id);
  if (!peer.ok()) return peer.status();
  auto reply = endpoint_->CallSync(peer.value(), type, request, timeout);
  if (!reply.ok()) return reply.status().Prepend("StoC " + std::to_string(stoc_id));
  LoadStats load;
  std::string_view body;
  NOVA_RETURN_NOT_OK_PREPEND(SplitLoad(reply.value(), &load, &body),
                             "StoC " + std::to_string(stoc_id));
  load_.Update(stoc_id, StocLoad{load.queue_depth, load.pending_bytes, MonoNow()});
  return std::string(body);
}

}  // namespace nova::stoc
