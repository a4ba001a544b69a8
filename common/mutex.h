// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with the
// annotations of common/thread_annotations.h (and SharedMutex with WriterMutexLock and
// ReaderMutexLock: std::shared_mutex, for state read far more often than written), so that clang
// checks GUARDED_BY / REQUIRES / EXCLUDES against the locks actually held.
//
//   Mutex mu_;
//   std::deque<Job> queue_ GUARDED_BY(mu_);
//   CondVar cv_;
//
//   void Push(Job j) EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     queue_.push_back(std::move(j));
//     cv_.NotifyOne();
//   }
//   Job Pop() EXCLUDES(mu_) {
//     MutexLock lock(&mu_);
//     cv_.Wait(&lock, [&]() REQUIRES(mu_) { return !queue_.empty(); });
//     ...
//   }
//
// Thread safety: as std::mutex, std::shared_mutex and std::condition_variable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "common/thread_annotations.h"

namespace nova {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds the lock (where it cannot see it: a callback
  // documented to run under it). Checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, except around Unlock()/Lock() and while
// a CondVar waits with it.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->mu_) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases and takes the lock again in the middle of a scope (e.g. around slow I/O).
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A condition variable used with a MutexLock. Waits release the lock while blocked and
// hold it again when they return (the analysis treats the lock as held throughout).
class CondVar {
 public:
  void Wait(MutexLock* lock) { cv_.wait(lock->lock_); }
  template <typename Predicate>
  void Wait(MutexLock* lock, Predicate done) {
    cv_.wait(lock->lock_, done);
  }
  // False on timeout.
  template <typename Rep, typename Period>
  bool WaitFor(MutexLock* lock, std::chrono::duration<Rep, Period> timeout) {
    return cv_.wait_for(lock->lock_, timeout) == std::cv_status::no_timeout;
  }
  // False if `done` is still false after `timeout`.
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(MutexLock* lock, std::chrono::duration<Rep, Period> timeout, Predicate done) {
    return cv_.wait_for(lock->lock_, timeout, done);
  }
  template <typename Clock, typename Duration>
  bool WaitUntil(MutexLock* lock, std::chrono::time_point<Clock, Duration> deadline) {
    return cv_.wait_until(lock->lock_, deadline) == std::cv_status::no_timeout;
  }
  template <typename Clock, typename Duration, typename Predicate>
  bool WaitUntil(MutexLock* lock, std::chrono::time_point<Clock, Duration> deadline,
                 Predicate done) {
    return cv_.wait_until(lock->lock_, deadline, done);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A reader/writer lock: many holders in shared mode (ReaderMutexLock) or one in exclusive
// mode (WriterMutexLock). Members it guards are read under either and written only under
// the exclusive mode (GUARDED_BY checks both).
class CAPABILITY("mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds `mu` exclusively from construction to destruction.
class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds `mu` in shared mode from construction to destruction.
class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderMutexLock() RELEASE() { mu_->UnlockShared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace nova
