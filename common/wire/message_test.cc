#include "common/wire/message.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::wire {
namespace {

constexpr size_t kNoLimit = SIZE_MAX;

// A seed for randomized tests: $NOVA_TEST_SEED if set (to replay), else a fresh one.
uint64_t TestSeed() {
  const char* env = std::getenv("NOVA_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::cout << "seed=" << seed << " (replay with NOVA_TEST_SEED=" << seed << ")" << std::endl;
  return seed;
}

std::string RandomBytes(std::mt19937_64* rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>((*rng)());
  return s;
}

// Decodes `in` and requires success.
void DecodeOk(std::string_view in, MessageHeader* h, std::string_view* payload) {
  Status s = DecodeMessage(in, h, payload, kNoLimit);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Re-encodes `m` with a header field replaced (and a correct crc), to test one check alone.
std::string WithHeaderByte(std::string m, size_t offset, char value) {
  m[offset] = value;
  EncodeFixed32(m.data() + kHeaderCrcOffset,
                crc32c::Mask(crc32c::Extend(crc32c::Value(m.data(), kHeaderCrcOffset),
                                            m.data() + kHeaderBytes, m.size() - kHeaderBytes)));
  return m;
}

TEST(MessageTest, GoldenLayout) {
  // Pins the on-wire layout: a change here breaks every deployed peer.
  const std::string m = EncodeMessage(0x0102, 0x0807060504030201ull, "abc", kFlagResponse);
  const std::string expected(
      "\x56\x4e"                          // magic
      "\x01"                              // version
      "\x01"                              // flags
      "\x02\x01"                          // type
      "\x00\x00"                          // reserved
      "\x01\x02\x03\x04\x05\x06\x07\x08"  // request_id
      "\x03\x00\x00\x00"                  // payload_length
      "\x97\x80\x37\x6f"                  // crc
      "abc",
      kHeaderBytes + 3);
  EXPECT_EQ(expected, m);
  const uint32_t crc =
      crc32c::Mask(crc32c::Extend(crc32c::Value(m.data(), kHeaderCrcOffset), "abc", 3));
  EXPECT_EQ(crc, DecodeFixed32(m.data() + kHeaderCrcOffset));
}

TEST(MessageTest, EmptyPayloadRoundTrip) {
  const std::string m = EncodeMessage(0x0201, 42, "");
  ASSERT_EQ(kHeaderBytes, m.size());
  MessageHeader h;
  std::string_view payload = "not cleared";
  DecodeOk(m, &h, &payload);
  EXPECT_EQ(kMagic, h.magic);
  EXPECT_EQ(kWireVersion, h.version);
  EXPECT_EQ(0, h.flags);
  EXPECT_FALSE(h.is_response());
  EXPECT_FALSE(h.is_error());
  EXPECT_EQ(0x0201, h.type);
  EXPECT_EQ(0, h.reserved);
  EXPECT_EQ(42u, h.request_id);
  EXPECT_EQ(0u, h.payload_length);
  EXPECT_TRUE(payload.empty());
}

TEST(MessageTest, LargePayloadRoundTrip) {
  std::mt19937_64 rng(7);
  const std::string big = RandomBytes(&rng, 4 << 20);
  const std::string m = EncodeMessage(0x0105, UINT64_MAX, big, kFlagResponse);
  MessageHeader h;
  std::string_view payload;
  DecodeOk(m, &h, &payload);
  EXPECT_EQ(big, payload);
  EXPECT_EQ(m.data() + kHeaderBytes, payload.data()) << "payload must alias the input";
  EXPECT_EQ(UINT64_MAX, h.request_id);
  EXPECT_TRUE(h.is_response());
  size_t needed = 0;
  ASSERT_TRUE(PeekMessageLength(m, kNoLimit, &needed).ok());
  EXPECT_EQ(m.size(), needed);
}

TEST(MessageTest, EveryByteCorruptionIsDetected) {
  const std::string good = EncodeMessage(0x0301, 0xdeadbeefcafe, "some payload bytes 0123456789");
  MessageHeader want;
  std::string_view want_payload;
  DecodeOk(good, &want, &want_payload);
  for (size_t i = 0; i < good.size(); ++i) {
    for (int x = 1; x < 256; ++x) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ x);
      MessageHeader h;
      std::string_view payload;
      Status s = DecodeMessage(bad, &h, &payload, kNoLimit);
      if (s.ok()) {
        // Only acceptable if it means exactly the same thing (it never should, with a crc).
        EXPECT_EQ(want.type, h.type);
        EXPECT_EQ(want.request_id, h.request_id);
        EXPECT_EQ(want.flags, h.flags);
        EXPECT_EQ(want_payload, payload);
        ADD_FAILURE() << "byte " << i << " ^ " << x << " decoded";
      } else {
        EXPECT_TRUE(s.IsCorruption() || s.code() == Status::Code::kNotSupported) << s.ToString();
      }
    }
  }
}

TEST(MessageTest, EveryTruncationIsDetected) {
  const std::string good = EncodeMessage(0x0102, 9, "payload");
  for (size_t len = 0; len < good.size(); ++len) {
    MessageHeader h;
    std::string_view payload;
    Status s = DecodeMessage(std::string_view(good).substr(0, len), &h, &payload, kNoLimit);
    EXPECT_TRUE(s.IsCorruption()) << len << ": " << s.ToString();
    EXPECT_NE(std::string::npos, s.message().find("truncated")) << s.ToString();

    size_t needed = 12345;
    ASSERT_TRUE(PeekMessageLength(good.substr(0, len), kNoLimit, &needed).ok());
    EXPECT_EQ(len < kHeaderBytes ? 0 : good.size(), needed) << len;
  }
}

TEST(MessageTest, TrailingBytesAreRejected) {
  const std::string m = EncodeMessage(0x0102, 9, "payload") + "x";
  MessageHeader h;
  std::string_view payload;
  Status s = DecodeMessage(m, &h, &payload, kNoLimit);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("oversized")) << s.ToString();
}

TEST(MessageTest, HeaderChecksHaveClearErrors) {
  const std::string good = EncodeMessage(0x0102, 9, "payload");
  MessageHeader h;
  std::string_view payload;

  Status s = DecodeMessage(WithHeaderByte(good, 0, 'X'), &h, &payload, kNoLimit);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.message().find("magic")) << s.ToString();

  s = DecodeMessage(WithHeaderByte(good, 2, 2), &h, &payload, kNoLimit);
  EXPECT_EQ(Status::Code::kNotSupported, s.code()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("version 2")) << s.ToString();

  s = DecodeMessage(WithHeaderByte(good, 3, 4), &h, &payload, kNoLimit);
  EXPECT_EQ(Status::Code::kNotSupported, s.code()) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("flags")) << s.ToString();

  s = DecodeMessage(WithHeaderByte(good, 7, 1), &h, &payload, kNoLimit);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.message().find("reserved")) << s.ToString();

  std::string bad_crc = good;
  bad_crc[kHeaderCrcOffset] ^= 1;
  s = DecodeMessage(bad_crc, &h, &payload, kNoLimit);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.message().find("crc")) << s.ToString();
}

TEST(MessageTest, PayloadLimitIsEnforcedBeforeReadingThePayload) {
  const std::string m = EncodeMessage(0x0102, 1, std::string(100, 'p'));
  MessageHeader h;
  std::string_view payload;
  EXPECT_TRUE(DecodeMessage(m, &h, &payload, 100).ok());
  Status s = DecodeMessage(m, &h, &payload, 99);
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.message().find("exceeds")) << s.ToString();

  // A stream only needs the header to refuse a huge message: nothing is buffered for it.
  size_t needed = 0;
  s = PeekMessageLength(std::string_view(m).substr(0, kHeaderBytes), 99, &needed);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();

  // The largest describable length is reported, not wrapped.
  std::string huge = m.substr(0, kHeaderBytes);
  EncodeFixed32(huge.data() + 16, UINT32_MAX);
  ASSERT_TRUE(PeekMessageLength(huge, kNoLimit, &needed).ok());
  EXPECT_EQ(kHeaderBytes + UINT32_MAX, needed);
  EXPECT_TRUE(DecodeMessage(huge, &h, &payload, kNoLimit).IsCorruption());
}

TEST(MessageTest, PeekFramesAByteStream) {
  std::vector<std::string> sent = {"", "a", std::string(1000, 'b'), "ccc"};
  std::string stream;
  for (size_t i = 0; i < sent.size(); ++i) stream += EncodeMessage(0x0100 + i, i, sent[i]);

  // Deliver the stream in uneven chunks, framing with Peek as a transport would.
  std::string buffered;
  std::vector<std::string> received;
  size_t pos = 0;
  for (size_t chunk = 1; pos < stream.size(); chunk = chunk * 3 % 97 + 1) {
    buffered.append(stream, pos, chunk);
    pos += chunk;
    for (;;) {
      size_t needed = 0;
      ASSERT_TRUE(PeekMessageLength(buffered, kNoLimit, &needed).ok());
      if (needed == 0 || buffered.size() < needed) break;
      MessageHeader h;
      std::string_view payload;
      DecodeOk(std::string_view(buffered).substr(0, needed), &h, &payload);
      EXPECT_EQ(received.size(), h.request_id);
      received.emplace_back(payload);
      buffered.erase(0, needed);
    }
  }
  EXPECT_EQ(sent, received);
  EXPECT_TRUE(buffered.empty());
}

TEST(MessageTest, ErrorResponsesCarryEveryStatusCode) {
  for (uint8_t c = 1; c <= Status::kMaxCode; ++c) {
    const Status error(static_cast<Status::Code>(c), "why it failed");
    const std::string m = EncodeErrorResponse(0x0203, 77, error);
    MessageHeader h;
    std::string_view payload;
    DecodeOk(m, &h, &payload);
    EXPECT_TRUE(h.is_response());
    EXPECT_TRUE(h.is_error());
    EXPECT_EQ(0x0203, h.type);
    EXPECT_EQ(77u, h.request_id);
    EXPECT_EQ(error, DecodeErrorPayload(payload));
  }
}

TEST(MessageTest, MalformedErrorPayloadsAreCorruption) {
  std::string ok_status;
  Status::OK().EncodeTo(&ok_status);
  std::string trailing;
  Status::NotFound("x").EncodeTo(&trailing);
  trailing += "junk";
  for (const std::string& p :
       {std::string(), std::string("\xff"), std::string("\001\005ab"), ok_status, trailing}) {
    EXPECT_TRUE(DecodeErrorPayload(p).IsCorruption()) << DecodeErrorPayload(p).ToString();
  }
  // An OK status is never sent as an error.
  MessageHeader h;
  std::string_view payload;
  const std::string m = EncodeErrorResponse(1, 2, Status::OK());
  DecodeOk(m, &h, &payload);
  EXPECT_EQ(Status::Code::kIllegalState, DecodeErrorPayload(payload).code());
}

TEST(MessageTest, TypeRangesAreDisjoint) {
  const TypeRange ranges[] = {kCommonTypes, kStocTypes, kLogcTypes, kLtcTypes, kCoordinatorTypes};
  for (const TypeRange& r : ranges) {
    EXPECT_FALSE(r.Contains(kInvalidType));
    for (const TypeRange& o : ranges) {
      if (&r == &o) continue;
      EXPECT_FALSE(o.Contains(r.first) || o.Contains(r.last));
    }
  }
}

TEST(PayloadTest, RoundTripAtBoundaries) {
  PayloadWriter w;
  w.PutU8(0);
  w.PutU8(UINT8_MAX);
  w.PutU16(UINT16_MAX);
  w.PutU32(0x01020304);
  w.PutU64(UINT64_MAX);
  w.PutVarint32(0);
  w.PutVarint32(UINT32_MAX);
  w.PutVarint64(127);
  w.PutVarint64(128);
  w.PutVarint64(UINT64_MAX);
  w.PutBytes("");
  w.PutBytes(std::string(300, 'z'));
  w.PutStatus(Status::OK());
  w.PutStatus(Status::WrongRange("range 7 moved"));
  const std::string payload = w.Finish();
  EXPECT_EQ(0u, w.size()) << "Finish leaves the writer empty";

  PayloadReader r(payload);
  uint8_t u8 = 1;
  uint16_t u16 = 0;
  uint32_t u32 = 0;
  uint64_t u64 = 0;
  std::string_view bytes;
  std::string str;
  Status st;
  ASSERT_TRUE(r.GetU8("a", &u8));
  EXPECT_EQ(0, u8);
  ASSERT_TRUE(r.GetU8("b", &u8));
  EXPECT_EQ(UINT8_MAX, u8);
  ASSERT_TRUE(r.GetU16("c", &u16));
  EXPECT_EQ(UINT16_MAX, u16);
  ASSERT_TRUE(r.GetU32("d", &u32));
  EXPECT_EQ(0x01020304u, u32);
  ASSERT_TRUE(r.GetU64("e", &u64));
  EXPECT_EQ(UINT64_MAX, u64);
  ASSERT_TRUE(r.GetVarint32("f", &u32));
  EXPECT_EQ(0u, u32);
  ASSERT_TRUE(r.GetVarint32("g", &u32));
  EXPECT_EQ(UINT32_MAX, u32);
  ASSERT_TRUE(r.GetVarint64("h", &u64));
  EXPECT_EQ(127u, u64);
  ASSERT_TRUE(r.GetVarint64("i", &u64));
  EXPECT_EQ(128u, u64);
  ASSERT_TRUE(r.GetVarint64("j", &u64));
  EXPECT_EQ(UINT64_MAX, u64);
  ASSERT_TRUE(r.GetBytes("k", &bytes));
  EXPECT_TRUE(bytes.empty());
  ASSERT_TRUE(r.GetString("l", &str));
  EXPECT_EQ(std::string(300, 'z'), str);
  ASSERT_TRUE(r.GetStatus("m", &st));
  EXPECT_TRUE(st.ok());
  ASSERT_TRUE(r.GetStatus("n", &st));
  EXPECT_EQ(Status::WrongRange("range 7 moved"), st);
  EXPECT_TRUE(r.done());
  EXPECT_TRUE(r.Finish().ok());
}

TEST(PayloadTest, FirstErrorIsStickyAndNamesTheField) {
  PayloadWriter w;
  w.PutU32(5);
  w.PutU8(1);
  const std::string payload = w.Finish();
  PayloadReader r(payload);
  uint32_t u32;
  uint64_t file_id = 99;
  ASSERT_TRUE(r.GetU32("count", &u32));
  EXPECT_FALSE(r.GetU64("file_id", &file_id));
  EXPECT_EQ(99u, file_id) << "a failed Get leaves its output alone";
  EXPECT_EQ(1u, r.remaining()) << "a failed Get consumes nothing";
  uint8_t u8;
  EXPECT_FALSE(r.GetU8("later", &u8)) << "errors are sticky";
  EXPECT_FALSE(r.done());
  const Status s = r.status();
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_NE(std::string::npos, s.message().find("'file_id'")) << s.ToString();
  EXPECT_NE(std::string::npos, s.message().find("byte 4")) << s.ToString();
  EXPECT_EQ(std::string::npos, s.message().find("later")) << s.ToString();
  EXPECT_EQ(s, r.Finish());
}

TEST(PayloadTest, TrailingBytesFailFinish) {
  const std::string payload("\x01\x02", 2);
  PayloadReader r(payload);
  uint8_t u8;
  ASSERT_TRUE(r.GetU8("x", &u8));
  EXPECT_TRUE(r.status().ok());
  EXPECT_FALSE(r.done());
  EXPECT_TRUE(r.Finish().IsCorruption());
  EXPECT_NE(std::string::npos, r.Finish().message().find("trailing")) << r.Finish().ToString();
}

TEST(PayloadTest, MalformedFieldsAreRejected) {
  struct Case {
    std::string input;
    int kind;  // 0 varint32, 1 varint64, 2 bytes, 3 status
  };
  const Case cases[] = {
      {"", 0},
      {"\x80", 0},                                          // truncated
      {"\xff\xff\xff\xff\x10", 0},                          // > UINT32_MAX
      {"\xff\xff\xff\xff\xff\x01", 0},                      // six bytes
      {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 1},      // > UINT64_MAX
      {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 1},  // eleven bytes
      {"\005abcd", 2},                                      // length beyond the end
      {"\xff\xff\xff\xff\x0f", 2},                          // 4 GiB length
      {std::string{static_cast<char>(Status::kMaxCode + 1), '\0'}, 3},  // unknown status code
      {"\001\003ab", 3},                                    // truncated message
  };
  for (const Case& c : cases) {
    PayloadReader r(c.input);
    uint32_t u32;
    uint64_t u64;
    std::string_view bytes;
    Status st;
    bool ok = true;
    switch (c.kind) {
      case 0:
        ok = r.GetVarint32("v", &u32);
        break;
      case 1:
        ok = r.GetVarint64("v", &u64);
        break;
      case 2:
        ok = r.GetBytes("v", &bytes);
        break;
      case 3:
        ok = r.GetStatus("v", &st);
        break;
    }
    EXPECT_FALSE(ok) << "kind " << c.kind << " input size " << c.input.size();
    EXPECT_TRUE(r.status().IsCorruption());
    EXPECT_EQ(c.input.size(), r.remaining());
  }
}

// One field of a randomly generated schema, with its value: the model for PayloadReader.
using Field = std::variant<uint8_t, uint16_t, uint32_t, uint64_t, std::pair<int, uint64_t>,
                           std::string, Status>;

Field RandomField(std::mt19937_64* rng) {
  const uint64_t v = (*rng)() >> ((*rng)() % 64);  // skewed towards small values
  switch ((*rng)() % 8) {
    case 0:
      return static_cast<uint8_t>(v);
    case 1:
      return static_cast<uint16_t>(v);
    case 2:
      return static_cast<uint32_t>(v);
    case 3:
      return v;
    case 4:
      return std::make_pair(32, static_cast<uint64_t>(static_cast<uint32_t>(v)));
    case 5:
      return std::make_pair(64, v);
    case 6:
      return RandomBytes(rng, (*rng)() % 200);
    default: {
      const auto code = static_cast<Status::Code>((*rng)() % (Status::kMaxCode + 1));
      if (code == Status::Code::kOk) return Status::OK();  // OK carries no message
      return Status(code, RandomBytes(rng, (*rng)() % 20));
    }
  }
}

void Write(const Field& f, PayloadWriter* w) {
  if (auto* p = std::get_if<uint8_t>(&f)) w->PutU8(*p);
  if (auto* p = std::get_if<uint16_t>(&f)) w->PutU16(*p);
  if (auto* p = std::get_if<uint32_t>(&f)) w->PutU32(*p);
  if (auto* p = std::get_if<uint64_t>(&f)) w->PutU64(*p);
  if (auto* p = std::get_if<std::pair<int, uint64_t>>(&f)) {
    if (p->first == 32) {
      w->PutVarint32(static_cast<uint32_t>(p->second));
    } else {
      w->PutVarint64(p->second);
    }
  }
  if (auto* p = std::get_if<std::string>(&f)) w->PutBytes(*p);
  if (auto* p = std::get_if<Status>(&f)) w->PutStatus(*p);
}

// Reads a field of the same kind as `model`; returns false if the reader failed.
bool Read(const Field& model, PayloadReader* r, Field* out) {
  bool ok = false;
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        T v{};
        if constexpr (std::is_same_v<T, uint8_t>) ok = r->GetU8("u8", &v);
        if constexpr (std::is_same_v<T, uint16_t>) ok = r->GetU16("u16", &v);
        if constexpr (std::is_same_v<T, uint32_t>) ok = r->GetU32("u32", &v);
        if constexpr (std::is_same_v<T, uint64_t>) ok = r->GetU64("u64", &v);
        if constexpr (std::is_same_v<T, std::pair<int, uint64_t>>) {
          v.first = m.first;
          uint32_t v32 = 0;
          ok = m.first == 32 ? r->GetVarint32("varint32", &v32)
                             : r->GetVarint64("varint64", &v.second);
          if (m.first == 32) v.second = v32;
        }
        if constexpr (std::is_same_v<T, std::string>) ok = r->GetString("bytes", &v);
        if constexpr (std::is_same_v<T, Status>) ok = r->GetStatus("status", &v);
        *out = v;
      },
      model);
  return ok;
}

TEST(PayloadTest, RandomizedAgainstModel) {
  std::mt19937_64 rng(TestSeed());
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<Field> model(rng() % 12);
    PayloadWriter w;
    for (Field& f : model) {
      f = RandomField(&rng);
      Write(f, &w);
    }
    const std::string payload = w.Finish();

    // The full payload reads back as the model.
    {
      PayloadReader r(payload);
      for (const Field& f : model) {
        Field got;
        ASSERT_TRUE(Read(f, &r, &got)) << r.status().ToString();
        ASSERT_TRUE(got == f);
      }
      ASSERT_TRUE(r.Finish().ok()) << r.Finish().ToString();
    }

    // Every truncation fails somewhere, cleanly.
    for (size_t len = 0; len < payload.size(); ++len) {
      PayloadReader r(std::string_view(payload).substr(0, len));
      bool all_ok = true;
      for (const Field& f : model) {
        Field got;
        all_ok = all_ok && Read(f, &r, &got);
      }
      EXPECT_FALSE(all_ok && r.Finish().ok()) << "len " << len;
      EXPECT_TRUE(r.Finish().IsCorruption());
    }

    // As a message: round trip, then random damage is caught.
    const uint16_t type = static_cast<uint16_t>(rng());
    const uint64_t id = rng();
    const uint8_t flags = static_cast<uint8_t>(rng() % (kKnownFlags + 1));
    const std::string m = EncodeMessage(type, id, payload, flags);
    MessageHeader h;
    std::string_view got;
    DecodeOk(m, &h, &got);
    ASSERT_EQ(payload, got);
    ASSERT_EQ(type, h.type);
    ASSERT_EQ(id, h.request_id);
    ASSERT_EQ(flags, h.flags);
    for (int k = 0; k < 20; ++k) {
      std::string bad = m;
      const int damage = 1 + static_cast<int>(rng() % 3);
      for (int d = 0; d < damage; ++d) {
        bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      if (bad == m) continue;
      Status s = DecodeMessage(bad, &h, &got, kNoLimit);
      ASSERT_FALSE(s.ok()) << "damaged message decoded";
    }
  }
}

}  // namespace
}  // namespace nova::wire
