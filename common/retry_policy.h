// RetryPolicy and Backoff: when a failed operation is tried again. Which errors another
// attempt may cure, and exponential backoff (initial_backoff doubling up to max_backoff)
// that never waits past the operation's deadline. The client library's routed calls and
// its batched writes both retry by it.
//
//   Backoff backoff(policy);
//   for (;;) {
//     Status s = Attempt();
//     if (s.ok() || !RetryPolicy::Retryable(s) || deadline.Expired()) return s;
//     std::this_thread::sleep_until(backoff.NextAttempt(deadline));
//   }
//
// Thread safety: RetryPolicy is a value; a Backoff belongs to one operation.
#pragma once

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/status.h"

namespace nova {

struct RetryPolicy {
  std::chrono::milliseconds initial_backoff{5};
  std::chrono::milliseconds max_backoff{500};

  // Errors another attempt may cure: a stale route (WrongRange), a lost or refused
  // connection (NetworkError), a server that cannot serve now (Unavailable) or gave the
  // request up (Aborted).
  static bool Retryable(const Status& s) {
    return s.IsWrongRange() || s.IsNetworkError() || s.IsUnavailable() ||
           s.code() == Status::Code::kAborted;
  }
};

class Backoff {
 public:
  explicit Backoff(const RetryPolicy& policy) : policy_(policy) {}

  // The wait before the next attempt: initial_backoff the first time, then twice the
  // previous one; never more than max_backoff.
  std::chrono::milliseconds Next() {
    const std::chrono::milliseconds next =
        last_.count() == 0 ? policy_.initial_backoff : last_ * 2;
    last_ = std::min(policy_.max_backoff, next);
    return last_;
  }

  // When the next attempt may start: now + Next(), but not after `deadline`.
  MonoTime NextAttempt(const Deadline& deadline) {
    return std::min(MonoNow() + Next(), deadline.when());
  }

 private:
  RetryPolicy policy_;
  std::chrono::milliseconds last_{0};
};

}  // namespace nova
