#include "stoc/server/block_format.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/coding.h"
#include "common/crc32c.h"
#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

namespace fs = std::filesystem;

std::string Block(std::string_view data) {
  char header[kBlockHeaderBytes];
  EncodeBlockHeader(static_cast<uint32_t>(data.size()), MaskedBlockCrc(data), header);
  return std::string(header, sizeof(header)) + std::string(data);
}

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

class BlockFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::path(::testing::TempDir()) /
             ("block_format_test." + std::string(info->name()) + "." + std::to_string(::getpid())))
                .string();
  }
  void TearDown() override {
    CloseFile();
    fs::remove(path_);
  }

  // Replaces the file with `contents` and opens it read-write as fd_.
  void WriteFile(const std::string& contents) {
    CloseFile();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd_, 0) << path_;
    ASSERT_EQ(static_cast<ssize_t>(contents.size()),
              ::pwrite(fd_, contents.data(), contents.size(), 0));
  }
  void CloseFile() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  ScanResult MustScan() {
    auto r = ScanBlockFile(fd_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ScanResult{};
  }

  std::string ReadAt(uint64_t offset, size_t n) {
    std::string s(n, '\0');
    EXPECT_EQ(static_cast<ssize_t>(n), ::pread(fd_, s.data(), n, static_cast<off_t>(offset)));
    return s;
  }

  uint64_t FileSize() { return fs::file_size(path_); }

  std::string path_;
  int fd_ = -1;
};

TEST_F(BlockFormatTest, HeaderEncoding) {
  char header[kBlockHeaderBytes];
  EncodeBlockHeader(0x01020304u, 0xa1b2c3d4u, header);
  EXPECT_EQ(std::string("\x04\x03\x02\x01\xd4\xc3\xb2\xa1", 8), std::string(header, 8));
  uint32_t length = 0;
  uint32_t crc = 0;
  DecodeBlockHeader(header, &length, &crc);
  EXPECT_EQ(0x01020304u, length);
  EXPECT_EQ(0xa1b2c3d4u, crc);
  EXPECT_EQ(crc32c::Mask(crc32c::Value("abc")), MaskedBlockCrc("abc"));
  // No valid header is all zeros (the zero-tail rule relies on it).
  EXPECT_NE(0u, MaskedBlockCrc(""));
}

TEST_F(BlockFormatTest, EmptyFile) {
  WriteFile("");
  ScanResult scan = MustScan();
  EXPECT_TRUE(scan.blocks.empty());
  EXPECT_EQ(0u, scan.valid_length);
  EXPECT_EQ(0u, scan.torn_bytes);
  EXPECT_FALSE(scan.corrupt);
  EXPECT_TRUE(TruncateTornTail(fd_, scan).ok());
}

TEST_F(BlockFormatTest, RoundTrip) {
  std::mt19937_64 rng(nova::test::TestSeed("BlockFormatTest.RoundTrip"));
  // Small blocks (many per scan window), empty ones, and some larger than the window.
  std::vector<size_t> sizes = {0, 1, 100, 4096, (1u << 20) - 3, (3u << 20) + 7, 0, 17};
  for (int i = 0; i < 3000; ++i) sizes.push_back(rng() % 700);
  std::string contents;
  std::vector<BlockExtent> expected;
  std::vector<std::string> datas;
  for (size_t size : sizes) {
    std::string data(size, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    expected.push_back({contents.size() + kBlockHeaderBytes, static_cast<uint32_t>(size),
                        MaskedBlockCrc(data)});
    contents += Block(data);
    datas.push_back(std::move(data));
  }
  WriteFile(contents);
  ScanResult scan = MustScan();
  EXPECT_FALSE(scan.corrupt) << scan.corruption;
  EXPECT_EQ(contents.size(), scan.valid_length);
  EXPECT_EQ(0u, scan.torn_bytes);
  ASSERT_EQ(expected, scan.blocks);
  for (size_t i = 0; i < scan.blocks.size(); ++i) {
    const BlockExtent& e = scan.blocks[i];
    const std::string data = ReadAt(e.data_offset, e.size);
    EXPECT_EQ(datas[i], data);
    EXPECT_TRUE(VerifyBlock(e, data).ok()) << i;
  }
}

TEST_F(BlockFormatTest, LargestBlockIsAccepted) {
  // A sparse file: header + kMaxBlockBytes zero bytes.
  const uint32_t crc = MaskedBlockCrc(std::string(kMaxBlockBytes, '\0'));
  char header[kBlockHeaderBytes];
  EncodeBlockHeader(kMaxBlockBytes, crc, header);
  WriteFile(std::string(header, sizeof(header)));
  ASSERT_EQ(0, ::ftruncate(fd_, kBlockHeaderBytes + kMaxBlockBytes));
  ScanResult scan = MustScan();
  EXPECT_FALSE(scan.corrupt) << scan.corruption;
  ASSERT_EQ(1u, scan.blocks.size());
  EXPECT_EQ(kMaxBlockBytes, scan.blocks[0].size);
  EXPECT_EQ(0u, scan.torn_bytes);
}

TEST_F(BlockFormatTest, TornTailAtEveryCutOfTheLastBlock) {
  const std::string prefix = Block(Pattern(10, 'a')) + Block("") + Block(Pattern(300, 'b'));
  const std::string full = prefix + Block(Pattern(50, 'c'));
  for (size_t cut = prefix.size(); cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    WriteFile(full.substr(0, cut));
    ScanResult scan = MustScan();
    EXPECT_FALSE(scan.corrupt) << scan.corruption;
    EXPECT_EQ(3u, scan.blocks.size());
    EXPECT_EQ(prefix.size(), scan.valid_length);
    EXPECT_EQ(cut - prefix.size(), scan.torn_bytes);
    ASSERT_TRUE(TruncateTornTail(fd_, scan).ok());
    EXPECT_EQ(prefix.size(), FileSize());
    ScanResult again = MustScan();
    EXPECT_EQ(0u, again.torn_bytes);
    EXPECT_EQ(scan.blocks, again.blocks);
  }
}

TEST_F(BlockFormatTest, TornTailOfABlockLargerThanTheScanWindow) {
  const std::string prefix = Block("first");
  const std::string full = prefix + Block(Pattern((5u << 20) / 2, 'x'));
  for (size_t cut : {prefix.size() + 1, prefix.size() + kBlockHeaderBytes,
                     prefix.size() + (1u << 20) + 9, full.size() - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    WriteFile(full.substr(0, cut));
    ScanResult scan = MustScan();
    EXPECT_FALSE(scan.corrupt);
    EXPECT_EQ(1u, scan.blocks.size());
    EXPECT_EQ(prefix.size(), scan.valid_length);
    EXPECT_EQ(cut - prefix.size(), scan.torn_bytes);
  }
}

TEST_F(BlockFormatTest, ChecksumBadLastBlockIsTornTail) {
  const std::string prefix = Block("one") + Block("two");
  std::string contents = prefix + Block(Pattern(64, 'q'));
  contents.back() ^= 0x10;
  WriteFile(contents);
  ScanResult scan = MustScan();
  EXPECT_FALSE(scan.corrupt);
  EXPECT_EQ(2u, scan.blocks.size());
  EXPECT_EQ(prefix.size(), scan.valid_length);
  EXPECT_EQ(contents.size() - prefix.size(), scan.torn_bytes);
}

TEST_F(BlockFormatTest, OversizedLengthAtTheEndIsTornTail) {
  const std::string prefix = Block("one");
  char header[kBlockHeaderBytes];
  EncodeBlockHeader(kMaxBlockBytes + 1, 0, header);
  WriteFile(prefix + std::string(header, sizeof(header)));
  ScanResult scan = MustScan();
  EXPECT_FALSE(scan.corrupt);
  EXPECT_EQ(prefix.size(), scan.valid_length);
  EXPECT_EQ(kBlockHeaderBytes, scan.torn_bytes);
}

TEST_F(BlockFormatTest, ZeroFilledTailIsTornTail) {
  const std::string prefix = Block("one") + Block(Pattern(200, 'z'));
  {
    // Zeros where the next block's header would be.
    WriteFile(prefix + std::string(10000, '\0'));
    ScanResult scan = MustScan();
    EXPECT_FALSE(scan.corrupt) << scan.corruption;
    EXPECT_EQ(prefix.size(), scan.valid_length);
    EXPECT_EQ(10000u, scan.torn_bytes);
  }
  {
    // The last block's header arrived, its data only partly, the rest is zeros.
    std::string contents = prefix + Block(Pattern(500, 'y'));
    contents.replace(prefix.size() + kBlockHeaderBytes + 100, std::string::npos, 5000, '\0');
    WriteFile(contents);
    ScanResult scan = MustScan();
    EXPECT_FALSE(scan.corrupt) << scan.corruption;
    EXPECT_EQ(prefix.size(), scan.valid_length);
    EXPECT_EQ(contents.size() - prefix.size(), scan.torn_bytes);
  }
}

TEST_F(BlockFormatTest, CorruptionInTheMiddleIsDetected) {
  std::vector<std::string> blocks;
  std::vector<uint64_t> offsets;
  std::string good;
  for (int i = 0; i < 5; ++i) {
    offsets.push_back(good.size());
    blocks.push_back(Block(Pattern(100 + i, static_cast<char>('a' + i))));
    good += blocks.back();
  }
  struct Damage {
    const char* what;
    size_t offset;  // byte to change
    char value;     // XORed in
  };
  const std::vector<Damage> damages = {
      {"data byte", offsets[2] + kBlockHeaderBytes + 40, 0x01},
      {"stored checksum", offsets[2] + 5, 0x20},
      {"length low bits", offsets[2], 0x01},
      {"length high bits", offsets[2] + 3, static_cast<char>(0xff)},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    std::string bad = good;
    bad[d.offset] ^= d.value;
    WriteFile(bad);
    ScanResult scan = MustScan();
    EXPECT_TRUE(scan.corrupt);
    EXPECT_NE(std::string::npos, scan.corruption.find("offset " + std::to_string(offsets[2])))
        << scan.corruption;
    EXPECT_EQ(2u, scan.blocks.size());
    EXPECT_EQ(offsets[2], scan.valid_length);
    EXPECT_EQ(0u, scan.torn_bytes);
    // The caller keeps a corrupt file whole.
    EXPECT_EQ(Status::Code::kIllegalState, TruncateTornTail(fd_, scan).code());
    EXPECT_EQ(bad.size(), FileSize());
  }
}

TEST_F(BlockFormatTest, BadBlockFollowedByZerosThenDataIsCorruption) {
  std::string contents = Block("one") + Block(Pattern(30, 'p'));
  contents.back() ^= 0x01;
  contents += std::string(3000, '\0') + "x";
  WriteFile(contents);
  ScanResult scan = MustScan();
  EXPECT_TRUE(scan.corrupt);
  EXPECT_EQ(1u, scan.blocks.size());
}

TEST_F(BlockFormatTest, TruncateRefusesAFileThatChangedSinceTheScan) {
  const std::string prefix = Block("one");
  WriteFile(prefix + "torn");
  ScanResult scan = MustScan();
  ASSERT_EQ(4u, scan.torn_bytes);
  const std::string more = "more";
  ASSERT_EQ(4, ::pwrite(fd_, more.data(), more.size(), static_cast<off_t>(FileSize())));
  EXPECT_EQ(Status::Code::kIllegalState, TruncateTornTail(fd_, scan).code());
  EXPECT_EQ(prefix.size() + 8, FileSize());
}

TEST_F(BlockFormatTest, VerifyBlock) {
  const std::string data = Pattern(77, 'v');
  const BlockExtent extent{1000 + kBlockHeaderBytes, 77, MaskedBlockCrc(data)};
  EXPECT_TRUE(VerifyBlock(extent, data).ok());

  Status short_read = VerifyBlock(extent, std::string_view(data).substr(0, 76));
  EXPECT_TRUE(short_read.IsCorruption());
  EXPECT_NE(std::string::npos, short_read.message().find("offset 1000"));

  std::string flipped = data;
  flipped[3] ^= 0x04;
  Status bad = VerifyBlock(extent, flipped);
  EXPECT_TRUE(bad.IsCorruption());
  EXPECT_NE(std::string::npos, bad.message().find("offset 1000"));
}

}  // namespace
}  // namespace nova::stoc
