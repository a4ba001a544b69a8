#include "logc/client/logc_protocol.h"

#include "common/wire/message.h"

namespace nova::logc {

using wire::PayloadReader;
using wire::PayloadWriter;

namespace {

// Encoded sizes of list entries, to bound a count by the bytes actually left before
// anything is allocated.
constexpr size_t kMemtableIdBytes = 8;
// memtable u64 | segment u32 | handle u32 | capacity u64 | persisted u8 | length u64
// | persisted_length u64 | addr u64 | rkey u32
constexpr size_t kFileInfoBytes = 8 + 4 + 4 + 8 + 1 + 8 + 8 + 8 + 4;

void Put(PayloadWriter* w, const transport::RemoteAddr& a) {
  w->PutU64(a.addr);
  w->PutU32(a.rkey);
}
bool Get(PayloadReader* r, transport::RemoteAddr* a) {
  return r->GetU64("addr", &a->addr) && r->GetU32("rkey", &a->rkey);
}

// A bool is one byte, 0 or 1; anything else is corruption.
bool GetBool(PayloadReader* r, std::string_view field, bool* v) {
  uint8_t b;
  if (!r->GetU8(field, &b)) return false;
  if (b > 1) return false;
  *v = b == 1;
  return true;
}

// A trailing optional u64 (fields added after the first version): written only when not 0,
// read only when bytes remain.
void PutTrailing(PayloadWriter* w, uint64_t v) {
  if (v != 0) w->PutU64(v);
}
bool GetTrailing(PayloadReader* r, std::string_view field, uint64_t* v) {
  *v = 0;
  return r->remaining() == 0 || r->GetU64(field, v);
}

Status Finish(const PayloadReader& r, bool ok, const char* what) {
  if (!ok) {
    Status s = r.status();
    return s.ok() ? Status::Corruption(std::string("malformed ") + what) : s.Prepend(what);
  }
  return r.Finish().Prepend(what);
}

}  // namespace

std::string Encode(const OpenLogRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  w.PutU64(m.memtable);
  w.PutU32(m.segment);
  w.PutU64(m.capacity);
  w.PutU8(m.persist ? 1 : 0);
  PutTrailing(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, OpenLogRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range", &m->range) && r.GetU64("memtable", &m->memtable) &&
            r.GetU32("segment", &m->segment) && r.GetU64("capacity", &m->capacity) &&
            GetBool(&r, "persist", &m->persist) && GetTrailing(&r, "owner_epoch", &m->owner_epoch);
  return Finish(r, ok, "open-log request");
}

std::string Encode(const OpenLogResponse& m) {
  PayloadWriter w;
  w.PutU32(m.handle);
  Put(&w, m.addr);
  w.PutU64(m.capacity);
  w.PutU8(m.persisted ? 1 : 0);
  w.PutU64(m.length);
  w.PutU64(m.persisted_length);
  w.PutU64(m.incarnation);
  return w.Finish();
}
Status Decode(std::string_view in, OpenLogResponse* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("handle", &m->handle) && Get(&r, &m->addr) &&
            r.GetU64("capacity", &m->capacity) && GetBool(&r, "persisted", &m->persisted) &&
            r.GetU64("length", &m->length) &&
            r.GetU64("persisted_length", &m->persisted_length) &&
            r.GetU64("incarnation", &m->incarnation);
  return Finish(r, ok, "open-log response");
}

std::string Encode(const ListLogsRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  return w.Finish();
}
Status Decode(std::string_view in, ListLogsRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range", &m->range);
  return Finish(r, ok, "list-logs request");
}

std::string Encode(const ListLogsResponse& m) {
  PayloadWriter w;
  w.PutVarint32(static_cast<uint32_t>(m.files.size()));
  for (const LogFileInfo& f : m.files) {
    w.PutU64(f.memtable);
    w.PutU32(f.segment);
    w.PutU32(f.handle);
    w.PutU64(f.capacity);
    w.PutU8(f.persisted ? 1 : 0);
    w.PutU64(f.length);
    w.PutU64(f.persisted_length);
    Put(&w, f.addr);
  }
  w.PutU64(m.incarnation);
  w.PutU8(m.in_sync ? 1 : 0);
  return w.Finish();
}
Status Decode(std::string_view in, ListLogsResponse* m) {
  PayloadReader r(in);
  uint32_t n = 0;
  bool ok = r.GetVarint32("files", &n) && n <= r.remaining() / kFileInfoBytes;
  m->files.clear();
  if (ok) m->files.resize(n);
  for (uint32_t i = 0; ok && i < n; ++i) {
    LogFileInfo& f = m->files[i];
    ok = r.GetU64("memtable", &f.memtable) && r.GetU32("segment", &f.segment) &&
         r.GetU32("handle", &f.handle) && r.GetU64("capacity", &f.capacity) &&
         GetBool(&r, "persisted", &f.persisted) && r.GetU64("length", &f.length) &&
         r.GetU64("persisted_length", &f.persisted_length) && Get(&r, &f.addr);
  }
  ok = ok && r.GetU64("incarnation", &m->incarnation) && GetBool(&r, "in_sync", &m->in_sync);
  return Finish(r, ok, "list-logs response");
}

std::string Encode(const ReadLogRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  w.PutU64(m.memtable);
  w.PutU32(m.segment);
  w.PutU64(m.offset);
  w.PutU64(m.length);
  return w.Finish();
}
Status Decode(std::string_view in, ReadLogRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range", &m->range) && r.GetU64("memtable", &m->memtable) &&
            r.GetU32("segment", &m->segment) && r.GetU64("offset", &m->offset) &&
            r.GetU64("length", &m->length);
  return Finish(r, ok, "read-log request");
}

std::string Encode(const ReadLogResponse& m) {
  PayloadWriter w;
  w.PutU64(m.persisted_length);
  w.PutBytes(m.data);
  return w.Finish();
}
Status Decode(std::string_view in, ReadLogResponse* m) {
  PayloadReader r(in);
  bool ok = r.GetU64("persisted_length", &m->persisted_length) && r.GetString("data", &m->data);
  return Finish(r, ok, "read-log response");
}

std::string Encode(const DeleteLogsRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  w.PutVarint32(static_cast<uint32_t>(m.memtables.size()));
  for (uint64_t id : m.memtables) w.PutU64(id);
  PutTrailing(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, DeleteLogsRequest* m) {
  PayloadReader r(in);
  uint32_t n = 0;
  bool ok = r.GetU32("range", &m->range) && r.GetVarint32("memtables", &n) &&
            n <= r.remaining() / kMemtableIdBytes;
  m->memtables.clear();
  if (ok) m->memtables.resize(n);
  for (uint32_t i = 0; ok && i < n; ++i) ok = r.GetU64("memtable", &m->memtables[i]);
  ok = ok && GetTrailing(&r, "owner_epoch", &m->owner_epoch);
  return Finish(r, ok, "delete-logs request");
}

std::string Encode(const DeleteLogsResponse& m) {
  PayloadWriter w;
  w.PutU32(m.files_deleted);
  return w.Finish();
}
Status Decode(std::string_view in, DeleteLogsResponse* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("files_deleted", &m->files_deleted);
  return Finish(r, ok, "delete-logs response");
}

std::string Encode(const LogPersisted& m) {
  PayloadWriter w;
  w.PutU32(m.handle);
  w.PutU64(m.persisted_length);
  w.PutStatus(m.status);
  return w.Finish();
}
Status Decode(std::string_view in, LogPersisted* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("handle", &m->handle) &&
            r.GetU64("persisted_length", &m->persisted_length) &&
            r.GetStatus("status", &m->status);
  return Finish(r, ok, "log-persisted notification");
}

std::string Encode(const MarkInSyncRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  w.PutU64(m.incarnation);
  w.PutU8(m.persist ? 1 : 0);
  PutTrailing(&w, m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, MarkInSyncRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range", &m->range) && r.GetU64("incarnation", &m->incarnation) &&
            GetBool(&r, "persist", &m->persist) && GetTrailing(&r, "owner_epoch", &m->owner_epoch);
  return Finish(r, ok, "mark-in-sync request");
}

std::string Encode(const FenceLogsRequest& m) {
  PayloadWriter w;
  w.PutU32(m.range);
  w.PutU64(m.owner_epoch);
  return w.Finish();
}
Status Decode(std::string_view in, FenceLogsRequest* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("range", &m->range) && r.GetU64("owner_epoch", &m->owner_epoch);
  return Finish(r, ok, "fence-logs request");
}

std::string Encode(const FenceLogsResponse& m) {
  PayloadWriter w;
  w.PutU32(m.files_fenced);
  w.PutU64(m.incarnation);
  return w.Finish();
}
Status Decode(std::string_view in, FenceLogsResponse* m) {
  PayloadReader r(in);
  bool ok = r.GetU32("files_fenced", &m->files_fenced) && r.GetU64("incarnation", &m->incarnation);
  return Finish(r, ok, "fence-logs response");
}

std::string Encode(const LogcStatsResponse& m) {
  PayloadWriter w;
  for (uint64_t v : {m.files, m.memory_bytes, m.memory_limit_bytes, m.received_bytes,
                     m.persisted_bytes, m.fsyncs, m.errors}) {
    w.PutVarint64(v);
  }
  return w.Finish();
}
Status Decode(std::string_view in, LogcStatsResponse* m) {
  PayloadReader r(in);
  bool ok = true;
  for (uint64_t* v : {&m->files, &m->memory_bytes, &m->memory_limit_bytes, &m->received_bytes,
                      &m->persisted_bytes, &m->fsyncs, &m->errors}) {
    ok = ok && r.GetVarint64("stat", v);
  }
  return Finish(r, ok, "logc stats response");
}

}  // namespace nova::logc
