// Connection handshake shared by all transport backends: protocol version check and
// mutual authentication with the cluster secret (HMAC-SHA256 challenge-response), so a
// process without the secret can neither connect nor impersonate a listener.
//
//   initiator -> acceptor   Hello      {version, node, address, incarnation, lane, lanes, nonce_i}
//   acceptor  -> initiator  Challenge  {node, address, nonce_a, mac_a}
//                                      mac_a = HMAC(secret, "nova-acceptor" | lane | nonce_i | nonce_a)
//   initiator -> acceptor   Response   {mac_i}
//                                      mac_i = HMAC(secret, "nova-initiator" | lane | nonce_a | nonce_i)
//   acceptor  -> initiator  Verdict    {Status}
//
// Each message travels as one length-prefixed frame (backend-specific) and starts with a
// one-byte HandshakeKind. The acceptor may answer a Hello with a Verdict at once (refusal).
// DO NOT CHANGE the encodings without bumping kHandshakeVersion.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::transport {

constexpr uint16_t kHandshakeVersion = 1;  // DO NOT CHANGE: on the wire
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;  // HMAC-SHA256
// Bounds a handshake message: names and addresses are short.
constexpr size_t kMaxHandshakeMessageBytes = 4096;

enum class HandshakeKind : uint8_t {  // DO NOT CHANGE: on the wire
  kHello = 1,
  kChallenge = 2,
  kResponse = 3,
  kVerdict = 4,
};
// The kind of an encoded handshake message; false if empty or unknown.
bool PeekHandshakeKind(std::string_view in, HandshakeKind* kind);

struct Hello {
  uint16_t version = kHandshakeVersion;
  std::string node_name;
  std::string listen_address;
  uint64_t incarnation = 0;  // random per process start: tells a restarted peer apart
  uint16_t lane = 0;
  uint16_t lanes = 0;
  std::string nonce;
};

struct Challenge {
  std::string node_name;
  std::string listen_address;
  std::string nonce;
  std::string mac;
};

struct Response {
  std::string mac;
};

std::string EncodeHello(const Hello& m);
Status DecodeHello(std::string_view in, Hello* m);
std::string EncodeChallenge(const Challenge& m);
Status DecodeChallenge(std::string_view in, Challenge* m);
std::string EncodeResponse(const Response& m);
Status DecodeResponse(std::string_view in, Response* m);
std::string EncodeVerdict(const Status& s);
// Returns Corruption if malformed, else the verdict carried.
Status DecodeVerdict(std::string_view in);

// Cryptographically random bytes (OpenSSL RAND_bytes).
std::string RandomNonce();
uint64_t RandomU64();

// HMAC-SHA256(secret, label | u16 lane | bytes first | bytes second), bytes being
// length-prefixed: the MAC of every challenge-response of the tree. Each protocol passes its
// own label (the transport's "nova-acceptor"/"nova-initiator", the LTC client handshake's
// "nova-ltc-client"), so a MAC made for one can never be replayed in another even when an
// operator gives both the same secret. kMacBytes long.
std::string LabeledMac(std::string_view secret, std::string_view label, uint16_t lane,
                       std::string_view first, std::string_view second);

// mac_a and mac_i as defined above.
std::string AcceptorMac(std::string_view secret, uint16_t lane, std::string_view nonce_i,
                        std::string_view nonce_a);
std::string InitiatorMac(std::string_view secret, uint16_t lane, std::string_view nonce_a,
                         std::string_view nonce_i);
// Constant-time comparison.
bool MacEquals(std::string_view a, std::string_view b);

}  // namespace nova::transport
