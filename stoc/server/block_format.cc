#include "stoc/server/block_format.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::stoc {

namespace {

// Memory a scan uses whatever the file or block size: blocks larger than this are
// checksummed piecewise.
constexpr size_t kScanBufferBytes = 1 << 20;

// Sequential reads of a file of known size through one fixed buffer (a window on the
// file), so that a file of many small blocks costs few syscalls and a 64 MiB block
// costs no more memory than a small one.
class WindowReader {
 public:
  WindowReader(int fd, uint64_t size)
      : fd_(fd), size_(size), buf_(std::make_unique<char[]>(kScanBufferBytes)) {}

  // Sets *out to the n bytes at `offset`; valid until the next call.
  // REQUIRES: n <= kScanBufferBytes, offset + n <= size.
  Status View(uint64_t offset, size_t n, std::string_view* out) {
    if (offset < start_ || offset + n > start_ + len_) NOVA_RETURN_NOT_OK(Fill(offset));
    *out = std::string_view(buf_.get() + (offset - start_), n);
    return Status::OK();
  }

  // Sets *zeros to whether every byte from `offset` to the end of the file is zero.
  Status OnlyZerosFrom(uint64_t offset, bool* zeros) {
    *zeros = true;
    while (offset < size_) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kScanBufferBytes, size_ - offset));
      std::string_view chunk;
      NOVA_RETURN_NOT_OK(View(offset, n, &chunk));
      if (chunk.find_first_not_of('\0') != std::string_view::npos) {
        *zeros = false;
        return Status::OK();
      }
      offset += n;
    }
    return Status::OK();
  }

  // Sets *masked_crc to the masked crc32c of the n bytes at `offset`.
  // REQUIRES: offset + n <= size.
  Status MaskedCrc(uint64_t offset, uint64_t n, uint32_t* masked_crc) {
    uint32_t crc = 0;
    while (n > 0) {
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(kScanBufferBytes, n));
      std::string_view chunk;
      NOVA_RETURN_NOT_OK(View(offset, piece, &chunk));
      crc = crc32c::Extend(crc, chunk.data(), chunk.size());
      offset += piece;
      n -= piece;
    }
    *masked_crc = crc32c::Mask(crc);
    return Status::OK();
  }

 private:
  // Loads the window starting at `offset`, as full as the file allows.
  Status Fill(uint64_t offset) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kScanBufferBytes, size_ - offset));
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd_, buf_.get() + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("read block file at offset " + std::to_string(offset + got),
                                 errno);
      }
      if (n == 0) return Status::IOError("block file shrank during the scan");
      got += static_cast<size_t>(n);
    }
    start_ = offset;
    len_ = got;
    return Status::OK();
  }

  const int fd_;
  const uint64_t size_;
  std::unique_ptr<char[]> buf_;
  uint64_t start_ = 0;  // file offset of buf_[0]
  size_t len_ = 0;      // valid bytes in buf_
};

Status FileSize(int fd, uint64_t* size) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat block file", errno);
  *size = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

}  // namespace

uint32_t MaskedBlockCrc(std::string_view data) { return crc32c::Mask(crc32c::Value(data)); }

void EncodeBlockHeader(uint32_t length, uint32_t masked_crc, char* dst) {
  EncodeFixed32(dst, length);
  EncodeFixed32(dst + 4, masked_crc);
}

void DecodeBlockHeader(const char* src, uint32_t* length, uint32_t* masked_crc) {
  *length = DecodeFixed32(src);
  *masked_crc = DecodeFixed32(src + 4);
}

Result<ScanResult> ScanBlockFile(int fd) {
  uint64_t size = 0;
  NOVA_RETURN_NOT_OK(FileSize(fd, &size));
  WindowReader reader(fd, size);
  ScanResult result;
  uint64_t off = 0;
  while (off < size) {
    if (size - off < kBlockHeaderBytes) break;  // torn: incomplete header
    std::string_view header;
    NOVA_RETURN_NOT_OK(reader.View(off, kBlockHeaderBytes, &header));
    uint32_t length = 0;
    uint32_t stored_crc = 0;
    DecodeBlockHeader(header.data(), &length, &stored_crc);
    const uint64_t data_offset = off + kBlockHeaderBytes;

    std::string problem;
    uint64_t bad_end = 0;  // where the bad block is taken to end
    if (length > kMaxBlockBytes) {
      problem = "length " + std::to_string(length) + " exceeds " + std::to_string(kMaxBlockBytes);
      bad_end = data_offset;  // its real end is unknown
    } else {
      const uint64_t end = data_offset + length;
      if (end > size) break;  // torn: incomplete block
      uint32_t actual_crc = 0;
      NOVA_RETURN_NOT_OK(reader.MaskedCrc(data_offset, length, &actual_crc));
      if (actual_crc == stored_crc) {
        result.blocks.push_back(BlockExtent{data_offset, length, stored_crc});
        off = end;
        continue;
      }
      problem = "checksum mismatch (length " + std::to_string(length) + ")";
      bad_end = end;
    }

    // A bad block: torn if nothing real follows it (rule 2), else corrupt (rule 3).
    bool zeros = false;
    NOVA_RETURN_NOT_OK(reader.OnlyZerosFrom(bad_end, &zeros));
    if (zeros) break;
    result.corrupt = true;
    result.corruption = "block at offset " + std::to_string(off) + ": " + problem +
                        ", followed by " + std::to_string(size - bad_end) + " more bytes";
    result.valid_length = off;
    return result;
  }
  result.valid_length = off;
  result.torn_bytes = size - off;
  return result;
}

Status TruncateTornTail(int fd, const ScanResult& scan) {
  if (scan.corrupt) {
    return Status::IllegalState("refusing to truncate a corrupt block file: " + scan.corruption);
  }
  if (scan.torn_bytes == 0) return Status::OK();
  uint64_t size = 0;
  NOVA_RETURN_NOT_OK(FileSize(fd, &size));
  if (size != scan.valid_length + scan.torn_bytes) {
    return Status::IllegalState("block file is " + std::to_string(size) +
                                " bytes, not the scanned " +
                                std::to_string(scan.valid_length + scan.torn_bytes));
  }
  if (::ftruncate(fd, static_cast<off_t>(scan.valid_length)) != 0) {
    return Status::FromErrno("truncate block file to " + std::to_string(scan.valid_length), errno);
  }
  if (::fdatasync(fd) != 0) return Status::FromErrno("fdatasync block file", errno);
  return Status::OK();
}

Status VerifyBlock(const BlockExtent& extent, std::string_view data) {
  const uint64_t header_offset =
      extent.data_offset >= kBlockHeaderBytes ? extent.data_offset - kBlockHeaderBytes : 0;
  if (data.size() != extent.size) {
    return Status::Corruption("block at offset " + std::to_string(header_offset) + ": read " +
                              std::to_string(data.size()) + " bytes, expected " +
                              std::to_string(extent.size));
  }
  if (MaskedBlockCrc(data) != extent.masked_crc) {
    return Status::Corruption("block at offset " + std::to_string(header_offset) +
                              ": checksum mismatch");
  }
  return Status::OK();
}

}  // namespace nova::stoc
