#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "worker_context.hpp"

namespace floodgate::http {

// Serves one downstream connection until it closes, times out, or the worker drains.
boost::asio::awaitable<void> run_session(boost::asio::ip::tcp::socket socket,
                                         WorkerContext& worker);

}  // namespace floodgate::http
