#include "common/thread_pool.h"

#include <glog/logging.h>
#include <pthread.h>

#include <algorithm>
#include <memory>

namespace nova {

namespace {

// Linux thread names hold 15 characters plus the terminating NUL.
constexpr size_t kMaxThreadNameChars = 15;

}  // namespace

ThreadPool::ThreadPool(std::string name, size_t num_threads, size_t max_queue)
    : name_(std::move(name)), max_queue_(max_queue) {
  CHECK_GE(num_threads, 1u) << "thread pool " << name_;
  CHECK_GE(max_queue, 1u) << "thread pool " << name_;
  workers_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    std::string thread_name = name_ + "-" + std::to_string(i);
    thread_name.resize(std::min(thread_name.size(), kMaxThreadNameChars));
    // Best effort: a thread without a name works just the same.
    pthread_setname_np(workers_.back().native_handle(), thread_name.c_str());
  }
}

ThreadPool::~ThreadPool() { Shutdown(); }

Status ThreadPool::Submit(std::function<void()> task) {
  {
    MutexLock l(&mu_);
    if (shutting_down_) return Status::Aborted("thread pool " + name_ + " is shut down");
    if (queue_.size() >= max_queue_) {
      return Status::ResourceExhausted("thread pool " + name_ + " queue is full (" +
                                       std::to_string(max_queue_) + " tasks)");
    }
    queue_.push_back(std::move(task));
  }
  work_cv_.NotifyOne();
  return Status::OK();
}

void ThreadPool::Shutdown() {
  for (const std::thread& t : workers_) {
    CHECK(t.get_id() != std::this_thread::get_id())
        << "thread pool " << name_ << " shut down from its own worker";
  }
  MutexLock jl(&join_mu_);
  if (joined_) return;
  {
    MutexLock l(&mu_);
    shutting_down_ = true;
  }
  work_cv_.NotifyAll();
  for (std::thread& t : workers_) t.join();
  joined_ = true;
}

size_t ThreadPool::queue_depth() const {
  MutexLock l(&mu_);
  return queue_.size();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock l(&mu_);
      work_cv_.Wait(&l, [this]() REQUIRES(mu_) { return shutting_down_ || !queue_.empty(); });
      // On shutdown, keep taking tasks until the queue is empty: queued work is never
      // silently dropped.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void RunAll(ThreadPool* pool, const std::vector<std::function<void()>>& jobs) {
  if (jobs.empty()) return;
  struct Latch {
    Mutex mu;
    CondVar cv;
    size_t pending GUARDED_BY(mu) = 0;
  };
  auto latch = std::make_shared<Latch>();
  for (size_t i = 1; i < jobs.size(); ++i) {
    if (pool != nullptr) {
      {
        MutexLock lock(&latch->mu);
        ++latch->pending;
      }
      Status queued = pool->Submit([&jobs, i, latch] {
        jobs[i]();
        MutexLock lock(&latch->mu);
        if (--latch->pending == 0) latch->cv.NotifyAll();
      });
      if (queued.ok()) continue;
      MutexLock lock(&latch->mu);
      --latch->pending;
    }
    jobs[i]();  // no pool, or it refused: here
  }
  jobs[0]();
  MutexLock lock(&latch->mu);
  latch->cv.Wait(&lock, [&]() REQUIRES(latch->mu) { return latch->pending == 0; });
}

}  // namespace nova
