#pragma once
// A worker's UDP sockets, one per TLS listener that lists h3, each bound to its listener's
// address and port with SO_REUSEPORT (every worker binds the same port, as for TCP; the kernel
// steers a datagram by its addresses), and the QUIC endpoint (h3/quic_endpoint.hpp) that
// serves it. The server owns the sockets; h3/ owns QUIC.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <list>
#include <memory>

#include "exchange/services.hpp"
#include "h3/quic_endpoint.hpp"
#include "net/connection_budget.hpp"

namespace floodgate::http {

class QuicListeners {
 public:
  QuicListeners(boost::asio::io_context& ioc, Services& w, ConnectionBudget& connections,
                std::uint8_t worker, const QuicSecret& secret)
      : ioc_(ioc), w_(w), connections_(connections), worker_(worker), secret_(secret) {}

  // Binds the UDP socket of server.listen[index] (throws std::system_error naming the address
  // on failure).
  void listen(boost::asio::ip::udp::endpoint ep, std::size_t index, const config::Listener& l);
  void start();  // the receive loops, on the worker's loop
  void close();  // a drain: no new connection; each socket closes after its last connection
  bool looping() const;

 private:
  boost::asio::io_context& ioc_;
  Services& w_;
  ConnectionBudget& connections_;
  std::uint8_t worker_;
  const QuicSecret& secret_;
  std::list<QuicEndpoint> endpoints_;
};

}  // namespace floodgate::http
