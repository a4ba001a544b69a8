// A fixed set of worker threads running tasks from a bounded FIFO queue.
//
// The queue is bounded so that a component that produces work faster than it can be
// done learns so (ResourceExhausted) and can push back on its callers, instead of
// growing without limit. Tasks return nothing and must not throw (an escaping exception
// terminates the process, as everywhere in Nova); a task reports its outcome itself.
//
//   ThreadPool pool("ltc-flush", 4, 1024);
//   NOVA_RETURN_NOT_OK(pool.Submit([this] { FlushOne(); }));
//   ...
//   pool.Shutdown();  // runs what is queued, then joins
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace nova {

// Thread-safe: every method may be called concurrently from any thread, except that
// Shutdown() (and so the destructor) must not be called from one of the pool's own
// workers.
class ThreadPool {
 public:
  // Starts `num_threads` workers named "<name>-<i>" (truncated to the 15 characters
  // Linux allows). The queue holds at most `max_queue` tasks waiting for a worker (tasks
  // being run do not count). Failing to create a thread aborts the process (std::thread
  // throws): a daemon that cannot start its workers cannot run.
  // REQUIRES: num_threads >= 1, max_queue >= 1
  ThreadPool(std::string name, size_t num_threads, size_t max_queue);
  // Calls Shutdown().
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on a worker. Returns OK if queued; ResourceExhausted if
  // max_queue tasks are already waiting (the task is dropped: retry later or push back);
  // Aborted once Shutdown() has begun. Tasks start in submission order.
  Status Submit(std::function<void()> task) EXCLUDES(mu_);

  // Drains and stops the pool: Submit() fails with Aborted from now on (also for tasks
  // that queued tasks submit), every task already queued still runs, then the workers
  // are joined. Returns when all have finished. Idempotent; concurrent callers all wait
  // for the drain.
  // REQUIRES: not called from one of this pool's workers (it would wait for itself).
  void Shutdown() EXCLUDES(join_mu_, mu_);

  // Number of tasks waiting for a worker (not counting running ones).
  size_t queue_depth() const EXCLUDES(mu_);
  size_t num_threads() const { return workers_.size(); }
  const std::string& name() const { return name_; }

 private:
  void WorkerLoop() EXCLUDES(mu_);

  // Constant after construction.
  const std::string name_;
  const size_t max_queue_;
  std::vector<std::thread> workers_;  // joined by Shutdown() under join_mu_

  // Lock order: join_mu_ before mu_.
  Mutex join_mu_ ACQUIRED_BEFORE(mu_);  // held while joining workers, so concurrent
                                        // Shutdowns all wait
  mutable Mutex mu_;
  CondVar work_cv_;  // signalled when a task is queued or on shutdown
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool shutting_down_ GUARDED_BY(mu_) = false;
  bool joined_ GUARDED_BY(join_mu_) = false;
};

// Runs every job of `jobs` and returns once all have finished: jobs[0] on the calling thread,
// the others on `pool`, each one the pool refuses (queue full, shutting down) on the calling
// thread too. With a null pool, all run on the calling thread, one after another.
// REQUIRES: not called from one of `pool`'s workers when the pool may be saturated by such
// callers (they would wait for each other); jobs must not throw.
void RunAll(ThreadPool* pool, const std::vector<std::function<void()>>& jobs);

}  // namespace nova
