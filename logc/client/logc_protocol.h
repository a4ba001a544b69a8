// Messages between log clients (LTCs) and a LogC. See docs/logc.md.
//
// Control requests are RPCs (common/rpc) of the types below. Appends are not RPCs: the
// client WRITEs into the log file's registered region one-sidedly; for persisted files the
// WRITE carries the file's handle as immediate and the LogC answers with a kLogPersisted
// notification once the bytes are fdatasync'd.
//
// Encodings are PayloadWriter/PayloadReader sequences (common/wire/message.h) in the field
// order of the structs. DO NOT CHANGE field order or type numbers: on the wire. Decoders
// return Corruption naming the field on malformed input and never read past the end.
// Fields added later are trailing and optional: a decoder reads one only when bytes remain
// (an older sender omits it: it reads as 0), and an encoder omits it while it is 0, so a
// request of an unfenced range stays readable by an older LogC.
//
// Owner fencing (docs/logc.md "Fencing"): an owner epoch is the coordinator's count of a
// range's owners; 0 is legacy (unfenced). A LogC keeps the newest epoch it has seen per range
// (kFenceLogs, or an open carrying a newer one) and refuses, with Status::Fenced, opens,
// deletes and in-sync marks carrying an older one, and appends to files opened under one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/transport/transport.h"

namespace nova::logc {

enum MessageType : uint16_t {  // DO NOT CHANGE: on the wire (wire::kLogcTypes)
  kOpenLog = 0x0201,
  kListLogs = 0x0202,
  kReadLog = 0x0203,      // served from the LogC's disk file (persisted bytes only)
  kDeleteLogs = 0x0204,
  kLogcStats = 0x0205,
  kMarkInSync = 0x0206,    // the range's logs have R replicas: this LogC counts for recovery
  kFenceLogs = 0x0207,     // a new owner fences off the older owners' files of a range
  kLogPersisted = 0x0210,  // LogC -> client notification: a file is durable up to a length
};

// Opens (or creates) log file segment (range, memtable, segment). Idempotent: an existing
// file is returned as it is (its capacity may differ from the one asked).
struct OpenLogRequest {
  uint32_t range = 0;
  uint64_t memtable = 0;
  uint32_t segment = 0;
  uint64_t capacity = 0;  // bytes of the region (and the most the file can hold)
  bool persist = false;   // appends arrive with the handle as immediate and are fdatasync'd
  // Trailing: the opener's owner epoch of the range (0: legacy). Refused (Fenced) when older
  // than the LogC's newest for the range; a newer one fences the range first (as
  // kFenceLogs). A file fenced earlier is handed to an opener of the newest epoch writable
  // again, under a fresh rkey.
  uint64_t owner_epoch = 0;
};
struct OpenLogResponse {
  uint32_t handle = 0;             // the immediate of appends to a persisted file
  transport::RemoteAddr addr;      // the region's first byte
  uint64_t capacity = 0;
  bool persisted = false;
  uint64_t length = 0;             // persisted files: bytes received so far (0 otherwise)
  uint64_t persisted_length = 0;   // persisted files: bytes fdatasync'd so far
  uint64_t incarnation = 0;        // the LogC process's random id, new at every start
};

struct ListLogsRequest {
  uint32_t range = 0;
};
// One file segment of a range.
struct LogFileInfo {
  uint64_t memtable = 0;
  uint32_t segment = 0;
  uint32_t handle = 0;
  uint64_t capacity = 0;
  bool persisted = false;
  uint64_t length = 0;            // as in OpenLogResponse
  uint64_t persisted_length = 0;
  transport::RemoteAddr addr;
};
struct ListLogsResponse {
  std::vector<LogFileInfo> files;  // ordered by (memtable, segment)
  uint64_t incarnation = 0;  // as in OpenLogResponse
  // The range was marked in sync (kMarkInSync) in this incarnation, or in persisted mode in
  // an earlier one whose files this LogC still holds: see docs/durability.md "Recovery".
  bool in_sync = false;
};

// Marks `range` in sync at this LogC: its owner has every log of the range on enough
// replicas, so a recovery that lists this LogC may trust that a log it does not list has
// no acknowledged bytes only here. Refused (IllegalState) when `incarnation` (non-zero) is
// not the LogC's: it restarted since the client last saw it, and may have lost replicas.
// With `persist`, the mark is written to the LogC's disk (fsync'd) before the answer, and
// survives restarts as the range's persisted logs do.
struct MarkInSyncRequest {
  uint32_t range = 0;
  uint64_t incarnation = 0;
  bool persist = false;
  uint64_t owner_epoch = 0;  // trailing; as in OpenLogRequest (refused when stale)
};

// Fences `range` at this LogC for the owner of `owner_epoch` (> 0). Answered only once, for
// every file of the range opened under an older epoch: its region is deregistered (WRITEs
// in flight finish first, later ones fail), it is drained (persisted == received: no
// acknowledgment can follow for bytes a reader of the listing would not see) and it is
// registered again read-only under an rkey never used by a fenced region of this process.
// Its immediates are refused from then on (kLogPersisted with Fenced). With --logc_persist
// the fence is written to <dir>/logs/r<range>.fence and synced before the answer, and
// survives restarts. Fenced when the LogC holds a newer epoch for the range; the same epoch
// again is idempotent.
struct FenceLogsRequest {
  uint32_t range = 0;
  uint64_t owner_epoch = 0;
};
struct FenceLogsResponse {
  uint32_t files_fenced = 0;  // files this request fenced (0 when already fenced)
  uint64_t incarnation = 0;   // as in OpenLogResponse
};

// Reads persisted bytes [offset, offset + length) of a file from the LogC's disk. The reply
// holds at most what fits a message: the caller continues at offset + data.size().
struct ReadLogRequest {
  uint32_t range = 0;
  uint64_t memtable = 0;
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
struct ReadLogResponse {
  uint64_t persisted_length = 0;  // of the file, when read
  std::string data;               // empty at or past persisted_length
};

// Deletes every segment of these memtables' logs. Missing logs are not an error.
struct DeleteLogsRequest {
  uint32_t range = 0;
  std::vector<uint64_t> memtables;
  uint64_t owner_epoch = 0;  // trailing; as in OpenLogRequest (refused when stale)
};
struct DeleteLogsResponse {
  uint32_t files_deleted = 0;
};

// LogC -> client: everything up to persisted_length of the file `handle` is fdatasync'd, or
// (status not OK) the file can no longer be made durable.
struct LogPersisted {
  uint32_t handle = 0;
  uint64_t persisted_length = 0;
  Status status;
};

// kLogcStats has an empty request.
struct LogcStatsResponse {
  uint64_t files = 0;
  uint64_t memory_bytes = 0;        // capacity of every region held
  uint64_t memory_limit_bytes = 0;
  uint64_t received_bytes = 0;      // bytes announced by immediates (persisted files)
  uint64_t persisted_bytes = 0;     // bytes fdatasync'd
  uint64_t fsyncs = 0;
  uint64_t errors = 0;
};

std::string Encode(const OpenLogRequest& m);
Status Decode(std::string_view in, OpenLogRequest* m);
std::string Encode(const OpenLogResponse& m);
Status Decode(std::string_view in, OpenLogResponse* m);
std::string Encode(const ListLogsRequest& m);
Status Decode(std::string_view in, ListLogsRequest* m);
std::string Encode(const ListLogsResponse& m);
Status Decode(std::string_view in, ListLogsResponse* m);
std::string Encode(const ReadLogRequest& m);
Status Decode(std::string_view in, ReadLogRequest* m);
std::string Encode(const ReadLogResponse& m);
Status Decode(std::string_view in, ReadLogResponse* m);
std::string Encode(const DeleteLogsRequest& m);
Status Decode(std::string_view in, DeleteLogsRequest* m);
std::string Encode(const DeleteLogsResponse& m);
Status Decode(std::string_view in, DeleteLogsResponse* m);
std::string Encode(const LogPersisted& m);
Status Decode(std::string_view in, LogPersisted* m);
std::string Encode(const MarkInSyncRequest& m);
Status Decode(std::string_view in, MarkInSyncRequest* m);
std::string Encode(const FenceLogsRequest& m);
Status Decode(std::string_view in, FenceLogsRequest* m);
std::string Encode(const FenceLogsResponse& m);
Status Decode(std::string_view in, FenceLogsResponse* m);
std::string Encode(const LogcStatsResponse& m);
Status Decode(std::string_view in, LogcStatsResponse* m);

}  // namespace nova::logc
