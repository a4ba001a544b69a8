// The client authentication handshake of the client <-> LTC protocol (docs/protocol.md
// "Client authentication", docs/security.md): an LTC given a client secret
// (--ltc_client_secret_file) serves a connection only once the client has proven that it
// holds the same secret, by a challenge-response that never sends the secret itself.
//
//   client -> LTC   AuthChallenge  (empty)
//   LTC -> client   AuthChallenge  {u8 required, bytes nonce}    nonce: 16 random bytes,
//                                   empty when required = 0 (no secret configured)
//   client -> LTC   Authenticate   {bytes mac}
//                                   mac = LabeledMac(secret, "nova-ltc-client", 0, nonce, "")
//   LTC -> client   Authenticate   (empty): the connection is authenticated
//              or   connection-level PermissionDenied, then the LTC closes the connection
//
// A client without a secret sends neither message (its bytes on the wire are those of a
// client before the handshake existed); an LTC without a secret answers AuthChallenge with
// required = 0 and needs nothing more. An LTC that requires the secret answers any other
// request of an unauthenticated connection with a connection-level PermissionDenied naming
// the client's flag, then closes it; the same for a wrong MAC. The MAC is the transport's
// HMAC-SHA256 (common/transport/handshake.h) under a label of its own.
//
// Field order is the schema (DO NOT CHANGE: on the wire). Decoders yield Corruption for
// malformed input. Thread safety: the functions are pure (NewAuthNonce reads OpenSSL's RNG).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::ltc {

// The LTC's answer to AuthChallenge.
struct AuthChallenge {
  bool required = false;
  std::string nonce;  // kAuthNonceBytes when required, else empty
};

std::string EncodeAuthChallenge(const AuthChallenge& c);
Status DecodeAuthChallenge(std::string_view in, AuthChallenge* c);
// Authenticate's request: bytes mac.
std::string EncodeAuthenticate(std::string_view mac);
Status DecodeAuthenticate(std::string_view in, std::string* mac);

// A fresh random nonce for one challenge.
std::string NewAuthNonce();
// The MAC a client holding `secret` answers `nonce` with.
std::string ClientAuthMac(std::string_view secret, std::string_view nonce);
// Whether `mac` answers `nonce` under `secret` (constant-time).
bool ClientAuthMacMatches(std::string_view secret, std::string_view nonce, std::string_view mac);

// The LTC's refusals (PermissionDenied), each naming the flag that cures it.
Status ClientSecretRequiredError();
Status WrongClientSecretError();

}  // namespace nova::ltc
