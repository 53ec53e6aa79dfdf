#pragma once
// Where workers read the current config snapshot from. Publishing swaps the pointer
// atomically; a request that already holds a snapshot keeps it until it finishes.

#include <atomic>

#include "floodgate/config/config.hpp"

namespace floodgate::config {

class ConfigSource {
 public:
  explicit ConfigSource(ConfigPtr initial) : current_(std::move(initial)) {}
  ConfigPtr get() const { return current_.load(std::memory_order_acquire); }
  void publish(ConfigPtr next) { current_.store(std::move(next), std::memory_order_release); }

 private:
  std::atomic<ConfigPtr> current_;
};

}  // namespace floodgate::config
