#include "watchdog.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>

#include <time.h>

namespace floodgate::http {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {
// The steady clock at the kernel tick's resolution (a few ms): good enough for timeouts of
// tens of milliseconds and up, and much cheaper than the precise clock several times per
// request. Same clock (CLOCK_MONOTONIC) as std::chrono::steady_clock, so they compare.
Clock::time_point coarse_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

// The coarse clock reads the last tick, up to one tick behind the precise one: a deadline made
// from it is set one tick later, so a timeout never fires early (at most a tick late).
Clock::duration coarse_tick() {
  static const Clock::duration tick = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return Clock::duration(std::chrono::seconds(res.tv_sec) +
                           std::chrono::nanoseconds(res.tv_nsec));
  }();
  return tick;
}
}  // namespace

struct Watchdog::State : std::enable_shared_from_this<State> {
  explicit State(asio::any_io_executor ex) : timer(std::move(ex)) {}

  asio::steady_timer timer;
  Clock::time_point deadline = Clock::time_point::max();
  Clock::time_point armed_for = Clock::time_point::max();  // max: no wait pending
  asio::ip::tcp::socket* guarded = nullptr;
  bool expired = false;
  bool closed = false;
  bool expiring = false;  // expire() was called: every deadline is now

  void arm(Clock::time_point at) {
    armed_for = at;
    timer.expires_at(at);  // cancels a wait armed for later; its handler sees a newer armed_for
    timer.async_wait([self = shared_from_this(), at](boost::system::error_code) {
      if (self->closed || self->armed_for != at) return;  // superseded, or the owner is gone
      self->armed_for = Clock::time_point::max();
      self->fire();
    });
  }

  void fire() {
    if (deadline == Clock::time_point::max()) return;
    if (Clock::now() < deadline) {
      arm(deadline);  // the deadline moved later since the timer was armed
      return;
    }
    expired = true;
    deadline = Clock::time_point::max();
    if (guarded) {
      boost::system::error_code ignored;
      guarded->cancel(ignored);
    }
  }
};

Watchdog::Watchdog(asio::any_io_executor ex) : state_(std::make_shared<State>(std::move(ex))) {}

Watchdog::~Watchdog() {
  state_->closed = true;
  state_->guarded = nullptr;
  state_->timer.cancel();
}

void Watchdog::guard(asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout) {
  auto& s = *state_;
  s.guarded = &socket;
  s.expired = false;
  // When expiring, the timer still fires on a later loop turn, after the caller has started
  // the operation it guards, so that operation is the one cancelled.
  s.deadline = s.expiring ? coarse_now() : coarse_now() + timeout + coarse_tick();
  if (s.deadline < s.armed_for) s.arm(s.deadline);
}

void Watchdog::expire() {
  auto& s = *state_;
  s.expiring = true;
  if (s.deadline == Clock::time_point::max()) return;  // nothing guarded right now
  s.deadline = coarse_now();
  s.arm(s.deadline);
}

void Watchdog::relax() {
  state_->deadline = Clock::time_point::max();
  state_->guarded = nullptr;
}

boost::system::error_code Watchdog::translate(boost::system::error_code ec) const {
  if (ec == asio::error::operation_aborted && state_->expired) return boost::beast::error::timeout;
  return ec;
}

}  // namespace floodgate::http
