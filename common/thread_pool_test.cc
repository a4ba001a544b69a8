#include "common/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace nova {
namespace {

constexpr auto kWaitLimit = std::chrono::seconds(30);

// Polls `pred` until it holds or kWaitLimit passes; returns its last value.
bool WaitUntil(const std::function<bool()>& pred) {
  Deadline deadline = Deadline::After(kWaitLimit);
  while (!pred()) {
    if (deadline.Expired()) return false;
    std::this_thread::yield();
  }
  return true;
}

// A task that blocks its worker until Release(), to fill a pool on purpose.
class Gate {
 public:
  std::function<void()> Task() {
    return [this] {
      entered_.fetch_add(1);
      released_.wait();
    };
  }
  int entered() const { return entered_.load(); }
  void Release() { release_.set_value(); }

 private:
  std::atomic<int> entered_{0};
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

TEST(ThreadPoolTest, RunsEveryTask) {
  ThreadPool pool("test", 4, 10000);
  EXPECT_EQ(pool.num_threads(), 4u);
  std::atomic<int> ran{0};
  constexpr int kTasks = 5000;
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
  }
  pool.Shutdown();
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_EQ(pool.queue_depth(), 0u);
}

TEST(ThreadPoolTest, ConcurrentSubmitters) {
  ThreadPool pool("test", 2, 100000);
  std::atomic<int> ran{0};
  constexpr int kSubmitters = 4;
  constexpr int kPerSubmitter = 2000;
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&] {
      for (int i = 0; i < kPerSubmitter; ++i) {
        ASSERT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  ASSERT_TRUE(WaitUntil([&] { return ran.load() == kSubmitters * kPerSubmitter; }));
}

TEST(ThreadPoolTest, FullQueueRejects) {
  ThreadPool pool("test", 1, 2);
  Gate gate;
  ASSERT_TRUE(pool.Submit(gate.Task()).ok());
  ASSERT_TRUE(WaitUntil([&] { return gate.entered() == 1; }));  // the worker is busy

  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
  ASSERT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
  EXPECT_EQ(pool.queue_depth(), 2u);
  Status s = pool.Submit([&ran] { ran.fetch_add(1); });
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(s.message().find("test"), std::string::npos) << s.ToString();
  EXPECT_EQ(pool.queue_depth(), 2u);

  gate.Release();
  ASSERT_TRUE(WaitUntil([&] { return ran.load() == 2; }));
  EXPECT_EQ(pool.queue_depth(), 0u);
  // Room again.
  EXPECT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
  pool.Shutdown();
  EXPECT_EQ(ran.load(), 3);
}

TEST(ThreadPoolTest, ShutdownRunsQueuedTasksThenRejects) {
  ThreadPool pool("test", 1, 100);
  Gate gate;
  ASSERT_TRUE(pool.Submit(gate.Task()).ok());
  ASSERT_TRUE(WaitUntil([&] { return gate.entered() == 1; }));
  std::atomic<int> ran{0};
  std::atomic<int> rejected_from_task{0};
  constexpr int kQueued = 10;
  for (int i = 0; i < kQueued; ++i) {
    ASSERT_TRUE(pool.Submit([&] {
                      ran.fetch_add(1);
                      // Tasks submitted while draining are refused, not lost silently.
                      if (pool.Submit([] {}).code() == Status::Code::kAborted) {
                        rejected_from_task.fetch_add(1);
                      }
                    })
                    .ok());
  }

  std::atomic<bool> shutdown_returned{false};
  std::thread shutter([&] {
    pool.Shutdown();
    shutdown_returned.store(true);
  });
  // Shutdown has begun once Submit is refused; it cannot finish while the gate is shut.
  ASSERT_TRUE(WaitUntil([&] { return pool.Submit([] {}).code() == Status::Code::kAborted; }));
  EXPECT_FALSE(shutdown_returned.load());
  EXPECT_EQ(ran.load(), 0);

  gate.Release();
  shutter.join();
  EXPECT_EQ(ran.load(), kQueued);
  EXPECT_EQ(rejected_from_task.load(), kQueued);
  Status s = pool.Submit([] {});
  EXPECT_EQ(s.code(), Status::Code::kAborted) << s.ToString();
  pool.Shutdown();  // idempotent
}

TEST(ThreadPoolTest, ConcurrentShutdownsAllWaitForTheDrain) {
  ThreadPool pool("test", 2, 100);
  Gate gate;
  ASSERT_TRUE(pool.Submit(gate.Task()).ok());
  ASSERT_TRUE(WaitUntil([&] { return gate.entered() == 1; }));
  std::atomic<bool> gate_task_done{false};
  ASSERT_TRUE(pool.Submit([&] { gate_task_done.store(true); }).ok());

  std::atomic<int> returned{0};
  std::vector<std::thread> shutters;
  std::atomic<bool> saw_unfinished{false};
  for (int i = 0; i < 3; ++i) {
    shutters.emplace_back([&] {
      pool.Shutdown();
      if (!gate_task_done.load()) saw_unfinished.store(true);
      returned.fetch_add(1);
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return pool.Submit([] {}).code() == Status::Code::kAborted; }));
  EXPECT_EQ(returned.load(), 0);
  gate.Release();
  for (std::thread& t : shutters) t.join();
  EXPECT_EQ(returned.load(), 3);
  EXPECT_FALSE(saw_unfinished.load());
}

TEST(ThreadPoolTest, WorkersAreNamed) {
  ThreadPool pool("flush", 3, 100);
  Mutex mu;
  std::set<std::string> names;
  Gate gate;
  // Three blocking tasks occupy all three workers, so each runs on a different one.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Submit([&, task = gate.Task()] {
                      char name[16] = {};
                      pthread_getname_np(pthread_self(), name, sizeof(name));
                      {
                        MutexLock l(&mu);
                        names.insert(name);
                      }
                      task();
                    })
                    .ok());
  }
  ASSERT_TRUE(WaitUntil([&] { return gate.entered() == 3; }));
  gate.Release();
  pool.Shutdown();
  EXPECT_EQ(names, (std::set<std::string>{"flush-0", "flush-1", "flush-2"}));

  // Long names are cut to the 15 characters Linux keeps.
  ThreadPool long_named("a-very-long-pool-name", 1, 1);
  std::promise<std::string> got;
  ASSERT_TRUE(long_named
                  .Submit([&] {
                    char name[16] = {};
                    pthread_getname_np(pthread_self(), name, sizeof(name));
                    got.set_value(name);
                  })
                  .ok());
  EXPECT_EQ(got.get_future().get(), "a-very-long-poo");
}

TEST(ThreadPoolTest, DestructorDrains) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("test", 2, 1000);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Submit([&ran] { ran.fetch_add(1); }).ok());
  }
  EXPECT_EQ(ran.load(), 100);
}

// RunAll returns only once every job has run; job 0 runs on the caller, the others on the
// pool's workers.
TEST(ThreadPoolTest, RunAllWaitsForEveryJob) {
  ThreadPool pool("test", 2, 100);
  constexpr size_t kJobs = 12;
  std::vector<std::atomic<bool>> done(kJobs);
  std::vector<std::thread::id> ran_on(kJobs);
  std::vector<std::function<void()>> jobs;
  for (size_t i = 0; i < kJobs; ++i) {
    jobs.push_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));  // finish out of order
      ran_on[i] = std::this_thread::get_id();
      done[i].store(true);
    });
  }
  RunAll(&pool, jobs);
  for (size_t i = 0; i < kJobs; ++i) EXPECT_TRUE(done[i].load()) << "job " << i;
  EXPECT_EQ(ran_on[0], std::this_thread::get_id());
  size_t on_workers = 0;
  for (size_t i = 1; i < kJobs; ++i) on_workers += ran_on[i] != std::this_thread::get_id();
  EXPECT_EQ(on_workers, kJobs - 1);
}

// Without a pool, or with one that refuses (full queue, shut down), the jobs run on the
// caller, and RunAll still waits for what the pool took.
TEST(ThreadPoolTest, RunAllRunsRefusedJobsOnTheCaller) {
  std::vector<int> order;
  std::vector<std::function<void()>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back([&order, i] { order.push_back(i); });
  RunAll(nullptr, jobs);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));  // the others first, job 0 last

  ThreadPool pool("test", 1, 1);
  Gate gate;
  ASSERT_TRUE(pool.Submit(gate.Task()).ok());
  ASSERT_TRUE(WaitUntil([&] { return gate.entered() == 1; }));  // the worker is busy
  std::atomic<bool> queued_ran{false};
  std::vector<std::thread::id> ran_on(3);
  std::vector<std::function<void()>> more;
  for (size_t i = 0; i < 3; ++i) {
    more.push_back([&, i] {
      ran_on[i] = std::this_thread::get_id();
      if (i == 1) queued_ran.store(true);
      if (i == 0) gate.Release();  // job 1 can run now; RunAll must wait for it
    });
  }
  // Job 1 takes the queue's one place, job 2 is refused and runs here, then job 0.
  RunAll(&pool, more);
  EXPECT_TRUE(queued_ran.load());
  EXPECT_NE(ran_on[1], std::this_thread::get_id());
  EXPECT_EQ(ran_on[2], std::this_thread::get_id());
  EXPECT_EQ(ran_on[0], std::this_thread::get_id());

  pool.Shutdown();
  order.clear();
  RunAll(&pool, jobs);  // a stopped pool refuses everything
  EXPECT_EQ(order, (std::vector<int>{1, 2, 0}));
}

}  // namespace
}  // namespace nova
