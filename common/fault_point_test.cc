#include "common/fault_point.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/clock.h"

namespace nova {
namespace {

// Fault points are process-wide: every test starts and ends with none armed.
class FaultPointTest : public ::testing::Test {
 protected:
  void SetUp() override { FaultPoints::DisarmAll(); }
  void TearDown() override { FaultPoints::DisarmAll(); }
};

TEST_F(FaultPointTest, UnarmedIsOk) {
  EXPECT_FALSE(FaultPoints::AnyArmed());
  EXPECT_TRUE(MAYBE_FAULT("test.point").ok());
  MAYBE_FAULT_VOID("test.point");
  EXPECT_EQ(FaultPoints::HitCount("test.point"), 0u);
  ASSERT_TRUE(FaultPoints::Arm("").ok());
  EXPECT_FALSE(FaultPoints::AnyArmed());
}

TEST_F(FaultPointTest, ErrorFiresEveryTime) {
  ASSERT_TRUE(FaultPoints::Arm("test.point=error").ok());
  EXPECT_TRUE(FaultPoints::AnyArmed());
  for (int i = 0; i < 3; ++i) {
    Status s = MAYBE_FAULT("test.point");
    EXPECT_EQ(s.code(), Status::Code::kIOError);
    EXPECT_EQ(s.message(), "injected fault at test.point");
  }
  EXPECT_TRUE(MAYBE_FAULT("test.other_point").ok());
  EXPECT_EQ(FaultPoints::HitCount("test.point"), 3u);
  EXPECT_EQ(FaultPoints::FireCount("test.point"), 3u);
  EXPECT_EQ(FaultPoints::HitCount("test.other_point"), 0u);
}

TEST_F(FaultPointTest, Once) {
  ASSERT_TRUE(FaultPoints::Arm("test.point=error:once").ok());
  EXPECT_FALSE(MAYBE_FAULT("test.point").ok());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(MAYBE_FAULT("test.point").ok());
  EXPECT_EQ(FaultPoints::HitCount("test.point"), 6u);
  EXPECT_EQ(FaultPoints::FireCount("test.point"), 1u);
}

TEST_F(FaultPointTest, AfterLetsHitsPassFirst) {
  ASSERT_TRUE(FaultPoints::Arm("test.point=error:after=3").ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(MAYBE_FAULT("test.point").ok()) << i;
  EXPECT_FALSE(MAYBE_FAULT("test.point").ok());
  EXPECT_FALSE(MAYBE_FAULT("test.point").ok());

  // Combined with once: exactly hit 3 + 1 fails.
  ASSERT_TRUE(FaultPoints::Arm("test.point=error:after=2:once").ok());
  EXPECT_EQ(FaultPoints::HitCount("test.point"), 0u);  // re-arming resets the counts
  EXPECT_TRUE(MAYBE_FAULT("test.point").ok());
  EXPECT_TRUE(MAYBE_FAULT("test.point").ok());
  EXPECT_FALSE(MAYBE_FAULT("test.point").ok());
  EXPECT_TRUE(MAYBE_FAULT("test.point").ok());
}

TEST_F(FaultPointTest, Probability) {
  constexpr int kHits = 10000;
  ASSERT_TRUE(FaultPoints::Arm("test.never=error:p=0,test.always=error:p=1,"
                               "test.tenth=error:p=0.1")
                  .ok());
  int tenth_fired = 0;
  for (int i = 0; i < kHits; ++i) {
    EXPECT_TRUE(MAYBE_FAULT("test.never").ok());
    EXPECT_FALSE(MAYBE_FAULT("test.always").ok());
    if (!MAYBE_FAULT("test.tenth").ok()) ++tenth_fired;
  }
  // Binomial(10000, 0.1): mean 1000, standard deviation 30; the generator is seeded from
  // the point's name, so this count is the same on every run.
  EXPECT_GT(tenth_fired, 850);
  EXPECT_LT(tenth_fired, 1150);
  EXPECT_EQ(FaultPoints::FireCount("test.tenth"), static_cast<uint64_t>(tenth_fired));
  EXPECT_EQ(FaultPoints::FireCount("test.never"), 0u);
}

TEST_F(FaultPointTest, DelaySleepsThenSucceeds) {
  constexpr auto kDelay = std::chrono::milliseconds(30);
  ASSERT_TRUE(FaultPoints::Arm("test.slow=delay:30ms,test.slow_void=delay:30ms:once").ok());
  MonoTime start = MonoNow();
  EXPECT_TRUE(MAYBE_FAULT("test.slow").ok());
  EXPECT_GE(MonoNow() - start, kDelay);

  start = MonoNow();
  MAYBE_FAULT_VOID("test.slow_void");
  EXPECT_GE(MonoNow() - start, kDelay);
  EXPECT_EQ(FaultPoints::FireCount("test.slow_void"), 1u);
}

TEST_F(FaultPointTest, ErrorAtAVoidPointHasNoEffect) {
  ASSERT_TRUE(FaultPoints::Arm("test.point=error").ok());
  MAYBE_FAULT_VOID("test.point");
  MAYBE_FAULT_VOID("test.point");
  EXPECT_EQ(FaultPoints::HitCount("test.point"), 2u);
}

TEST_F(FaultPointTest, DisarmOneOrAll) {
  ASSERT_TRUE(FaultPoints::Arm("test.a=error,test.b=error").ok());
  FaultPoints::Disarm("test.a");
  FaultPoints::Disarm("test.not_armed");
  EXPECT_TRUE(MAYBE_FAULT("test.a").ok());
  EXPECT_FALSE(MAYBE_FAULT("test.b").ok());
  EXPECT_TRUE(FaultPoints::AnyArmed());
  FaultPoints::Disarm("test.b");
  EXPECT_FALSE(FaultPoints::AnyArmed());
  EXPECT_TRUE(MAYBE_FAULT("test.b").ok());

  ASSERT_TRUE(FaultPoints::Arm("test.a=error").ok());
  ASSERT_TRUE(FaultPoints::Arm("test.b=error").ok());  // a second Arm adds to the first
  EXPECT_FALSE(MAYBE_FAULT("test.a").ok());
  FaultPoints::DisarmAll();
  EXPECT_FALSE(FaultPoints::AnyArmed());
  EXPECT_TRUE(MAYBE_FAULT("test.a").ok());
  EXPECT_EQ(FaultPoints::HitCount("test.a"), 0u);
}

TEST_F(FaultPointTest, BadSpecsAreRejectedWithTheReason) {
  struct Case {
    const char* spec;
    const char* reason;
  };
  const Case kCases[] = {
      {"test.point", "expected <name>=<action>"},
      {"=error", "name must be"},
      {"a b=error", "name must be"},
      {"test.point=", "unknown action ''"},
      {"test.point=explode", "unknown action 'explode'"},
      {"test.point=delay", "delay needs a duration"},
      {"test.point=delay:abc", "delay needs a duration"},
      {"test.point=delay:10", "delay needs a duration"},
      {"test.point=delay:-5ms", "delay needs a duration"},
      {"test.point=error:p=1.5", "p= needs a probability"},
      {"test.point=error:p=-0.1", "p= needs a probability"},
      {"test.point=error:p=nan", "p= needs a probability"},
      {"test.point=error:p=", "p= needs a probability"},
      {"test.point=error:after=-1", "after= needs a hit count"},
      {"test.point=error:after=x", "after= needs a hit count"},
      {"test.point=error:sometimes", "unknown option 'sometimes'"},
      {"test.a=error,,test.b=error", "empty entry"},
      {"test.a=error,", "empty entry"},
      {"test.a=error,test.a=abort", "armed twice"},
  };
  for (const Case& c : kCases) {
    Status s = FaultPoints::Arm(c.spec);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.spec;
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << c.spec << " -> " << s.ToString();
  }
  // A spec with one bad entry arms none of its good ones.
  EXPECT_FALSE(FaultPoints::Arm("test.good=error,test.bad=explode").ok());
  EXPECT_FALSE(FaultPoints::AnyArmed());
  EXPECT_TRUE(MAYBE_FAULT("test.good").ok());
}

TEST_F(FaultPointTest, SpecFromTheFlagDocumentation) {
  ASSERT_TRUE(FaultPoints::Arm("stoc.storage.delay=delay:200ms,ltc.flush=error,"
                               "logc.append=error:once,stoc.crash=abort,x=error:p=0.1")
                  .ok());
  EXPECT_FALSE(MAYBE_FAULT("ltc.flush").ok());
  ASSERT_TRUE(FaultPoints::Arm(" a=delay:1s:once , b=error:after=0:p=0.5 ").ok());
}

TEST_F(FaultPointTest, AbortExitsWithTheFaultExitCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Armed inside the child only: the parent test process stays unarmed.
  EXPECT_EXIT(
      {
        if (FaultPoints::Arm("test.crash=abort:after=1").ok()) {
          if (MAYBE_FAULT("test.crash").ok()) MAYBE_FAULT("test.crash").IgnoreError();
        }
      },
      ::testing::ExitedWithCode(kFaultExitCode), "fault point abort at test.crash");
  EXPECT_EXIT(
      {
        if (FaultPoints::Arm("test.crash_void=abort").ok()) MAYBE_FAULT_VOID("test.crash_void");
      },
      ::testing::ExitedWithCode(kFaultExitCode), "fault point abort at test.crash_void");
  EXPECT_FALSE(FaultPoints::AnyArmed());
}

}  // namespace
}  // namespace nova
