#pragma once
// One timer per connection instead of one per socket operation. Asio re-programs the kernel
// timer (a timerfd_settime system call) whenever a new timer becomes the earliest, which with
// one timer per read and write happened more than once per proxied request. The watchdog
// keeps a deadline in memory, moves it freely, and touches the real timer only when the
// deadline moves earlier than the armed time; when the armed time comes first, it re-arms
// for the current deadline. In steady keep-alive traffic that is about one timer
// operation per timeout period per connection, not several per request.
//
// An expired deadline cancels the guarded socket's pending operation, which then fails with
// operation_aborted; translate() turns that into beast::error::timeout.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>

namespace floodgate::http {

class Watchdog {
 public:
  explicit Watchdog(boost::asio::any_io_executor ex);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The next operation on `socket` must complete within `timeout` from now.
  void guard(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout);
  // No deadline until the next guard() (e.g. a connection parked between uses).
  void relax();
  // The current operation and every one guarded after it time out at once: for a connection
  // being torn down (a drain past its deadline), whichever socket it is waiting on.
  void expire();
  // operation_aborted caused by an expired deadline becomes beast::error::timeout.
  boost::system::error_code translate(boost::system::error_code ec) const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the pending timer wait
};

}  // namespace floodgate::http
