// The LTC-to-LTC messages of a live range migration (wire type range kLtcTypes, 0x03xx;
// docs/coordinator.md "Live migration", docs/protocol.md). The destination LTC sends them
// all to the source LTC's exchange transport; the source answers.
//
//   kMigrateBegin    {u32 range, u64 owner_epoch}
//                 -> {varint count, count x u64 memtable id, u8 logged}
//       The source starts the migration out (its actives become immutable, flushes are
//       held) and lists its immutable memtables, each complete, and whether its writes are
//       logged at LogCs (if not, a failed hand-off cannot fall back to the logs). owner_epoch is the range's
//       at the source (the migration's from_epoch): another one is refused (WrongRange).
//   kMigrateFetch    {u32 range, u64 owner_epoch, u64 memtable, bytes after, u32 max_bytes}
//                 -> {u8 done, bytes last_key, bytes chunk}
//       Entries of one listed memtable after internal key `after` (empty: from the first);
//       ltc/engine/range_migration.h encodes the chunk.
//   kMigrateHandoff  {u32 range, u64 owner_epoch}
//                 -> {bytes meta}
//       The source stops the range (requests are refused from now on) and answers with the
//       MigratedState's bookkeeping and the ids of all its memtables (EncodeMigratedMeta);
//       the destination fetches the ones it lacks. Idempotent.
//   kMigrateEnd      {u32 range, u64 owner_epoch, u8 outcome}
//                 -> {}
//       The destination is done with the source's memtables: kCopied (it has them all and
//       now takes the range over in the configuration) or kAbandoned (it gives the
//       migration up: the source serves on once the configuration still names it owner).
//
// Requests for a range the source does not own at that owner epoch are answered WrongRange.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nova::ltc {

enum MigrationMsg : uint16_t {
  kMigrateBegin = 0x0301,
  kMigrateFetch = 0x0302,
  kMigrateHandoff = 0x0303,
  kMigrateEnd = 0x0304,
};

enum class MigrationOutcome : uint8_t { kCopied = 1, kAbandoned = 2 };

// The range and owner epoch every request starts with.
struct MigrationKey {
  uint32_t range = 0;
  uint64_t owner_epoch = 0;
  bool operator<(const MigrationKey& o) const {
    return range != o.range ? range < o.range : owner_epoch < o.owner_epoch;
  }
};

std::string EncodeBeginRequest(const MigrationKey& k);
Status DecodeBeginRequest(std::string_view in, MigrationKey* k);
std::string EncodeBeginResponse(const std::vector<uint64_t>& memtables, bool logged);
Status DecodeBeginResponse(std::string_view in, std::vector<uint64_t>* memtables, bool* logged);

struct FetchRequest {
  MigrationKey key;
  uint64_t memtable = 0;
  std::string after;
  uint32_t max_bytes = 0;
};
std::string EncodeFetchRequest(const FetchRequest& r);
Status DecodeFetchRequest(std::string_view in, FetchRequest* r);
struct FetchResponse {
  bool done = false;
  std::string last_key;
  std::string chunk;
};
std::string EncodeFetchResponse(const FetchResponse& r);
Status DecodeFetchResponse(std::string_view in, FetchResponse* r);

std::string EncodeHandoffRequest(const MigrationKey& k);
Status DecodeHandoffRequest(std::string_view in, MigrationKey* k);
// The response is one bytes field: EncodeMigratedMeta's output.
std::string EncodeHandoffResponse(std::string_view meta);
Status DecodeHandoffResponse(std::string_view in, std::string* meta);

std::string EncodeEndRequest(const MigrationKey& k, MigrationOutcome outcome);
Status DecodeEndRequest(std::string_view in, MigrationKey* k, MigrationOutcome* outcome);

}  // namespace nova::ltc
