#include "ltc/protocol/client_auth.h"

#include "common/transport/handshake.h"
#include "common/wire/message.h"

namespace nova::ltc {
namespace {

// DO NOT CHANGE: part of every MAC (a client and an LTC of other versions must agree).
constexpr char kClientAuthLabel[] = "nova-ltc-client";
// The lane field of the transport's MAC layout; the client protocol has one stream.
constexpr uint16_t kNoLane = 0;

}  // namespace

std::string EncodeAuthChallenge(const AuthChallenge& c) {
  wire::PayloadWriter w;
  w.PutU8(c.required ? 1 : 0);
  w.PutBytes(c.nonce);
  return w.Finish();
}

Status DecodeAuthChallenge(std::string_view in, AuthChallenge* c) {
  wire::PayloadReader rd(in);
  uint8_t required = 0;
  rd.GetU8("required", &required);
  rd.GetString("nonce", &c->nonce);
  NOVA_RETURN_NOT_OK_PREPEND(rd.Finish(), "AuthChallenge response");
  if (required > 1) return Status::Corruption("AuthChallenge response: bad required flag");
  c->required = required == 1;
  const size_t want = c->required ? transport::kNonceBytes : 0;
  if (c->nonce.size() != want) {
    return Status::Corruption("AuthChallenge response: a nonce of " +
                              std::to_string(c->nonce.size()) + " bytes");
  }
  return Status::OK();
}

std::string EncodeAuthenticate(std::string_view mac) {
  wire::PayloadWriter w;
  w.PutBytes(mac);
  return w.Finish();
}

Status DecodeAuthenticate(std::string_view in, std::string* mac) {
  wire::PayloadReader rd(in);
  rd.GetString("mac", mac);
  return rd.Finish().Prepend("Authenticate request");
}

std::string NewAuthNonce() { return transport::RandomNonce(); }

std::string ClientAuthMac(std::string_view secret, std::string_view nonce) {
  return transport::LabeledMac(secret, kClientAuthLabel, kNoLane, nonce, "");
}

bool ClientAuthMacMatches(std::string_view secret, std::string_view nonce, std::string_view mac) {
  return transport::MacEquals(ClientAuthMac(secret, nonce), mac);
}

Status ClientSecretRequiredError() {
  return Status::PermissionDenied(
      "this LTC requires client authentication: give the client the cluster's client secret "
      "(--client_secret_file, or ClientOptions::client_secret; the LTC's is "
      "--ltc_client_secret_file)");
}

Status WrongClientSecretError() {
  return Status::PermissionDenied(
      "wrong client secret: the client's --client_secret_file (ClientOptions::client_secret) "
      "must hold the secret of the LTC's --ltc_client_secret_file");
}

}  // namespace nova::ltc
