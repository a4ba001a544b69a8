#include "logc/client/log_mode.h"

#include <gtest/gtest.h>

namespace nova::logc {
namespace {

TEST(LogModeTest, NamesRoundTrip) {
  for (LogMode m : {LogMode::kNone, LogMode::kMemory, LogMode::kDisk, LogMode::kMemoryDisk}) {
    LogMode parsed = LogMode::kNone;
    ASSERT_TRUE(ParseLogMode(LogModeName(m), &parsed).ok()) << LogModeName(m);
    EXPECT_EQ(parsed, m);
  }
  EXPECT_STREQ(LogModeName(LogMode::kMemoryDisk), "memory+disk");
}

TEST(LogModeTest, UnknownNamesAreRefusedWithTheAcceptedValues) {
  LogMode m = LogMode::kDisk;
  for (const char* bad : {"", "Memory", "mem", "memory+", "disk+memory", "none "}) {
    Status s = ParseLogMode(bad, &m);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("memory+disk"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(m, LogMode::kDisk);  // unchanged
}

TEST(LogModeTest, PersistsOnlyForDiskModes) {
  EXPECT_FALSE(Persists(LogMode::kNone));
  EXPECT_FALSE(Persists(LogMode::kMemory));
  EXPECT_TRUE(Persists(LogMode::kDisk));
  EXPECT_TRUE(Persists(LogMode::kMemoryDisk));
}

}  // namespace
}  // namespace nova::logc
