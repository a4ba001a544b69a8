// MessageStream over a socketpair: whole messages out of arbitrary chunks, a message over
// the limit refused with its type and id, a damaged header, and the ends of a stream.
#include "common/wire/message_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace nova::wire {
namespace {

class MessageStreamTest : public ::testing::Test {
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

TEST_F(MessageStreamTest, WholeMessagesOutOfChunks) {
  MessageStream in(fds_[0], 1 << 20);
  const std::string a = EncodeMessage(0x0301, 1, "first");
  const std::string b = EncodeMessage(0x0302, 2, std::string(3000, 'b'));
  const std::string c = EncodeMessage(0x0303, 3, "third", kFlagResponse);
  Send(a + b + c.substr(0, 10));
  MessageHeader h;
  std::string_view payload;
  EXPECT_TRUE(in.Next(&h, &payload).IsNotFound()) << "nothing read yet";
  ASSERT_TRUE(in.Fill(false).ok());
  ASSERT_TRUE(in.Next(&h, &payload).ok());
  EXPECT_EQ(h.type, 0x0301);
  EXPECT_EQ(h.request_id, 1u);
  EXPECT_EQ(payload, "first");
  ASSERT_TRUE(in.Next(&h, &payload).ok());
  EXPECT_EQ(payload, std::string(3000, 'b'));
  EXPECT_TRUE(in.Next(&h, &payload).IsNotFound()) << "the third is incomplete";
  EXPECT_TRUE(in.Fill(true).IsUnavailable()) << "nothing more to read now";
  Send(c.substr(10));
  ASSERT_TRUE(in.Fill(false).ok());
  ASSERT_TRUE(in.Next(&h, &payload).ok());
  EXPECT_EQ(h.request_id, 3u);
  EXPECT_TRUE(h.is_response());
  EXPECT_EQ(payload, "third");
  ::close(fds_[1]);
  fds_[1] = -1;
  Status s = in.Fill(false);
  EXPECT_TRUE(s.IsNetworkError());
  EXPECT_EQ(s.message(), "closed by the peer");
}

TEST_F(MessageStreamTest, TooLongIsRefusedWithItsTypeAndId) {
  MessageStream in(fds_[0], 100);
  Send(EncodeMessage(0x0305, 77, std::string(200, 'x')).substr(0, kHeaderBytes));
  ASSERT_TRUE(in.Fill(false).ok());
  MessageHeader h;
  std::string_view payload;
  Status s = in.Next(&h, &payload);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(h.type, 0x0305);
  EXPECT_EQ(h.request_id, 77u);
  EXPECT_EQ(in.refused_bytes(), kHeaderBytes + 200);
}

TEST_F(MessageStreamTest, DamagedHeaderIsRefused) {
  MessageStream in(fds_[0], 1 << 20);
  std::string m = EncodeMessage(0x0301, 1, "payload");
  m[0] ^= 0x55;  // the magic
  Send(m);
  ASSERT_TRUE(in.Fill(false).ok());
  MessageHeader h;
  std::string_view payload;
  EXPECT_TRUE(in.Next(&h, &payload).IsCorruption());
  // A damaged payload is caught by the crc once the message is whole.
  MessageStream in2(fds_[1], 1 << 20);
  std::string m2 = EncodeMessage(0x0301, 2, "payload");
  m2.back() ^= 1;
  ASSERT_EQ(::write(fds_[0], m2.data(), m2.size()), static_cast<ssize_t>(m2.size()));
  ASSERT_TRUE(in2.Fill(false).ok());
  EXPECT_TRUE(in2.Next(&h, &payload).IsCorruption());
}

}  // namespace
}  // namespace nova::wire
