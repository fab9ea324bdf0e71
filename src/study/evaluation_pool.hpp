// src/study/evaluation_pool.hpp: the threads run() evaluates on. Jobs are
// started in the order they were submitted and waited for one by one, in
// any order the caller likes (run() waits in proposal order), so what the
// study learns never depends on which thread finished first.
// Plain threads rather than a TBB arena: an evaluation mostly waits (on a
// compiler, a kernel process, a remote NeuronCore), so --jobs may well
// exceed the cores, while TBB caps an arena's workers at the core count
// unless the whole process's limit is raised.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::detail {

class evaluation_pool {
 public:
  /// A submitted job: done once `work` has returned.
  struct job {
    std::function<void()> work;
    bool done = false;
  };

  /// `threads` >= 1 threads, started now and joined by the destructor
  /// (after the jobs already submitted have run).
  explicit evaluation_pool(std::size_t threads);
  ~evaluation_pool();
  evaluation_pool(const evaluation_pool&) = delete;
  evaluation_pool& operator=(const evaluation_pool&) = delete;

  /// Queues `work` (which must not throw) behind the jobs already queued.
  std::shared_ptr<job> submit(std::function<void()> work);
  /// Blocks until `j` has run.
  void wait(const std::shared_ptr<job>& j);
  /// How many jobs have run so far.
  [[nodiscard]] std::size_t finished();
  /// Blocks until more than `seen` jobs have run, or `timeout` passes.
  void wait_past(std::size_t seen, std::chrono::milliseconds timeout);
  /// Whether `j` has run.
  [[nodiscard]] bool done(const std::shared_ptr<job>& j);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable queued_, finished_;
  std::deque<std::shared_ptr<job>> queue_;
  bool closing_ = false;
  std::size_t finished_count_ = 0;  ///< jobs run so far (wait_any watches it)
  std::vector<std::thread> threads_;
};

}  // namespace tessel::detail
