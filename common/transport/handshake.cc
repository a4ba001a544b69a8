#include "common/transport/handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/coding.h"

namespace nova::transport {

namespace {

constexpr char kAcceptorLabel[] = "nova-acceptor";
constexpr char kInitiatorLabel[] = "nova-initiator";

Status Malformed(const char* what) {
  return Status::Corruption(std::string("malformed handshake ") + what);
}

std::string Start(HandshakeKind kind) { return std::string(1, static_cast<char>(kind)); }

// Checks and strips the kind byte.
bool Expect(std::string_view* in, HandshakeKind kind) {
  HandshakeKind k;
  if (!PeekHandshakeKind(*in, &k) || k != kind) return false;
  in->remove_prefix(1);
  return true;
}

}  // namespace

bool PeekHandshakeKind(std::string_view in, HandshakeKind* kind) {
  if (in.empty()) return false;
  const uint8_t k = static_cast<uint8_t>(in[0]);
  if (k < static_cast<uint8_t>(HandshakeKind::kHello) ||
      k > static_cast<uint8_t>(HandshakeKind::kVerdict)) {
    return false;
  }
  *kind = static_cast<HandshakeKind>(k);
  return true;
}

std::string EncodeHello(const Hello& m) {
  std::string s = Start(HandshakeKind::kHello);
  PutFixed16(&s, m.version);
  PutLengthPrefixed(&s, m.node_name);
  PutLengthPrefixed(&s, m.listen_address);
  PutFixed64(&s, m.incarnation);
  PutFixed16(&s, m.lane);
  PutFixed16(&s, m.lanes);
  PutLengthPrefixed(&s, m.nonce);
  return s;
}

Status DecodeHello(std::string_view in, Hello* m) {
  std::string_view name, addr, nonce;
  if (!Expect(&in, HandshakeKind::kHello) || !GetFixed16(&in, &m->version)) {
    return Malformed("hello");
  }
  if (m->version != kHandshakeVersion) {
    return Status::NotSupported("peer speaks handshake version " + std::to_string(m->version) +
                                ", we speak " + std::to_string(kHandshakeVersion));
  }
  if (!GetLengthPrefixed(&in, &name) || !GetLengthPrefixed(&in, &addr) ||
      !GetFixed64(&in, &m->incarnation) || !GetFixed16(&in, &m->lane) ||
      !GetFixed16(&in, &m->lanes) || !GetLengthPrefixed(&in, &nonce) || !in.empty() ||
      nonce.size() != kNonceBytes) {
    return Malformed("hello");
  }
  m->node_name = name;
  m->listen_address = addr;
  m->nonce = nonce;
  return Status::OK();
}

std::string EncodeChallenge(const Challenge& m) {
  std::string s = Start(HandshakeKind::kChallenge);
  PutLengthPrefixed(&s, m.node_name);
  PutLengthPrefixed(&s, m.listen_address);
  PutLengthPrefixed(&s, m.nonce);
  PutLengthPrefixed(&s, m.mac);
  return s;
}

Status DecodeChallenge(std::string_view in, Challenge* m) {
  std::string_view name, addr, nonce, mac;
  if (!Expect(&in, HandshakeKind::kChallenge) || !GetLengthPrefixed(&in, &name) || !GetLengthPrefixed(&in, &addr) ||
      !GetLengthPrefixed(&in, &nonce) || !GetLengthPrefixed(&in, &mac) || !in.empty() ||
      nonce.size() != kNonceBytes || mac.size() != kMacBytes) {
    return Malformed("challenge");
  }
  m->node_name = name;
  m->listen_address = addr;
  m->nonce = nonce;
  m->mac = mac;
  return Status::OK();
}

std::string EncodeResponse(const Response& m) {
  std::string s = Start(HandshakeKind::kResponse);
  PutLengthPrefixed(&s, m.mac);
  return s;
}

Status DecodeResponse(std::string_view in, Response* m) {
  std::string_view mac;
  if (!Expect(&in, HandshakeKind::kResponse) || !GetLengthPrefixed(&in, &mac) || !in.empty() || mac.size() != kMacBytes) {
    return Malformed("response");
  }
  m->mac = mac;
  return Status::OK();
}

std::string EncodeVerdict(const Status& s) {
  std::string out = Start(HandshakeKind::kVerdict);
  s.EncodeTo(&out);
  return out;
}

Status DecodeVerdict(std::string_view in) {
  Status s;
  if (!Expect(&in, HandshakeKind::kVerdict) || !Status::DecodeFrom(&in, &s) || !in.empty()) return Malformed("verdict");
  return s;
}

std::string RandomNonce() {
  std::string n(kNonceBytes, '\0');
  // RAND_bytes only fails when the entropy source is broken: a programming/platform error.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1) {
    abort();
  }
  return n;
}

uint64_t RandomU64() {
  std::string n = RandomNonce();
  return DecodeFixed64(n.data());
}

std::string LabeledMac(std::string_view secret, std::string_view label, uint16_t lane,
                       std::string_view first, std::string_view second) {
  std::string msg(label);
  PutFixed16(&msg, lane);
  PutLengthPrefixed(&msg, first);
  PutLengthPrefixed(&msg, second);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &out_len);
  return std::string(reinterpret_cast<char*>(out), out_len);
}

std::string AcceptorMac(std::string_view secret, uint16_t lane, std::string_view nonce_i,
                        std::string_view nonce_a) {
  return LabeledMac(secret, kAcceptorLabel, lane, nonce_i, nonce_a);
}

std::string InitiatorMac(std::string_view secret, uint16_t lane, std::string_view nonce_a,
                         std::string_view nonce_i) {
  return LabeledMac(secret, kInitiatorLabel, lane, nonce_a, nonce_i);
}

bool MacEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace nova::transport
