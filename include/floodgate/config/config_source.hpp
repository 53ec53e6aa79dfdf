#pragma once
// Where workers read the current config snapshot from. Publishing replaces the pointer under
// a lock; a request that already holds a snapshot keeps it until it finishes.
//
// A mutex, not std::atomic<std::shared_ptr>: libstdc++ 12 implements the latter with a lock
// bit that a load releases with relaxed order, so a reader's access and the next publish are
// not ordered; ThreadSanitizer reports it as a race. An uncontended mutex costs tens of
// nanoseconds, once per request.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "floodgate/config/config.hpp"

namespace floodgate::config {

class ConfigSource {
 public:
  explicit ConfigSource(ConfigPtr initial) : current_(std::move(initial)) {}
  ConfigPtr get() const {
    std::lock_guard lock(mutex_);
    return current_;
  }
  // The previous snapshot is released by the caller's argument, after the lock.
  void publish(ConfigPtr next) {
    std::lock_guard lock(mutex_);
    current_.swap(next);
    generation_.fetch_add(1, std::memory_order_release);
  }
  // Changes with every publish: a reader holding a snapshot can tell whether it is current
  // without taking the lock.
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  ConfigPtr current_;
  std::atomic<std::uint64_t> generation_{0};
};

// The current snapshot as one thread sees it. It goes back to the source only after a
// publish (one atomic load per request otherwise, no lock), and the pointers it hands out
// share a reference count of this thread's own: requests on different cores do not bounce
// one counter's cache line between them. Not thread-safe: one per worker.
class SnapshotCache {
 public:
  explicit SnapshotCache(const ConfigSource& source) : source_(source) {}
  ConfigPtr get() {
    const auto generation = source_.generation();
    if (!local_ || generation != seen_) {
      auto holder = std::make_shared<ConfigPtr>(source_.get());
      local_ = ConfigPtr(holder, holder->get());
      seen_ = generation;
    }
    return local_;
  }

 private:
  const ConfigSource& source_;
  std::uint64_t seen_ = 0;
  ConfigPtr local_;
};

}  // namespace floodgate::config
