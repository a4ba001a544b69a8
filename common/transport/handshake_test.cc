#include "common/transport/handshake.h"

#include <gtest/gtest.h>

namespace nova::transport {
namespace {

TEST(HandshakeTest, MessagesRoundTrip) {
  Hello h;
  h.node_name = "stoc-3";
  h.listen_address = "127.0.0.1:7000";
  h.incarnation = 0x1234567890abcdefull;
  h.lane = 1;
  h.lanes = 2;
  h.nonce = RandomNonce();
  Hello h2;
  ASSERT_TRUE(DecodeHello(EncodeHello(h), &h2).ok());
  EXPECT_EQ(h2.node_name, h.node_name);
  EXPECT_EQ(h2.listen_address, h.listen_address);
  EXPECT_EQ(h2.incarnation, h.incarnation);
  EXPECT_EQ(h2.lane, 1);
  EXPECT_EQ(h2.lanes, 2);
  EXPECT_EQ(h2.nonce, h.nonce);

  Challenge c{"ltc-0", "127.0.0.1:1", RandomNonce(), std::string(kMacBytes, 'm')};
  Challenge c2;
  ASSERT_TRUE(DecodeChallenge(EncodeChallenge(c), &c2).ok());
  EXPECT_EQ(c2.mac, c.mac);
  EXPECT_EQ(c2.nonce, c.nonce);
  Response r{std::string(kMacBytes, 'r')}, r2;
  ASSERT_TRUE(DecodeResponse(EncodeResponse(r), &r2).ok());
  EXPECT_EQ(r2.mac, r.mac);

  EXPECT_TRUE(DecodeVerdict(EncodeVerdict(Status::OK())).ok());
  Status v = DecodeVerdict(EncodeVerdict(Status::PermissionDenied("no")));
  EXPECT_EQ(v.code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(v.message(), "no");
}

TEST(HandshakeTest, KindsAreChecked) {
  Response r{std::string(kMacBytes, 'r')};
  Hello h;
  EXPECT_FALSE(DecodeHello(EncodeResponse(r), &h).ok());
  HandshakeKind k;
  ASSERT_TRUE(PeekHandshakeKind(EncodeVerdict(Status::OK()), &k));
  EXPECT_EQ(k, HandshakeKind::kVerdict);
  EXPECT_FALSE(PeekHandshakeKind("", &k));
  EXPECT_FALSE(PeekHandshakeKind(std::string(1, '\x09'), &k));
}

TEST(HandshakeTest, TruncatedAndBadMessagesAreRejected) {
  Hello h;
  h.node_name = "n";
  h.nonce = RandomNonce();
  std::string enc = EncodeHello(h);
  for (size_t i = 0; i < enc.size(); ++i) {
    Hello out;
    EXPECT_FALSE(DecodeHello(enc.substr(0, i), &out).ok()) << "prefix " << i;
  }
  Hello out;
  EXPECT_FALSE(DecodeHello(enc + "x", &out).ok());
  h.version = kHandshakeVersion + 1;
  Status s = DecodeHello(EncodeHello(h), &out);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
  h.version = kHandshakeVersion;
  h.nonce = "short";
  EXPECT_FALSE(DecodeHello(EncodeHello(h), &out).ok());
}

TEST(HandshakeTest, MacsDependOnSecretLaneAndNonces) {
  const std::string ni = RandomNonce(), na = RandomNonce();
  const std::string mac = AcceptorMac("secret", 0, ni, na);
  EXPECT_EQ(mac.size(), kMacBytes);
  EXPECT_TRUE(MacEquals(mac, AcceptorMac("secret", 0, ni, na)));
  EXPECT_FALSE(MacEquals(mac, AcceptorMac("secreT", 0, ni, na)));
  EXPECT_FALSE(MacEquals(mac, AcceptorMac("secret", 1, ni, na)));
  EXPECT_FALSE(MacEquals(mac, AcceptorMac("secret", 0, na, ni)));
  // The two directions never produce the same MAC, so a reflected answer is useless.
  EXPECT_FALSE(MacEquals(mac, InitiatorMac("secret", 0, ni, na)));
  EXPECT_FALSE(MacEquals(mac, mac.substr(1)));
  EXPECT_NE(RandomNonce(), RandomNonce());
}

}  // namespace
}  // namespace nova::transport
