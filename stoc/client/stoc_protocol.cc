#include "stoc/client/stoc_protocol.h"

#include "common/wire/message.h"

namespace nova::stoc {

const char* FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kMemory:
      return "memory";
    case FileKind::kDisk:
      return "disk";
  }
  return "unknown";
}

using wire::PayloadReader;
using wire::PayloadWriter;

namespace {

// Field helpers shared by several messages.
void Put(PayloadWriter* w, const LoadStats& l) {
  w->PutU32(l.queue_depth);
  w->PutU64(l.pending_bytes);
}
bool Get(PayloadReader* r, LoadStats* l) {
  return r->GetU32("queue_depth", &l->queue_depth) && r->GetU64("pending_bytes", &l->pending_bytes);
}

void Put(PayloadWriter* w, const RegionInfo& g) {
  w->PutU64(g.logical_offset);
  w->PutU64(g.addr);
  w->PutU32(g.rkey);
  w->PutU64(g.capacity);
}
bool Get(PayloadReader* r, RegionInfo* g) {
  return r->GetU64("logical_offset", &g->logical_offset) && r->GetU64("addr", &g->addr) &&
         r->GetU32("rkey", &g->rkey) && r->GetU64("capacity", &g->capacity);
}

void Put(PayloadWriter* w, const SlotInfo& s) {
  w->PutU32(s.slot_id);
  w->PutU64(s.addr);
  w->PutU32(s.rkey);
  w->PutU64(s.bytes);
}
bool Get(PayloadReader* r, SlotInfo* s) {
  return r->GetU32("slot_id", &s->slot_id) && r->GetU64("slot_addr", &s->addr) &&
         r->GetU32("slot_rkey", &s->rkey) && r->GetU64("slot_bytes", &s->bytes);
}

bool GetKind(PayloadReader* r, FileKind* kind) {
  uint8_t k;
  if (!r->GetU8("kind", &k)) return false;
  if (k != static_cast<uint8_t>(FileKind::kMemory) && k != static_cast<uint8_t>(FileKind::kDisk)) {
    *kind = FileKind::kDisk;
    return false;
  }
  *kind = static_cast<FileKind>(k);
  return true;
}

// Regions are bounded so a malformed count cannot make us allocate much.
constexpr uint32_t kMaxRegionsPerFile = 1 << 16;
constexpr uint32_t kMaxFilesPerList = 1 << 24;
// Bytes of one encoded block extent (offset u64 | size u64): bounds a block count by the
// bytes actually left in the payload before anything is allocated.
constexpr size_t kBlockExtentBytes = 16;

// See FileState for the encoding. DO NOT CHANGE: on the wire.
void Put(PayloadWriter* w, const FileState& f, bool with_details) {
  w->PutU64(f.file_id);
  w->PutU8(static_cast<uint8_t>(f.kind));
  w->PutBytes(f.name);
  w->PutU64(f.length);
  w->PutVarint32(with_details ? static_cast<uint32_t>(f.regions.size()) : 0);
  if (with_details) {
    for (const auto& g : f.regions) Put(w, g);
  }
  w->PutVarint32(with_details ? static_cast<uint32_t>(f.blocks.size()) : 0);
  if (with_details) {
    for (const auto& [offset, size] : f.blocks) {
      w->PutU64(offset);
      w->PutU64(size);
    }
  }
}
bool Get(PayloadReader* r, FileState* f) {
  uint32_t n;
  if (!r->GetU64("file_id", &f->file_id) || !GetKind(r, &f->kind) ||
      !r->GetString("name", &f->name) || !r->GetU64("length", &f->length) ||
      !r->GetVarint32("regions", &n) || n > kMaxRegionsPerFile) {
    return false;
  }
  f->regions.resize(n);
  for (auto& g : f->regions) {
    if (!Get(r, &g)) return false;
  }
  if (!r->GetVarint32("blocks", &n) || n > r->remaining() / kBlockExtentBytes) return false;
  f->blocks.resize(n);
  for (auto& [offset, size] : f->blocks) {
    if (!r->GetU64("block_offset", &offset) || !r->GetU64("block_size", &size)) return false;
  }
  return true;
}

// The trailing owner epoch of a request: written only when not 0, read only when bytes
// remain (a legacy request ends before it). DO NOT CHANGE: on the wire.
void PutEpoch(PayloadWriter* w, uint64_t epoch) {
  if (epoch != 0) w->PutU64(epoch);
}
bool GetEpoch(PayloadReader* r, uint64_t* epoch) {
  *epoch = 0;
  return r->remaining() == 0 || r->GetU64("owner_epoch", epoch);
}

Status Finish(const PayloadReader& r, bool ok, const char* what) {
  if (!ok) {
    Status s = r.status();
    return s.ok() ? Status::Corruption(std::string("malformed ") + what) : s.Prepend(what);
  }
  return r.Finish().Prepend(what);
}

}  // namespace

std::string Encode(const OpenRequest& m) {
  PayloadWriter w;
  w.PutBytes(m.name);
  w.PutU8(static_cast<uint8_t>(m.kind));
  w.PutU8(m.create ? 1 : 0);
  w.PutU8(m.for_append ? 1 : 0);
  w.PutU64(m.slot_bytes);
  PutEpoch(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, OpenRequest* m) {
  PayloadReader r(in);
  uint8_t create, append;
  bool ok = r.GetString("name", &m->name) && GetKind(&r, &m->kind) && r.GetU8("create", &create) &&
            r.GetU8("for_append", &append) && r.GetU64("slot_bytes", &m->slot_bytes) &&
            GetEpoch(&r, &m->owner_epoch);
  m->create = ok && create != 0;
  m->for_append = ok && append != 0;
  return Finish(r, ok, "open request");
}

std::string Encode(const OpenResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  Put(&w, m.file, true);
  Put(&w, m.slot);
  return w.Finish();
}
Status Decode(std::string_view in, OpenResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && Get(&r, &m->file) && Get(&r, &m->slot);
  return Finish(r, ok, "open response");
}

std::string Encode(const NewRegionRequest& m) {
  PayloadWriter w;
  w.PutU64(m.file_id);
  w.PutU64(m.min_bytes);
  return w.Finish();
}
Status Decode(std::string_view in, NewRegionRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("file_id", &m->file_id) && r.GetU64("min_bytes", &m->min_bytes);
  return Finish(r, ok, "new-region request");
}

std::string Encode(const NewRegionResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  Put(&w, m.region);
  return w.Finish();
}
Status Decode(std::string_view in, NewRegionResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && Get(&r, &m->region);
  return Finish(r, ok, "new-region response");
}

std::string Encode(const ReserveSlotRequest& m) {
  PayloadWriter w;
  w.PutU64(m.file_id);
  w.PutU64(m.bytes);
  w.PutU32(m.release_slot_id);
  PutEpoch(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, ReserveSlotRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("file_id", &m->file_id) && r.GetU64("bytes", &m->bytes) &&
            r.GetU32("release_slot_id", &m->release_slot_id) && GetEpoch(&r, &m->owner_epoch);
  return Finish(r, ok, "reserve-slot request");
}

std::string Encode(const ReserveSlotResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  Put(&w, m.slot);
  return w.Finish();
}
Status Decode(std::string_view in, ReserveSlotResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && Get(&r, &m->slot);
  return Finish(r, ok, "reserve-slot response");
}

std::string Encode(const ReadRequest& m) {
  PayloadWriter w;
  w.PutU64(m.file_id);
  w.PutU64(m.offset);
  w.PutU64(m.size);
  w.PutU64(m.dst_addr);
  w.PutU32(m.dst_rkey);
  return w.Finish();
}
Status Decode(std::string_view in, ReadRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("file_id", &m->file_id) && r.GetU64("offset", &m->offset) &&
            r.GetU64("size", &m->size) && r.GetU64("dst_addr", &m->dst_addr) &&
            r.GetU32("dst_rkey", &m->dst_rkey);
  return Finish(r, ok, "read request");
}

std::string Encode(const CloseRequest& m) {
  PayloadWriter w;
  w.PutU64(m.file_id);
  w.PutU32(m.slot_id);
  w.PutU64(m.length);
  return w.Finish();
}
Status Decode(std::string_view in, CloseRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("file_id", &m->file_id) && r.GetU32("slot_id", &m->slot_id) &&
            r.GetU64("length", &m->length);
  return Finish(r, ok, "close request");
}

std::string Encode(const NameRequest& m) {
  PayloadWriter w;
  w.PutBytes(m.name);
  PutEpoch(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, NameRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetString("name", &m->name) && GetEpoch(&r, &m->owner_epoch);
  return Finish(r, ok, "name request");
}

std::string Encode(const FenceRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range_id);
  w.PutU64(m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, FenceRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range_id", &m->range_id) && r.GetU64("owner_epoch", &m->owner_epoch);
  return Finish(r, ok, "fence request");
}

std::string Encode(const FileIdRequest& m) {
  PayloadWriter w;
  w.PutU64(m.file_id);
  return w.Finish();
}
Status Decode(std::string_view in, FileIdRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("file_id", &m->file_id);
  return Finish(r, ok, "file-id request");
}

std::string Encode(const LoadOnlyResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  return w.Finish();
}
Status Decode(std::string_view in, LoadOnlyResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load);
  return Finish(r, ok, "response");
}

std::string Encode(const ReadInlineResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  w.PutBytes(m.data);
  return w.Finish();
}
Status Decode(std::string_view in, ReadInlineResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && r.GetString("data", &m->data);
  return Finish(r, ok, "inline read response");
}

std::string Encode(const LocalFileResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  w.PutBytes(m.host_id);
  w.PutBytes(m.path);
  w.PutU64(m.device);
  w.PutU64(m.inode);
  return w.Finish();
}
Status Decode(std::string_view in, LocalFileResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && r.GetString("host_id", &m->host_id) &&
            r.GetString("path", &m->path) && r.GetU64("device", &m->device) &&
            r.GetU64("inode", &m->inode);
  return Finish(r, ok, "local file response");
}

std::string Encode(const StatFileResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  Put(&w, m.file, true);
  return w.Finish();
}
Status Decode(std::string_view in, StatFileResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load) && Get(&r, &m->file);
  return Finish(r, ok, "stat-file response");
}

std::string Encode(const ListResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  w.PutVarint32(static_cast<uint32_t>(m.files.size()));
  for (const auto& f : m.files) Put(&w, f, false);
  return w.Finish();
}
Status Decode(std::string_view in, ListResponse* m) {
  PayloadReader r(in);
  uint32_t n = 0;
  bool ok = Get(&r, &m->load) && r.GetVarint32("files", &n) && n <= kMaxFilesPerList;
  if (ok) {
    m->files.clear();
    for (uint32_t i = 0; ok && i < n; ++i) {
      FileState f;
      ok = Get(&r, &f);
      m->files.push_back(std::move(f));
    }
  }
  return Finish(r, ok, "list response");
}

std::string Encode(const StatsResponse& m) {
  PayloadWriter w;
  Put(&w, m.load);
  for (uint64_t v : {m.files, m.appends, m.append_bytes, m.reads, m.read_bytes, m.fsyncs,
                     m.memory_bytes_used, m.memory_bytes_limit, m.file_buffer_bytes_used,
                     m.file_buffer_bytes}) {
    w.PutVarint64(v);
  }
  return w.Finish();
}
Status Decode(std::string_view in, StatsResponse* m) {
  PayloadReader r(in);
  bool ok = Get(&r, &m->load);
  for (uint64_t* v : {&m->files, &m->appends, &m->append_bytes, &m->reads, &m->read_bytes,
                      &m->fsyncs, &m->memory_bytes_used, &m->memory_bytes_limit,
                      &m->file_buffer_bytes_used, &m->file_buffer_bytes}) {
    ok = ok && r.GetVarint64("stat", v);
  }
  return Finish(r, ok, "stats response");
}

std::string Encode(const AppendAck& m) {
  PayloadWriter w;
  w.PutU32(m.slot_id);
  w.PutStatus(m.status);
  w.PutU64(m.file_id);
  w.PutU64(m.offset);
  w.PutU64(m.size);
  Put(&w, m.load);
  return w.Finish();
}
Status Decode(std::string_view in, AppendAck* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("slot_id", &m->slot_id) && r.GetStatus("status", &m->status) &&
            r.GetU64("file_id", &m->file_id) && r.GetU64("offset", &m->offset) &&
            r.GetU64("size", &m->size) && Get(&r, &m->load);
  return Finish(r, ok, "append ack");
}

std::string EncodeWithLoad(const LoadStats& load, std::string_view body) {
  PayloadWriter w;
  Put(&w, load);
  std::string out = w.Finish();
  out.append(body);
  return out;
}
Status SplitLoad(std::string_view in, LoadStats* load, std::string_view* body) {
  PayloadReader r(in);
  if (!Get(&r, load)) return r.status();
  *body = in.substr(in.size() - r.remaining());
  return Status::OK();
}

}  // namespace nova::stoc
