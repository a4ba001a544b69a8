// Compiled by tests/check_thread_safety.sh, once as is (must compile) and once with
// NOVA_PROBE_UNLOCKED (must fail): shows that clang's thread-safety analysis checks the
// annotations of common/mutex.h.
#include "common/mutex.h"

namespace {

class Counter {
 public:
  void Add(int n) EXCLUDES(mu_) {
#ifdef NOVA_PROBE_UNLOCKED
    count_ += n;  // no lock: the analysis must reject this
#else
    nova::MutexLock lock(&mu_);
    count_ += n;
    cv_.NotifyAll();
#endif
  }
  int WaitForAtLeast(int n) EXCLUDES(mu_) {
    nova::MutexLock lock(&mu_);
    cv_.Wait(&lock, [&]() REQUIRES(mu_) { return count_ >= n; });
    return count_;
  }

 private:
  nova::Mutex mu_;
  nova::CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
};

}  // namespace

int main() {
  Counter c;
  c.Add(1);
  return c.WaitForAtLeast(1) == 1 ? 0 : 1;
}
