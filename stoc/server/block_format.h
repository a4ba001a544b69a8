// Block format: how a persistent (disk) StoC file stores the blocks appended to it.
//
// A file is a sequence of blocks, each an 8-byte header followed by its data.
// DO NOT CHANGE: persisted.
//
//   block  := length u32 | masked_crc u32 | data[length]
//     length     = bytes of data, at most kMaxBlockBytes; little-endian (common/coding.h)
//     masked_crc = crc32c::Mask(crc32c::Value(data))
//
// The StoC appends a block, fdatasyncs, then acknowledges it (DESIGN.md section 7), so a
// crash can leave at most the block being appended incomplete. On restart ScanBlockFile
// classifies the file:
//  1. Blocks whose CRC matches, from offset 0 on, are valid.
//  2. The first bad block (checksum mismatch, or length > kMaxBlockBytes) or incomplete
//     block ends the scan. It is a torn tail, to be truncated, if it ends at or runs past
//     EOF, or if only zero bytes follow it (a filesystem that grew the file before the
//     data reached the disk: no valid block is all zeros, since its header is not). A block
//     with an oversized length has no known end; only its 8-byte header counts.
//  3. Otherwise, with real bytes after the bad block, the file is corrupt: blocks after it
//     may be acknowledged data, so nothing is truncated. The caller keeps the file and
//     refuses reads of it.
// A writer must not have more than one unsynced append in flight: a crash could then
// leave a hole before a later block, which rule 3 reports as corruption.
//
// Thread safety: pure functions; ScanBlockFile and TruncateTornTail must not race with
// writers of the same file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace nova::stoc {

// DO NOT CHANGE: persisted.
constexpr size_t kBlockHeaderBytes = 8;
// Largest block data. A length field above it is treated as damage.
constexpr uint32_t kMaxBlockBytes = 64u << 20;

// Returns crc32c::Mask(crc32c::Value(data)): the value a block header stores.
uint32_t MaskedBlockCrc(std::string_view data);

// Writes the kBlockHeaderBytes header of a block of `length` data bytes to dst.
// REQUIRES: masked_crc == MaskedBlockCrc(data); length <= kMaxBlockBytes.
void EncodeBlockHeader(uint32_t length, uint32_t masked_crc, char* dst);
// Reads a header from src (kBlockHeaderBytes readable bytes). Does not validate.
void DecodeBlockHeader(const char* src, uint32_t* length, uint32_t* masked_crc);

// Where a valid block's data lies in its file.
struct BlockExtent {
  uint64_t data_offset = 0;  // of the first data byte (after the header)
  uint32_t size = 0;         // data bytes
  uint32_t masked_crc = 0;   // as stored in the header

  bool operator==(const BlockExtent&) const = default;
};

struct ScanResult {
  std::vector<BlockExtent> blocks;  // the valid blocks, in file order
  uint64_t valid_length = 0;        // bytes covered by `blocks` (headers included)
  uint64_t torn_bytes = 0;          // bytes after valid_length to truncate; 0 if corrupt
  bool corrupt = false;             // rule 3: bytes after a bad block
  std::string corruption;           // when corrupt: what and at which offset
};

// Reads the file behind `fd` from offset 0 to its current size with pread, through a
// bounded buffer, and validates every block as described above. Does not modify the file
// or use the fd's offset. Returns the scan; a torn tail or corruption is reported in it,
// not as an error. Returns IOError if the file cannot be read.
Result<ScanResult> ScanBlockFile(int fd);

// Cuts the torn tail found by `scan` (ftruncate to scan.valid_length, then fdatasync).
// OK and a no-op if scan.torn_bytes == 0. Returns IllegalState if the scan found
// corruption (such a file is kept whole) or if the file's size is no longer
// valid_length + torn_bytes (it changed since the scan); IOError on failure.
// REQUIRES: fd open for writing.
Status TruncateTornTail(int fd, const ScanResult& scan);

// Checks whole-block data read back from `extent`. Returns OK, or Corruption naming the
// block's offset if the size or checksum differs.
Status VerifyBlock(const BlockExtent& extent, std::string_view data);

}  // namespace nova::stoc
