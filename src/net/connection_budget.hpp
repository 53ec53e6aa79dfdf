#pragma once
// server.max_connections: client connections open at once on one instance, every worker and
// listener together. A worker takes a slot for a connection it has accepted, before its
// session starts; the slot comes back when the session's coroutine has ended. The one thing
// workers share on the accept path: an atomic counter (relaxed: it orders nothing else).

#include <atomic>
#include <cstdint>
#include <utility>

namespace floodgate::http {

class ConnectionBudget {
 public:
  // A taken slot, given back by its destructor; empty when none was free.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)) {}
    Slot& operator=(Slot&& o) noexcept {
      if (this != &o) {
        give_back();
        budget_ = std::exchange(o.budget_, nullptr);
      }
      return *this;
    }
    ~Slot() { give_back(); }
    explicit operator bool() const { return budget_ != nullptr; }

   private:
    friend class ConnectionBudget;
    explicit Slot(ConnectionBudget* b) : budget_(b) {}
    void give_back() {
      if (budget_) budget_->open_.fetch_sub(1, std::memory_order_relaxed);
      budget_ = nullptr;
    }
    ConnectionBudget* budget_ = nullptr;
  };

  ConnectionBudget() = default;
  ConnectionBudget(const ConnectionBudget&) = delete;
  ConnectionBudget& operator=(const ConnectionBudget&) = delete;

  // `max` from the current config snapshot (a reload applies to the next accept); 0: no limit.
  // Taken and checked in one step, so two workers racing for the last slot cannot both win.
  Slot try_take(std::int64_t max) {
    auto before = open_.fetch_add(1, std::memory_order_relaxed);
    if (max > 0 && before >= max) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      return {};
    }
    return Slot(this);
  }
  bool full(std::int64_t max) const {
    return max > 0 && open_.load(std::memory_order_relaxed) >= max;
  }

 private:
  std::atomic<std::int64_t> open_{0};
};

}  // namespace floodgate::http
