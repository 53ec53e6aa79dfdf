#pragma once
// Blocking test clients built on Asio's async operations, so that every step can have a
// deadline: the operation runs on the client's own io_context for at most `timeout`; past
// that the socket is cancelled and the step reports timed_out.

#include <boost/asio.hpp>

#include <chrono>

namespace floodgate::testing {

template <typename Op>
boost::system::error_code run_with_deadline(boost::asio::io_context& ioc,
                                            boost::asio::ip::tcp::socket& socket,
                                            std::chrono::milliseconds timeout, Op op) {
  boost::system::error_code result = boost::asio::error::would_block;
  op([&](boost::system::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run_for(timeout);
  if (result == boost::asio::error::would_block) {
    boost::system::error_code ignored;
    socket.cancel(ignored);
    ioc.restart();
    // A cancelled composed operation finishes promptly; the bound only guards against a
    // stream that would start more work (a TLS shutdown, say) after the cancel.
    ioc.run_for(std::chrono::seconds(1));
    return boost::asio::error::timed_out;
  }
  return result;
}

}  // namespace floodgate::testing
