// Messages between StoC clients (LTC, LogC, tools) and a StoC. See docs/stoc.md.
//
// Every request is an RPC (common/rpc) of a type below; every response starts with the StoC's
// LoadStats so clients keep a current view of each StoC's queue for power-of-d placement.
// Appends to persistent files are not RPCs: the client WRITEs the block into its reserved
// slot of the StoC's file buffer with the slot id as immediate; the StoC answers with an
// kAppendAck notification once the block is durable.
//
// Encodings are PayloadWriter/PayloadReader sequences (common/wire/message.h), in the field
// order of the structs. DO NOT CHANGE field order or type numbers: on the wire.
//
// Owner fencing (docs/stoc.md "Owner fencing"): requests that change a range's files carry
// the writer's owner epoch as a trailing field, sent only when it is not 0, so a legacy
// request (and a legacy StoC's decoder, which rejects extra bytes) sees the old encoding.
// A request without it is epoch 0. The StoC refuses with Status::Fenced a writer whose
// epoch is below the newest kFenceRange of the file's range (range id parsed from the name,
// stoc/client/file_names.h; files whose names do not parse are never fenced).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "stoc/client/file_kind.h"

namespace nova::stoc {

enum MessageType : uint16_t {  // DO NOT CHANGE: on the wire (wire::kStocTypes)
  kOpen = 0x0101,
  kNewRegion = 0x0102,    // memory file: another region to append into
  kReserveSlot = 0x0103,  // disk file: a (bigger) slot of the file buffer
  kRead = 0x0104,         // disk file: the StoC WRITEs the bytes to the client's buffer
  kClose = 0x0105,
  kDelete = 0x0106,
  kList = 0x0107,
  kStats = 0x0108,
  kStatFile = 0x0109,  // a file's kind, length, (memory) regions and (disk) blocks
  // Raises a range's owner epoch (FenceRequest, answered LoadOnlyResponse once durable and
  // once the appends the StoC accepted from older epochs are acknowledged); Fenced if the
  // StoC already knows a newer epoch for the range.
  kFenceRange = 0x010A,
  // Disk file: the bytes come back in the response (ReadRequest without a destination;
  // ReadInlineResponse): one round trip where kRead takes a WRITE, its acknowledgment and
  // the response over tcp. An older StoC answers NotSupported.
  kReadInline = 0x010B,
  // Disk file: where its data file lies on the StoC's host (FileIdRequest; LocalFileResponse),
  // so a client on the same host reads it with pread instead of a request per read (docs/
  // stoc.md "Local reads"). NotSupported from an older StoC, or one started with
  // --stoc_local_reads=false.
  kLocalFile = 0x010C,
  kAppendAck = 0x0110,  // StoC -> client notification: a persistent append is durable
  // An offloaded compaction job (common/lsm/compaction_job.h encodes it; the response is
  // EncodeWithLoad(load, result)). Served by the compaction pool when the daemon has a
  // compaction service; NotSupported otherwise.
  kCompact = 0x0120,
};

// A StoC's queue, piggybacked on every response.
struct LoadStats {
  uint32_t queue_depth = 0;    // storage requests (appends, reads) queued or running
  uint64_t pending_bytes = 0;  // bytes they still have to write or read
};

// One contiguous registered region of an in-memory file.
struct RegionInfo {
  uint64_t logical_offset = 0;  // file offset of the region's first byte
  uint64_t addr = 0;            // remote address (transport::RemoteAddr)
  uint32_t rkey = 0;
  uint64_t capacity = 0;
};

// A slot of the StoC's shared file buffer, reserved for one open persistent file.
struct SlotInfo {
  uint32_t slot_id = 0;  // the immediate of appends into it
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t bytes = 0;
};

struct OpenRequest {
  std::string name;
  FileKind kind = FileKind::kDisk;
  bool create = true;        // create if missing; else NotFound
  bool for_append = true;    // disk: reserve a slot; memory: nothing extra
  uint64_t slot_bytes = 0;   // disk: slot size wanted (largest block expected)
  // Trailing, only when not 0: the writer's owner epoch of the file's range (0 = legacy).
  // Stamped on the append slot this open reserves.
  uint64_t owner_epoch = 0;
};

// Encoding (DO NOT CHANGE: on the wire): file_id u64 | kind u8 | name bytes | length u64
// | regions varint32 | RegionInfo * regions | blocks varint32 | (offset u64 | size u64) * blocks.
// kList sends neither regions nor blocks (counts 0), kOpen only regions, kStatFile both.
struct FileState {
  uint64_t file_id = 0;
  FileKind kind = FileKind::kDisk;
  std::string name;
  uint64_t length = 0;               // disk: durable bytes of data; memory: last Close length
  std::vector<RegionInfo> regions;   // memory files
  // Disk files, kStatFile only: each durable block's (data offset, size) in file order,
  // what StocClient::Read needs to read the file back without knowing its appends.
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
};

struct OpenResponse {
  LoadStats load;
  FileState file;
  SlotInfo slot;  // disk files opened for append (slot_id 0 otherwise)
};

struct NewRegionRequest {
  uint64_t file_id = 0;
  uint64_t min_bytes = 0;
};
struct NewRegionResponse {
  LoadStats load;
  RegionInfo region;
};

struct ReserveSlotRequest {
  uint64_t file_id = 0;
  uint64_t bytes = 0;
  uint32_t release_slot_id = 0;  // the slot it replaces (0 = none)
  uint64_t owner_epoch = 0;      // trailing, only when not 0 (see OpenRequest)
};
struct ReserveSlotResponse {
  LoadStats load;
  SlotInfo slot;
};

struct ReadRequest {
  uint64_t file_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t dst_addr = 0;  // client's registered buffer
  uint32_t dst_rkey = 0;
};

struct CloseRequest {
  uint64_t file_id = 0;
  uint32_t slot_id = 0;      // released (0 = none)
  uint64_t length = 0;       // memory files: the length appended (recorded for readers)
};

struct NameRequest {  // kDelete
  std::string name;
  uint64_t owner_epoch = 0;  // trailing, only when not 0 (see OpenRequest)
};

struct FenceRequest {  // kFenceRange
  uint32_t range_id = 0;
  uint64_t owner_epoch = 0;  // > 0
};
struct FileIdRequest {  // kStatFile, kLocalFile
  uint64_t file_id = 0;
};

struct LoadOnlyResponse {  // kRead, kClose, kDelete
  LoadStats load;
};

// Largest kReadInline a client sends: a few data blocks. The bytes of an inline read are
// copied several times on their way (message encoding, frames, decoding), which costs more
// than the round trip it saves once reads get large: compaction's 256 KiB read-ahead
// windows, for one, are much cheaper as kRead, which the tcp lanes move between registered
// memory and the socket without copies. Far below any message limit, too.
constexpr uint64_t kMaxInlineReadBytes = 32 << 10;

struct ReadInlineResponse {  // kReadInline
  LoadStats load;
  std::string data;  // the block's bytes
};

struct LocalFileResponse {  // kLocalFile
  LoadStats load;
  // The StoC's HostIdentity() (local_files.h): a client whose own differs is on another
  // host (or in another network namespace) and must not use `path`.
  std::string host_id;
  std::string path;  // absolute path of the data file
  // The data file's identity (st_dev, st_ino): a client that opens `path` and finds another
  // file there (another mount namespace, a recreated file) must not read it.
  uint64_t device = 0;
  uint64_t inode = 0;
};

struct StatFileResponse {
  LoadStats load;
  FileState file;
};

struct ListResponse {
  LoadStats load;
  std::vector<FileState> files;  // regions omitted
};

struct StatsResponse {
  LoadStats load;
  uint64_t files = 0;
  uint64_t appends = 0, append_bytes = 0;
  uint64_t reads = 0, read_bytes = 0;
  uint64_t fsyncs = 0;
  uint64_t memory_bytes_used = 0, memory_bytes_limit = 0;
  uint64_t file_buffer_bytes_used = 0, file_buffer_bytes = 0;
};

struct AppendAck {
  uint32_t slot_id = 0;
  Status status;
  uint64_t file_id = 0;
  uint64_t offset = 0;  // of the block's data in the file
  uint64_t size = 0;
  LoadStats load;
};

// Encode/Decode pairs. Decoders return Corruption naming the field on malformed input.
std::string Encode(const OpenRequest& m);
Status Decode(std::string_view in, OpenRequest* m);
std::string Encode(const OpenResponse& m);
Status Decode(std::string_view in, OpenResponse* m);
std::string Encode(const NewRegionRequest& m);
Status Decode(std::string_view in, NewRegionRequest* m);
std::string Encode(const NewRegionResponse& m);
Status Decode(std::string_view in, NewRegionResponse* m);
std::string Encode(const ReserveSlotRequest& m);
Status Decode(std::string_view in, ReserveSlotRequest* m);
std::string Encode(const ReserveSlotResponse& m);
Status Decode(std::string_view in, ReserveSlotResponse* m);
std::string Encode(const ReadRequest& m);
Status Decode(std::string_view in, ReadRequest* m);
std::string Encode(const CloseRequest& m);
Status Decode(std::string_view in, CloseRequest* m);
std::string Encode(const NameRequest& m);
Status Decode(std::string_view in, NameRequest* m);
std::string Encode(const FenceRequest& m);
Status Decode(std::string_view in, FenceRequest* m);
std::string Encode(const FileIdRequest& m);
Status Decode(std::string_view in, FileIdRequest* m);
std::string Encode(const LoadOnlyResponse& m);
Status Decode(std::string_view in, LoadOnlyResponse* m);
std::string Encode(const ReadInlineResponse& m);
Status Decode(std::string_view in, ReadInlineResponse* m);
std::string Encode(const LocalFileResponse& m);
Status Decode(std::string_view in, LocalFileResponse* m);
std::string Encode(const StatFileResponse& m);
Status Decode(std::string_view in, StatFileResponse* m);
std::string Encode(const ListResponse& m);
Status Decode(std::string_view in, ListResponse* m);
std::string Encode(const StatsResponse& m);
Status Decode(std::string_view in, StatsResponse* m);
std::string Encode(const AppendAck& m);
Status Decode(std::string_view in, AppendAck* m);

// Responses whose body another library encodes (kCompact): the LoadStats every response
// starts with, then the body as is. SplitLoad returns Corruption if `in` is too short;
// *body aliases `in`.
std::string EncodeWithLoad(const LoadStats& load, std::string_view body);
Status SplitLoad(std::string_view in, LoadStats* load, std::string_view* body);

}  // namespace nova::stoc
