#include "ltc/server/migration_protocol.h"

#include "common/wire/message.h"

namespace nova::ltc {

namespace {

void PutKey(wire::PayloadWriter* w, const MigrationKey& k) {
  w->PutU32(k.range);
  w->PutU64(k.owner_epoch);
}

bool GetKey(wire::PayloadReader* r, MigrationKey* k) {
  return r->GetU32("range", &k->range) && r->GetU64("owner_epoch", &k->owner_epoch);
}

}  // namespace

std::string EncodeBeginRequest(const MigrationKey& k) {
  wire::PayloadWriter w;
  PutKey(&w, k);
  return w.Finish();
}

Status DecodeBeginRequest(std::string_view in, MigrationKey* k) {
  wire::PayloadReader r(in);
  GetKey(&r, k);
  return r.Finish();
}

std::string EncodeBeginResponse(const std::vector<uint64_t>& memtables, bool logged) {
  wire::PayloadWriter w;
  w.PutVarint32(static_cast<uint32_t>(memtables.size()));
  for (uint64_t id : memtables) w.PutU64(id);
  w.PutU8(logged ? 1 : 0);
  return w.Finish();
}

Status DecodeBeginResponse(std::string_view in, std::vector<uint64_t>* memtables, bool* logged) {
  wire::PayloadReader r(in);
  uint32_t n = 0;
  uint8_t l = 0;
  if (r.GetVarint32("count", &n)) {
    // Each id takes 8 bytes: a count the payload cannot hold is refused before reserving.
    if (n > r.remaining() / 8) return Status::Corruption("migration begin: count too large");
    memtables->resize(n);
    for (uint32_t i = 0; i < n; ++i) r.GetU64("memtable", &(*memtables)[i]);
    r.GetU8("logged", &l);
  }
  *logged = l != 0;
  return r.Finish();
}

std::string EncodeFetchRequest(const FetchRequest& q) {
  wire::PayloadWriter w;
  PutKey(&w, q.key);
  w.PutU64(q.memtable);
  w.PutBytes(q.after);
  w.PutU32(q.max_bytes);
  return w.Finish();
}

Status DecodeFetchRequest(std::string_view in, FetchRequest* q) {
  wire::PayloadReader r(in);
  GetKey(&r, &q->key) && r.GetU64("memtable", &q->memtable) && r.GetString("after", &q->after) &&
      r.GetU32("max_bytes", &q->max_bytes);
  return r.Finish();
}

std::string EncodeFetchResponse(const FetchResponse& p) {
  wire::PayloadWriter w;
  w.PutU8(p.done ? 1 : 0);
  w.PutBytes(p.last_key);
  w.PutBytes(p.chunk);
  return w.Finish();
}

Status DecodeFetchResponse(std::string_view in, FetchResponse* p) {
  wire::PayloadReader r(in);
  uint8_t done = 0;
  r.GetU8("done", &done) && r.GetString("last_key", &p->last_key) &&
      r.GetString("chunk", &p->chunk);
  p->done = done != 0;
  return r.Finish();
}

std::string EncodeHandoffRequest(const MigrationKey& k) { return EncodeBeginRequest(k); }

Status DecodeHandoffRequest(std::string_view in, MigrationKey* k) {
  return DecodeBeginRequest(in, k);
}

std::string EncodeHandoffResponse(std::string_view meta) {
  wire::PayloadWriter w;
  w.PutBytes(meta);
  return w.Finish();
}

Status DecodeHandoffResponse(std::string_view in, std::string* meta) {
  wire::PayloadReader r(in);
  r.GetString("meta", meta);
  return r.Finish();
}

std::string EncodeEndRequest(const MigrationKey& k, MigrationOutcome outcome) {
  wire::PayloadWriter w;
  PutKey(&w, k);
  w.PutU8(static_cast<uint8_t>(outcome));
  return w.Finish();
}

Status DecodeEndRequest(std::string_view in, MigrationKey* k, MigrationOutcome* outcome) {
  wire::PayloadReader r(in);
  uint8_t o = 0;
  GetKey(&r, k) && r.GetU8("outcome", &o);
  NOVA_RETURN_NOT_OK(r.Finish());
  if (o != static_cast<uint8_t>(MigrationOutcome::kCopied) &&
      o != static_cast<uint8_t>(MigrationOutcome::kAbandoned)) {
    return Status::Corruption("migration end: unknown outcome " + std::to_string(o));
  }
  *outcome = static_cast<MigrationOutcome>(o);
  return Status::OK();
}

}  // namespace nova::ltc
