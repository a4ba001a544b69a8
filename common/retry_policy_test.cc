// RetryPolicy and Backoff: the backoff doubles from the initial wait up to the cap, an
// attempt is never scheduled past the deadline, and which errors are retried.
#include "common/retry_policy.h"

#include <gtest/gtest.h>

namespace nova {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCap) {
  RetryPolicy p;
  p.initial_backoff = milliseconds(5);
  p.max_backoff = milliseconds(30);
  Backoff b(p);
  EXPECT_EQ(b.Next(), milliseconds(5));
  EXPECT_EQ(b.Next(), milliseconds(10));
  EXPECT_EQ(b.Next(), milliseconds(20));
  EXPECT_EQ(b.Next(), milliseconds(30));
  EXPECT_EQ(b.Next(), milliseconds(30));
}

TEST(BackoffTest, InitialWaitIsCappedToo) {
  RetryPolicy p;
  p.initial_backoff = milliseconds(100);
  p.max_backoff = milliseconds(40);
  Backoff b(p);
  EXPECT_EQ(b.Next(), milliseconds(40));
  EXPECT_EQ(b.Next(), milliseconds(40));
}

TEST(BackoffTest, NeverPastTheDeadline) {
  RetryPolicy p;
  p.initial_backoff = milliseconds(10000);
  p.max_backoff = milliseconds(10000);
  Backoff b(p);
  const Deadline soon = Deadline::After(milliseconds(50));
  EXPECT_EQ(b.NextAttempt(soon), soon.when());
  const MonoTime before = MonoNow();
  const MonoTime at = b.NextAttempt(Deadline::Never());
  EXPECT_GE(at - before, milliseconds(10000));
}

TEST(RetryPolicyTest, RetryableErrors) {
  EXPECT_TRUE(RetryPolicy::Retryable(Status::WrongRange("moved")));
  EXPECT_TRUE(RetryPolicy::Retryable(Status::NetworkError("lost")));
  EXPECT_TRUE(RetryPolicy::Retryable(Status::Unavailable("later")));
  EXPECT_TRUE(RetryPolicy::Retryable(Status::Aborted("gave up")));
  EXPECT_FALSE(RetryPolicy::Retryable(Status::InvalidArgument("bad")));
  EXPECT_FALSE(RetryPolicy::Retryable(Status::NotFound("none")));
  EXPECT_FALSE(RetryPolicy::Retryable(Status::TimedOut("late")));
  EXPECT_FALSE(RetryPolicy::Retryable(Status::Corruption("bits")));
}

}  // namespace
}  // namespace nova
