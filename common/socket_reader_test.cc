// SocketReader over a socketpair: bytes accumulate until consumed, a consumed prefix is
// reclaimed before the buffer grows, a long frame grows it (and it shrinks back after), ReadDirect bypasses it, and the
// ends of a stream (would block, closed, error) are told apart.
#include "common/socket_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace nova {
namespace {

class SocketReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  int fds_[2] = {-1, -1};
};

TEST_F(SocketReaderTest, BytesStayBufferedUntilConsumed) {
  SocketReader in(fds_[0], 64);
  EXPECT_EQ(in.Fill(/*dont_wait=*/true, 1), SocketReader::kWouldBlock);
  Send("hello ");
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  EXPECT_EQ(in.buffered(), "hello ");
  Send("world");
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  EXPECT_EQ(in.buffered(), "hello world");
  in.Consume(6);
  EXPECT_EQ(in.buffered(), "world");
  in.Consume(5);
  EXPECT_TRUE(in.buffered().empty());
}

TEST_F(SocketReaderTest, ConsumedPrefixIsReclaimedBeforeGrowing) {
  SocketReader in(fds_[0], 16);
  Send(std::string(16, 'a'));
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  ASSERT_EQ(in.buffered().size(), 16u);
  in.Consume(12);  // a partial frame of 4 bytes is left at the end of a full buffer
  Send("bcdefghijkl");
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  // Moved to the front: 4 + 12 bytes fit the 16-byte buffer without growing.
  EXPECT_EQ(in.buffered(), "aaaabcdefghijkl");
}

TEST_F(SocketReaderTest, GrowsForAFrameLongerThanTheBuffer) {
  SocketReader in(fds_[0], 8);
  const std::string frame(1000, 'x');
  Send(frame);
  while (in.buffered().size() < frame.size()) {
    ASSERT_EQ(in.Fill(false, frame.size() - in.buffered().size()), SocketReader::kData);
  }
  EXPECT_EQ(in.buffered(), frame);
}

TEST_F(SocketReaderTest, ShrinksBackAfterALongFrameIsConsumed) {
  SocketReader in(fds_[0], 8);
  Send(std::string(1000, 'x'));
  while (in.buffered().size() < 1000) {
    ASSERT_EQ(in.Fill(false, 1000 - in.buffered().size()), SocketReader::kData);
  }
  EXPECT_GE(in.capacity(), 1000u);
  in.Consume(1000);
  Send("next");
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  EXPECT_EQ(in.capacity(), 8u);  // the memory went back with the long frame
  EXPECT_EQ(in.buffered(), "next");
  // A partial frame still buffered keeps the buffer as it is.
  Send(std::string(100, 'y'));
  while (in.buffered().size() < 104) ASSERT_EQ(in.Fill(false, 64), SocketReader::kData);
  const size_t grown = in.capacity();
  in.Consume(50);
  Send("z");
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  EXPECT_EQ(in.capacity(), grown);
  EXPECT_EQ(in.buffered().substr(0, 54), std::string(54, 'y'));
}

TEST_F(SocketReaderTest, MaxBytesBoundsOneRead) {
  SocketReader in(fds_[0], 64);
  Send("0123456789");
  ASSERT_EQ(in.Fill(false, 1, /*max_bytes=*/4), SocketReader::kData);
  EXPECT_EQ(in.buffered(), "0123");
}

TEST_F(SocketReaderTest, ReadDirectBypassesTheBuffer) {
  SocketReader in(fds_[0], 64);
  Send("payload");
  char dst[16] = {};
  size_t got = 0;
  ASSERT_EQ(in.ReadDirect(dst, sizeof(dst), &got), SocketReader::kData);
  EXPECT_EQ(std::string(dst, got), "payload");
  EXPECT_TRUE(in.buffered().empty());
  EXPECT_EQ(in.ReadDirect(dst, sizeof(dst), &got), SocketReader::kWouldBlock);
  EXPECT_EQ(got, 0u);
}

TEST_F(SocketReaderTest, ClosedAndErrorAreToldApart) {
  SocketReader in(fds_[0], 64);
  Send("last");
  ::close(fds_[1]);
  fds_[1] = -1;
  ASSERT_EQ(in.Fill(false, 1), SocketReader::kData);
  EXPECT_EQ(in.buffered(), "last");
  EXPECT_EQ(in.Fill(false, 1), SocketReader::kClosed);

  SocketReader bad(-1, 64);
  EXPECT_EQ(bad.Fill(true, 1), SocketReader::kError);
  EXPECT_EQ(bad.last_errno(), EBADF);
}

}  // namespace
}  // namespace nova
