#pragma once
// The only clock a limit decision reads. Injected everywhere, so unit tests use FakeClock
// and the Redis store ignores it entirely (Redis decides with its own TIME).

#include <atomic>
#include <chrono>

#include "floodgate/limit/algorithm.hpp"

namespace floodgate::limit {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Micros now() const = 0;  // Unix time: windows align to the epoch
};

class SystemClock final : public Clock {
 public:
  Micros now() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(Micros start = 1'700'000'000 * kMicrosPerSecond) : now_(start) {}
  Micros now() const override { return now_.load(); }
  void advance(Micros d) { now_ += d; }
  void set(Micros t) { now_ = t; }

 private:
  std::atomic<Micros> now_;
};

}  // namespace floodgate::limit
