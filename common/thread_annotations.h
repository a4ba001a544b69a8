// Clang's thread-safety analysis (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
// annotations on members and functions that say which lock protects what, checked at
// compile time by clang with -Wthread-safety (CI's sanitizer builds, -Werror). Other
// compilers ignore them.
//
//   class Foo {
//     void Bar() EXCLUDES(mu_);           // takes mu_ itself
//     void BazLocked() REQUIRES(mu_);     // the caller holds mu_
//     Mutex mu_;
//     int count_ GUARDED_BY(mu_) = 0;     // read and written only under mu_
//   };
//
// The analysis sees locks of common/mutex.h's Mutex (std::mutex carries no annotations in
// libstdc++).
#pragma once

#if defined(__clang__)
#define NOVA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define NOVA_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) NOVA_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY NOVA_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) NOVA_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) NOVA_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) NOVA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) NOVA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) NOVA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) NOVA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) NOVA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) NOVA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) NOVA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) NOVA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) NOVA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) NOVA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) NOVA_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) NOVA_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS NOVA_THREAD_ANNOTATION(no_thread_safety_analysis)
