#pragma once
// A worker's listening sockets, one per server.listen entry (SO_REUSEPORT: every worker binds
// the same port and the kernel spreads connections across them). Each accept loop hands a
// connection to a session, within server.max_connections for the whole instance: at the cap
// new connections wait in the kernel's queue; out of descriptors the loop pauses.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "exchange/services.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/log_throttle.hpp"
#include "net/connection_budget.hpp"
#include "session.hpp"

namespace floodgate::tls {
class ServerContexts;
}

namespace floodgate::http {

class Acceptors {
 public:
  Acceptors(boost::asio::io_context& ioc, config::ConfigSource& config, Services& w,
            ConnectionBudget& connections)
      : ioc_(ioc), config_(config), w_(w), connections_(connections) {}

  // Opens the acceptor for server.listen[index] (rls: rls.listen[index]; throws
  // std::system_error naming the address on failure). Returns the bound port.
  std::uint16_t listen(boost::asio::ip::tcp::endpoint ep, std::size_t index,
                       const config::Listener& listener, bool rls = false);
  void start();          // the accept loops, on the worker's loop
  void close();          // a drain: the loops end
  bool looping() const;  // an accept loop has not ended yet (a drain waits for it)

 private:
  using tcp = boost::asio::ip::tcp;
  struct Acceptor {
    Acceptor(boost::asio::io_context& ioc, std::size_t index, const config::Listener& l, bool rls)
        : acceptor(ioc),
          pause(ioc),
          index(index),
          address(l.address.to_string()),
          tls(l.tls.has_value()),
          protocols{l.speaks(config::Protocol::http1), l.speaks(config::Protocol::h2c), rls} {
      if (l.tls) started_with = l.tls->contexts;
    }
    tcp::acceptor acceptor;
    boost::asio::steady_timer pause;  // the accept loop's wait when paused; a drain cancels it
    bool looping = false;             // its accept loop has not ended yet
    std::size_t index;                // into server.listen (rls: rls.listen)
    std::string address;  // as configured: a reload may reorder listeners (restart needed)
    bool tls;
    FrontProtocols protocols;  // as started: a reload that changes listeners needs a restart
    std::shared_ptr<const tls::ServerContexts> started_with;
    std::string alt_svc;  // what protocols.alt_svc views (a copy per connection was a malloc)
  };

  // At server.max_connections a paused accept loop looks again soon: a session may end in any
  // worker, and a short poll is simpler than waking every worker's loop. Out of descriptors
  // it waits longer, since only connections ending free them.
  static constexpr std::chrono::milliseconds kFullPoll{20};
  static constexpr std::chrono::milliseconds kResourcePause{100};
  static constexpr std::chrono::milliseconds kErrorPause{10};

  std::int64_t max_connections() const { return config_.get()->server.max_connections; }
  // The certificates a new connection gets (the current snapshot's for its listener).
  std::shared_ptr<const tls::ServerContexts> tls_for(const Acceptor& a) const;
  // False when a drain closed the acceptor meanwhile.
  boost::asio::awaitable<bool> pause(boost::asio::steady_timer& timer, std::chrono::milliseconds d,
                                     const tcp::acceptor& acc);
  boost::asio::awaitable<void> accept_loop(Acceptor& entry);
  void note_full();
  std::chrono::milliseconds accept_failed(const boost::system::error_code& ec);

  boost::asio::io_context& ioc_;
  config::ConfigSource& config_;
  Services& w_;
  ConnectionBudget& connections_;  // the instance's: shared by every worker
  LogThrottle full_log_;
  LogThrottle accept_log_;
  std::list<Acceptor> list_;
};

}  // namespace floodgate::http
