// Fuzz target for the message codec (message.h).
//
// Each input is used three ways:
//  1. as raw bytes for DecodeMessage and PeekMessageLength: they must agree with each other,
//     and a message that decodes must re-encode to exactly the input;
//  2. as a script of PayloadReader Gets over the payload (or the raw bytes when the input is
//     not a message): every value read must re-encode to bytes that read back the same;
//  3. as the fields of a valid message, which is built, decoded, then damaged at a spot the
//     input chooses: damage must be detected (a crc catches every error of <= 32 bits).
// Any violated property aborts, which is how the fuzzer reports it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/coding.h"
#include "common/wire/message.h"

namespace nova::wire {
namespace {

// Large enough to exercise the limit check, small enough to never allocate much.
constexpr size_t kMaxPayload = 64 << 10;

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

void CheckRawDecode(std::string_view in) {
  size_t needed = 1;
  const Status peek = PeekMessageLength(in, kMaxPayload, &needed);
  if (in.size() < kHeaderBytes) FUZZ_CHECK(peek.ok() && needed == 0);
  if (!peek.ok()) FUZZ_CHECK(needed == 0);

  MessageHeader h;
  std::string_view payload;
  const Status s = DecodeMessage(in, &h, &payload, kMaxPayload);
  if (!s.ok()) {
    FUZZ_CHECK(s.IsCorruption() || s.code() == Status::Code::kNotSupported);
    FUZZ_CHECK(!s.message().empty());
    // A header Peek accepts can only fail Decode on length or crc.
    if (peek.ok() && in.size() >= kHeaderBytes) FUZZ_CHECK(s.IsCorruption());
    return;
  }
  FUZZ_CHECK(peek.ok() && needed == in.size());
  FUZZ_CHECK(payload.data() == in.data() + kHeaderBytes && payload.size() == h.payload_length);
  FUZZ_CHECK(EncodeMessage(h.type, h.request_id, payload, h.flags) == in);
  if (h.is_error()) {
    const Status carried = DecodeErrorPayload(payload);
    FUZZ_CHECK(!carried.ok());
  }
}

// Reads one field of kind `op % 8` from *r. On success appends the value's canonical
// encoding to *w and returns true.
bool ReadField(uint8_t op, std::string_view payload, PayloadReader* r, PayloadWriter* w) {
  switch (op % 8) {
    case 0: {
      uint8_t v;
      if (!r->GetU8("u8", &v)) return false;
      w->PutU8(v);
      return true;
    }
    case 1: {
      uint16_t v;
      if (!r->GetU16("u16", &v)) return false;
      w->PutU16(v);
      return true;
    }
    case 2: {
      uint32_t v;
      if (!r->GetU32("u32", &v)) return false;
      w->PutU32(v);
      return true;
    }
    case 3: {
      uint64_t v;
      if (!r->GetU64("u64", &v)) return false;
      w->PutU64(v);
      return true;
    }
    case 4: {
      uint32_t v;
      if (!r->GetVarint32("v32", &v)) return false;
      w->PutVarint32(v);
      return true;
    }
    case 5: {
      uint64_t v;
      if (!r->GetVarint64("v64", &v)) return false;
      w->PutVarint64(v);
      return true;
    }
    case 6: {
      std::string_view v;
      if (!r->GetBytes("bytes", &v)) return false;
      FUZZ_CHECK(v.data() >= payload.data() &&
                 v.data() + v.size() <= payload.data() + payload.size());
      w->PutBytes(v);
      return true;
    }
    default: {
      Status v;
      if (!r->GetStatus("status", &v)) return false;
      w->PutStatus(v);
      return true;
    }
  }
}

// Reads fields chosen by `script` from `payload` until the reader fails or is done.
void CheckReader(std::string_view payload, std::string_view script) {
  PayloadReader r(payload);
  for (size_t step = 0; !r.done() && r.status().ok(); ++step) {
    const size_t before = r.remaining();
    const uint8_t op = script.empty() ? static_cast<uint8_t>(step)
                                      : static_cast<uint8_t>(script[step % script.size()]);
    PayloadWriter w;
    if (!ReadField(op, payload, &r, &w)) {
      FUZZ_CHECK(r.status().IsCorruption() && r.remaining() == before);
      FUZZ_CHECK(r.Finish().IsCorruption());
      return;
    }
    FUZZ_CHECK(r.remaining() < before);  // every field takes at least one byte
    // Varints and lengths have non-minimal forms, so the consumed bytes may be longer than
    // the canonical re-encoding; an encoding of the same length must be the same bytes, and
    // the canonical bytes must read back as themselves.
    const std::string_view consumed =
        payload.substr(payload.size() - before, before - r.remaining());
    const std::string canonical = w.Finish();
    FUZZ_CHECK(canonical.size() <= consumed.size());
    if (canonical.size() == consumed.size()) FUZZ_CHECK(canonical == consumed);
    PayloadReader again(canonical);
    PayloadWriter again_w;
    FUZZ_CHECK(ReadField(op, canonical, &again, &again_w) && again.done());
    FUZZ_CHECK(again_w.Finish() == canonical);
  }
  if (r.done()) FUZZ_CHECK(r.Finish().ok());
}

// Builds a valid message from the input's bytes, then damages it.
void CheckBuiltMessage(std::string_view in) {
  if (in.size() < 12) return;
  const uint16_t type = DecodeFixed16(in.data());
  const uint64_t id = DecodeFixed64(in.data() + 2);
  const uint8_t flags = static_cast<uint8_t>(in[10]) & kKnownFlags;
  const uint8_t damage = static_cast<uint8_t>(in[11]);
  const std::string_view payload = in.substr(12);
  const std::string m = EncodeMessage(type, id, payload, flags);

  MessageHeader h;
  std::string_view got;
  FUZZ_CHECK(DecodeMessage(m, &h, &got, SIZE_MAX).ok());
  FUZZ_CHECK(h.type == type && h.request_id == id && h.flags == flags && got == payload);
  CheckReader(got, in.substr(0, 12));

  if (damage == 0) return;
  std::string bad = m;
  bad[(id ^ type) % bad.size()] ^= static_cast<char>(damage);
  const Status s = DecodeMessage(bad, &h, &got, SIZE_MAX);
  FUZZ_CHECK(!s.ok());
}

std::vector<std::string> SeedMessages() {
  PayloadWriter w;
  w.PutU64(7);
  w.PutVarint32(300);
  w.PutBytes("fragment bytes");
  w.PutStatus(Status::NotFound("no such file"));
  return {
      EncodeMessage(kStocTypes.first, 1, ""),
      EncodeMessage(kLogcTypes.first + 1, 2, w.Finish(), kFlagResponse),
      EncodeErrorResponse(kLtcTypes.first, 3, Status::WrongRange("moved")),
      EncodeMessage(kCoordinatorTypes.first, UINT64_MAX, std::string(300, '\x80')),
  };
}

}  // namespace
}  // namespace nova::wire

// Valid messages for tests/fuzz_driver.cc to mutate (libFuzzer does not call this).
extern "C" void NovaFuzzerSeeds(void (*add)(const uint8_t* data, size_t size)) {
  for (const std::string& s : nova::wire::SeedMessages()) {
    add(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  nova::wire::CheckRawDecode(in);
  nova::wire::MessageHeader h;
  std::string_view payload;
  if (nova::wire::DecodeMessage(in, &h, &payload, nova::wire::kMaxPayload).ok()) {
    nova::wire::CheckReader(payload, in.substr(0, nova::wire::kHeaderBytes));
  } else {
    nova::wire::CheckReader(in, in.substr(0, 8));
  }
  nova::wire::CheckBuiltMessage(in);
  return 0;
}
