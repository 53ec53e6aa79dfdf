#pragma once
// Keep-alive connections to upstreams, owned by one worker (no locks). A connection is
// either in use by exactly one request or idle here; idle ones the upstream has closed are
// discarded when taken.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "transport.hpp"
#include "watchdog.hpp"

namespace floodgate::http {

struct UpstreamConnection {
  explicit UpstreamConnection(boost::asio::any_io_executor ex) : stream(ex), watch(ex) {}
  Transport stream;  // TLS for an https upstream
  // For a user without a watchdog of its own (an HTTP/2 stream; an HTTP/1.1 session times
  // its upstream with the client connection's): made once per connection, not per use.
  // Declared after `stream`, so it goes first: it never outlives the socket it guards.
  Watchdog watch;
  boost::beast::flat_buffer buffer;  // bytes read past the previous response stay with it
  bool reused = false;               // came from the pool: may have been closed meanwhile
  std::chrono::steady_clock::time_point idle_since{};
};
using UpstreamConnectionPtr = std::unique_ptr<UpstreamConnection>;

// What a client is answered when its upstream failed before a response head reached it:
// 504 for a timeout (beast::error::timeout, as the watchdogs report one), 502 for the rest.
int status_for_upstream_error(const boost::system::error_code& ec);

class UpstreamPool {
 public:
  explicit UpstreamPool(boost::asio::any_io_executor ex) : ex_(ex), resolver_(ex) {}

  // An idle connection to `u` that still looks open, or null.
  UpstreamConnectionPtr take(const config::UpstreamServer& u);
  // Returns a connection whose last response was read completely; dropped past the cap.
  void give_back(const config::UpstreamServer& u, UpstreamConnectionPtr c);
  // A new connection within u.connect_timeout (error beast::error::timeout past it), timed
  // by the caller's watchdog; for https the TLS handshake, with the origin's certificate
  // verified, is part of it and has a timeout of its own of the same length.
  struct Connected {
    UpstreamConnectionPtr conn;  // null on failure
    boost::system::error_code error;
    std::string why;  // the error in words, with a failed certificate check's reason
  };
  boost::asio::awaitable<Connected> connect(const config::UpstreamServer& u, Watchdog& watch);
  void clear() { idle_.clear(); }
  boost::asio::any_io_executor executor() const { return ex_; }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  boost::asio::any_io_executor ex_;
  boost::asio::ip::tcp::resolver resolver_;
  // Keyed by Upstream::pool_key, so a reload that keeps the url keeps the connections.
  std::unordered_map<std::string, std::vector<UpstreamConnectionPtr>, Hash, std::equal_to<>> idle_;
};

}  // namespace floodgate::http
