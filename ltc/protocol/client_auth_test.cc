// The client authentication handshake's codecs and MACs: round trips, malformed input, and
// MACs that depend on the secret and the nonce and never equal the transport's.
#include "ltc/protocol/client_auth.h"

#include <gtest/gtest.h>

#include "common/transport/handshake.h"
#include "ltc/protocol/client_protocol.h"
#include "ltc/protocol/client_request.h"

namespace nova::ltc {
namespace {

TEST(ClientAuthTest, ChallengeRoundTrips) {
  AuthChallenge c{true, NewAuthNonce()};
  AuthChallenge out;
  ASSERT_TRUE(DecodeAuthChallenge(EncodeAuthChallenge(c), &out).ok());
  EXPECT_TRUE(out.required);
  EXPECT_EQ(out.nonce, c.nonce);

  ASSERT_TRUE(DecodeAuthChallenge(EncodeAuthChallenge(AuthChallenge{}), &out).ok());
  EXPECT_FALSE(out.required);
  EXPECT_TRUE(out.nonce.empty());
}

TEST(ClientAuthTest, MalformedChallengesAreCorruption) {
  AuthChallenge out;
  EXPECT_TRUE(DecodeAuthChallenge("", &out).IsCorruption());
  // Required without a nonce of the right size, a nonce when not required, a bad flag,
  // trailing bytes.
  EXPECT_TRUE(DecodeAuthChallenge(EncodeAuthChallenge({true, ""}), &out).IsCorruption());
  EXPECT_TRUE(DecodeAuthChallenge(EncodeAuthChallenge({true, "short"}), &out).IsCorruption());
  EXPECT_TRUE(
      DecodeAuthChallenge(EncodeAuthChallenge({false, NewAuthNonce()}), &out).IsCorruption());
  std::string bad_flag = EncodeAuthChallenge({true, NewAuthNonce()});
  bad_flag[0] = 2;
  EXPECT_TRUE(DecodeAuthChallenge(bad_flag, &out).IsCorruption());
  EXPECT_TRUE(
      DecodeAuthChallenge(EncodeAuthChallenge({true, NewAuthNonce()}) + "x", &out).IsCorruption());
}

TEST(ClientAuthTest, AuthenticateRoundTrips) {
  const std::string mac = ClientAuthMac("secret", NewAuthNonce());
  std::string out;
  ASSERT_TRUE(DecodeAuthenticate(EncodeAuthenticate(mac), &out).ok());
  EXPECT_EQ(out, mac);
  EXPECT_TRUE(DecodeAuthenticate("", &out).IsCorruption());
  EXPECT_TRUE(DecodeAuthenticate(EncodeAuthenticate(mac) + "x", &out).IsCorruption());
}

TEST(ClientAuthTest, MacDependsOnSecretAndNonce) {
  const std::string nonce = NewAuthNonce();
  const std::string mac = ClientAuthMac("secret", nonce);
  EXPECT_EQ(mac.size(), transport::kMacBytes);
  EXPECT_TRUE(ClientAuthMacMatches("secret", nonce, mac));
  EXPECT_FALSE(ClientAuthMacMatches("Secret", nonce, mac));
  EXPECT_FALSE(ClientAuthMacMatches("secret", NewAuthNonce(), mac));
  EXPECT_FALSE(ClientAuthMacMatches("secret", nonce, mac.substr(1)));
  EXPECT_FALSE(ClientAuthMacMatches("secret", nonce, ""));
  // Another label than the transport's: no MAC of one protocol answers the other's.
  EXPECT_NE(mac, transport::AcceptorMac("secret", 0, nonce, ""));
  EXPECT_NE(mac, transport::InitiatorMac("secret", 0, nonce, ""));
}

TEST(ClientAuthTest, HandshakeTypesAreNotDataRequests) {
  ClientRequest r;
  for (ClientMsg t : {ClientMsg::kAuthChallenge, ClientMsg::kAuthenticate}) {
    const uint16_t type = static_cast<uint16_t>(t);
    EXPECT_FALSE(kClientTypes.Contains(type));
    EXPECT_EQ(DecodeClientRequest(type, "", &r).code(), Status::Code::kNotSupported);
    EXPECT_STRNE(ClientMsgName(type), "unknown");
  }
}

TEST(ClientAuthTest, RefusalsNameTheFlags) {
  EXPECT_TRUE(ClientSecretRequiredError().IsPermissionDenied());
  EXPECT_NE(ClientSecretRequiredError().message().find("--client_secret_file"), std::string::npos);
  EXPECT_TRUE(WrongClientSecretError().IsPermissionDenied());
  EXPECT_NE(WrongClientSecretError().message().find("--ltc_client_secret_file"),
            std::string::npos);
}

}  // namespace
}  // namespace nova::ltc
