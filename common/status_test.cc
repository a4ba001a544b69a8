#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <string>

#include "common/coding.h"

namespace nova {
namespace {

Status::Code CodeOf(uint8_t c) { return static_cast<Status::Code>(c); }

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(Status::Code::kOk, s.code());
  EXPECT_EQ("", s.message());
  EXPECT_EQ("OK", s.ToString());
  EXPECT_EQ(Status::OK(), s);
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status s;
    Status::Code code;
    const char* name;
  };
  const Case cases[] = {
      {Status::NotFound("m"), Status::Code::kNotFound, "NotFound"},
      {Status::Corruption("m"), Status::Code::kCorruption, "Corruption"},
      {Status::NotSupported("m"), Status::Code::kNotSupported, "NotSupported"},
      {Status::InvalidArgument("m"), Status::Code::kInvalidArgument, "InvalidArgument"},
      {Status::IOError("m"), Status::Code::kIOError, "IOError"},
      {Status::NetworkError("m"), Status::Code::kNetworkError, "NetworkError"},
      {Status::TimedOut("m"), Status::Code::kTimedOut, "TimedOut"},
      {Status::ResourceExhausted("m"), Status::Code::kResourceExhausted, "ResourceExhausted"},
      {Status::PermissionDenied("m"), Status::Code::kPermissionDenied, "PermissionDenied"},
      {Status::Unavailable("m"), Status::Code::kUnavailable, "Unavailable"},
      {Status::Aborted("m"), Status::Code::kAborted, "Aborted"},
      {Status::WrongRange("m"), Status::Code::kWrongRange, "WrongRange"},
      {Status::AlreadyExists("m"), Status::Code::kAlreadyExists, "AlreadyExists"},
      {Status::IllegalState("m"), Status::Code::kIllegalState, "IllegalState"},
      {Status::OutOfRange("m"), Status::Code::kOutOfRange, "OutOfRange"},
      {Status::Fenced("m"), Status::Code::kFenced, "Fenced"},
  };
  static_assert(sizeof(cases) / sizeof(cases[0]) == Status::kMaxCode, "one case per code");
  std::set<std::string> names;
  for (const Case& c : cases) {
    EXPECT_FALSE(c.s.ok()) << c.name;
    EXPECT_EQ(c.code, c.s.code()) << c.name;
    EXPECT_EQ("m", c.s.message());
    EXPECT_STREQ(c.name, Status::CodeName(c.code));
    EXPECT_EQ(std::string(c.name) + ": m", c.s.ToString());
    names.insert(c.name);
  }
  EXPECT_EQ(static_cast<size_t>(Status::kMaxCode), names.size()) << "names are distinct";
}

TEST(StatusTest, Predicates) {
  EXPECT_TRUE(Status::NotFound("").IsNotFound());
  EXPECT_TRUE(Status::Corruption("").IsCorruption());
  EXPECT_TRUE(Status::NetworkError("").IsNetworkError());
  EXPECT_TRUE(Status::Unavailable("").IsUnavailable());
  EXPECT_TRUE(Status::ResourceExhausted("").IsResourceExhausted());
  EXPECT_TRUE(Status::PermissionDenied("").IsPermissionDenied());
  EXPECT_TRUE(Status::OutOfRange("").IsOutOfRange());
  EXPECT_TRUE(Status::Fenced("").IsFenced());
  EXPECT_TRUE(Status::WrongRange("").IsWrongRange());
  EXPECT_TRUE(Status::TimedOut("").IsTimedOut());
  EXPECT_FALSE(Status::NotFound("").IsCorruption());
  EXPECT_FALSE(Status::OK().IsNotFound());
}

TEST(StatusTest, CodeBeyondMaxIsNamedUnknown) {
  EXPECT_STREQ("Unknown", Status::CodeName(CodeOf(Status::kMaxCode + 1)));
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(Status::NotFound("a"), Status::NotFound("a"));
  EXPECT_FALSE(Status::NotFound("a") == Status::NotFound("b"));
  EXPECT_FALSE(Status::NotFound("a") == Status::Corruption("a"));
}

TEST(StatusTest, Prepend) {
  const Status s = Status::IOError("disk gone").Prepend("writing table 7");
  EXPECT_EQ(Status::Code::kIOError, s.code());
  EXPECT_EQ("writing table 7: disk gone", s.message());
  EXPECT_EQ("IOError: writing table 7: disk gone", s.ToString());
  EXPECT_EQ("flush: writing table 7: disk gone", s.Prepend("flush").message());
  EXPECT_TRUE(Status::OK().Prepend("context").ok());
  EXPECT_EQ("", Status::OK().Prepend("context").message());
}

TEST(StatusTest, FromErrno) {
  const Status s = Status::FromErrno("open /x", ENOENT);
  EXPECT_EQ(Status::Code::kIOError, s.code());
  EXPECT_EQ(0u, s.message().find("open /x: ")) << s.message();
  EXPECT_GT(s.message().size(), std::string("open /x: ").size());
  EXPECT_TRUE(Status::FromErrno("write", ENOSPC).IsResourceExhausted());
  EXPECT_TRUE(Status::FromErrno("write", EDQUOT).IsResourceExhausted());
}

Status ReturnsEarly(bool fail, int* reached) {
  NOVA_RETURN_NOT_OK(fail ? Status::NotFound("x") : Status::OK());
  ++*reached;
  NOVA_RETURN_NOT_OK_PREPEND(fail ? Status::OK() : Status::Corruption("y"), "step 2");
  ++*reached;
  return Status::OK();
}

TEST(StatusTest, ReturnMacros) {
  int reached = 0;
  EXPECT_EQ(Status::NotFound("x"), ReturnsEarly(true, &reached));
  EXPECT_EQ(0, reached);
  EXPECT_EQ(Status::Corruption("step 2: y"), ReturnsEarly(false, &reached));
  EXPECT_EQ(1, reached);
}

TEST(StatusTest, ResultHoldsValueOrError) {
  Result<int> r(5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(5, r.value());
  EXPECT_EQ(5, *r);
  EXPECT_TRUE(r.status().ok());

  Result<std::string> e(Status::NotFound("gone"));
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(Status::NotFound("gone"), e.status());

  // OK without a value is a programming error that must not look like success.
  Result<int> bad{Status::OK()};
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(Status::Code::kIllegalState, bad.status().code());
}

TEST(StatusTest, WireRoundTripOfEveryCode) {
  for (uint8_t c = 0; c <= Status::kMaxCode; ++c) {
    for (const std::string& msg :
         {std::string(), std::string("msg"), std::string(300, 'x'), std::string("a\0b", 3)}) {
      const Status s = c == 0 ? Status::OK() : Status(CodeOf(c), msg);
      std::string buf = "prefix";
      s.EncodeTo(&buf);
      buf += "suffix";
      std::string_view in(buf);
      in.remove_prefix(6);
      Status out = Status::Aborted("sentinel");
      ASSERT_TRUE(Status::DecodeFrom(&in, &out)) << int(c);
      EXPECT_EQ(s, out);
      EXPECT_EQ("suffix", in) << "DecodeFrom consumes exactly the encoding";
    }
  }
}

TEST(StatusTest, OkWithMessageEncodesAsPlainOk) {
  std::string buf;
  Status(Status::Code::kOk, "ignored").EncodeTo(&buf);
  EXPECT_EQ(std::string("\x00\x00", 2), buf);
  std::string_view in(buf);
  Status out = Status::Aborted("sentinel");
  ASSERT_TRUE(Status::DecodeFrom(&in, &out));
  EXPECT_EQ(Status::OK(), out);
}

TEST(StatusTest, WireFormat) {
  std::string buf;
  Status::WrongRange("ab").EncodeTo(&buf);
  EXPECT_EQ(std::string("\014\002ab"), buf);
}

TEST(StatusTest, MalformedEncodingsAreRejected) {
  std::string valid;
  Status::Unavailable("shutting down").EncodeTo(&valid);
  const Status sentinel = Status::Aborted("sentinel");

  // Every truncation of a valid encoding.
  for (size_t len = 0; len < valid.size(); ++len) {
    std::string_view in(valid.data(), len);
    Status out = sentinel;
    EXPECT_FALSE(Status::DecodeFrom(&in, &out)) << len;
    EXPECT_EQ(len, in.size()) << "input untouched on failure";
    EXPECT_EQ(sentinel, out) << "output untouched on failure";
  }

  const std::string bad[] = {
      std::string{static_cast<char>(Status::kMaxCode + 1), '\0'},  // code beyond kMaxCode
      std::string("\xff\x00", 2),                  // code 255
      std::string("\x00\x01x", 3),                 // OK with a message: never encoded
      std::string("\x02\x80"),                     // truncated length varint
      std::string("\x02\xff\xff\xff\xff\x1f"),     // overlong length varint
      std::string("\002\377\377\377\377\017abc"),  // 4 GiB length, 3 bytes present
  };
  for (const std::string& b : bad) {
    std::string_view in(b);
    Status out = sentinel;
    EXPECT_FALSE(Status::DecodeFrom(&in, &out)) << b.size();
    EXPECT_EQ(b.size(), in.size());
    EXPECT_EQ(sentinel, out);
  }
}

}  // namespace
}  // namespace nova
