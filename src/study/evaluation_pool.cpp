#include "study/evaluation_pool.hpp"

#include <algorithm>

namespace tessel::detail {

evaluation_pool::evaluation_pool(std::size_t threads) {
  threads_.reserve(threads);
  for (std::size_t i = 0; i < std::max<std::size_t>(threads, 1); ++i)
    threads_.emplace_back([this] { loop(); });
}

evaluation_pool::~evaluation_pool() {
  {
    const std::lock_guard lock(mutex_);
    closing_ = true;
  }
  queued_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<evaluation_pool::job> evaluation_pool::submit(std::function<void()> work) {
  auto j = std::make_shared<job>();
  j->work = std::move(work);
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(j);
  }
  queued_.notify_one();
  return j;
}

void evaluation_pool::wait(const std::shared_ptr<job>& j) {
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return j->done; });
}

std::size_t evaluation_pool::finished() {
  const std::lock_guard lock(mutex_);
  return finished_count_;
}

void evaluation_pool::wait_past(std::size_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  finished_.wait_for(lock, timeout, [&] { return finished_count_ > seen; });
}

bool evaluation_pool::done(const std::shared_ptr<job>& j) {
  const std::lock_guard lock(mutex_);
  return j->done;
}

void evaluation_pool::loop() {
  while (true) {
    std::shared_ptr<job> j;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing, nothing left to run
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    j->work();
    {
      const std::lock_guard lock(mutex_);
      j->done = true;
      ++finished_count_;
    }
    finished_.notify_all();
  }
}

}  // namespace tessel::detail
