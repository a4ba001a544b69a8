#include "coordinator/ltc_status.h"

#include <gtest/gtest.h>

namespace nova::coordinator {
namespace {

TEST(LtcStatusTest, RoundTripAndTheDocumentedFormat) {
  LtcStatus s;
  s.config_epoch = 42;
  s.copies_to_move = {{"3", 12}, {"5", 0}};
  s.copies_at_risk = 12;
  s.tables_relocated = 7;
  s.bytes_relocated = 123456;
  s.relocation_failures = 1;
  auto parsed = LtcStatus::FromJson(s.ToJson());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed.value(), s);
  // The example of docs/coordinator.md parses to the same figures.
  parsed = LtcStatus::FromJson(
      R"({"config_epoch": 42, "copies_to_move": {"3": 12, "5": 0}, "copies_at_risk": 12,
          "tables_relocated": 7, "bytes_relocated": 123456, "relocation_failures": 1})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed.value(), s);
  EXPECT_EQ(parsed->CopiesToMove("3"), 12u);
  EXPECT_EQ(parsed->CopiesToMove("03"), 12u);  // the LTC's number of StoC id "03"
  EXPECT_EQ(parsed->CopiesToMove("5"), 0u);
  EXPECT_EQ(parsed->CopiesToMove("9"), 0u);  // absent: none
}

TEST(LtcStatusTest, AbsentAndUnknownFieldsAndBadInput) {
  auto parsed = LtcStatus::FromJson(R"({"config_epoch": 3, "later_field": [1]})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->config_epoch, 3u);
  EXPECT_TRUE(parsed->copies_to_move.empty());
  for (const char* bad : {"", "[]", "{not json", R"({"config_epoch": -1})",
                          R"({"config_epoch": "3"})", R"({"copies_to_move": [1]})",
                          R"({"copies_to_move": {"3": "x"}})", R"({"bytes_relocated": 1.5})"}) {
    EXPECT_EQ(LtcStatus::FromJson(bad).status().code(), Status::Code::kCorruption) << bad;
  }
}

TEST(LtcStatusTest, StocNumberKey) {
  EXPECT_EQ(StocNumberKey("3"), "3");
  EXPECT_EQ(StocNumberKey("007"), "7");
  EXPECT_EQ(StocNumberKey("stoc-1"), "stoc-1");
  EXPECT_EQ(StocNumberKey(""), "");
}

}  // namespace
}  // namespace nova::coordinator
