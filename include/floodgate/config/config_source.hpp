#pragma once
// Where workers read the current config snapshot from. Publishing replaces the pointer under
// a lock; a request that already holds a snapshot keeps it until it finishes.
//
// A mutex, not std::atomic<std::shared_ptr>: libstdc++ 12 implements the latter with a lock
// bit that a load releases with relaxed order, so a reader's access and the next publish are
// not ordered; ThreadSanitizer reports it as a race. An uncontended mutex costs tens of
// nanoseconds, once per request.

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
  }

 private:
  mutable std::mutex mutex_;
  ConfigPtr current_;
};

}  // namespace floodgate::config
