#pragma once
// At most one line per second for a repeated error (an outage must not become a log flood);
// the lines in between are counted and reported with the next one.

#include <chrono>
#include <cstdint>

namespace floodgate {

class LogThrottle {
 public:
  // Returns how many were suppressed since the last allowed line, or -1 to stay quiet.
  std::int64_t allow() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::seconds(1)) {
      ++suppressed_;
      return -1;
    }
    last_ = now;
    auto n = suppressed_;
    suppressed_ = 0;
    return static_cast<std::int64_t>(n);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  std::uint64_t suppressed_ = 0;
};

}  // namespace floodgate
