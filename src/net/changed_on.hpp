#pragma once
// A stream's waits (HTTP/2's, HTTP/3's, an h2 upstream call's) are on a timer that whoever
// changes the stream cancels.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>

namespace floodgate::http {

// Waits on `timer` until whoever it belongs to changes (the timer is cancelled) or `timeout`
// passes; false on the timeout.
boost::asio::awaitable<bool> changed_on(boost::asio::steady_timer& timer,
                                        std::chrono::milliseconds timeout);

}  // namespace floodgate::http
