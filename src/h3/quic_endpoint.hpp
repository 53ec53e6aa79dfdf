#pragma once
// One worker's QUIC side of one TLS listener that lists h3 (RFC 9000): its UDP socket's
// datagrams handed to the connection their destination connection ID names, new connections
// accepted from Initial packets (within server.max_connections, address-validated by a Retry
// while many handshakes are under way), Version Negotiation for another QUIC version, and a
// stateless reset for a packet of a connection of this worker that is gone.
//
// Workers share the port (SO_REUSEPORT), and the kernel steers a datagram by its addresses, so a
// client's packets reach the worker that accepted it as long as its address stays the same;
// floodgate turns active migration off (disable_active_migration). The first byte of every
// connection ID floodgate issues names its worker: a worker that receives a packet for another's
// connection (the client's NAT rebound) drops it, and only the owner may answer with a
// stateless reset, so one worker never kills another's connection.

#include <ngtcp2/ngtcp2.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/udp.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "exchange/services.hpp"
#include "net/connection_budget.hpp"

namespace floodgate::tls {
class QuicCredentials;
}

namespace floodgate::http {

class H3Connection;

// What an instance derives its Retry tokens and stateless reset tokens from: random at start,
// the same in every worker (a token one worker issued is good at another).
using QuicSecret = std::array<std::uint8_t, 32>;

// The length of every connection ID floodgate issues (its first byte is the worker's).
inline constexpr std::size_t kQuicCidLength = 18;

class QuicEndpoint {
 public:
  // `credentials`: the listener's at start; a reload's (the snapshot's for server.listen[index])
  // serve the connections accepted after it.
  QuicEndpoint(boost::asio::ip::udp::socket socket, std::uint8_t worker, const QuicSecret& secret,
               std::size_t index, std::shared_ptr<const tls::QuicCredentials> credentials,
               Services& w, ConnectionBudget& connections);
  ~QuicEndpoint();
  QuicEndpoint(const QuicEndpoint&) = delete;
  QuicEndpoint& operator=(const QuicEndpoint&) = delete;

  // Receives until close() and the last connection's end.
  boost::asio::awaitable<void> run();
  // A drain: no new connection is accepted; the socket closes once the open ones have ended.
  void close();
  bool looping() const { return looping_; }
  std::uint16_t port() const { return local_.port(); }
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }

  // For the connections.
  void send(const ngtcp2_addr& to, std::span<const std::uint8_t> packet);
  ngtcp2_cid new_cid();  // random, this worker's byte first
  void add_cid(const ngtcp2_cid& cid, H3Connection& c);
  void remove_cid(const ngtcp2_cid& cid);
  const QuicSecret& secret() const { return secret_; }
  // A connection's coroutine has ended: it is destroyed.
  void ended(H3Connection& c);
  // Connections whose handshake is under way (counted for the Retry rule).
  void handshake_started() { ++handshaking_; }
  void handshake_ended() { --handshaking_; }

 private:
  void on_datagram(const boost::asio::ip::udp::endpoint& from, std::span<const std::uint8_t> data);
  void accept(const boost::asio::ip::udp::endpoint& from, std::span<const std::uint8_t> data);
  void send_version_negotiation(const ngtcp2_version_cid& vc,
                                const boost::asio::ip::udp::endpoint& to);
  void send_retry(const ngtcp2_pkt_hd& hd, const boost::asio::ip::udp::endpoint& to);
  void send_stateless_reset(const ngtcp2_version_cid& vc, std::size_t received,
                            const boost::asio::ip::udp::endpoint& to);
  void close_socket_when_done();
  std::shared_ptr<const tls::QuicCredentials> credentials() const;
  static std::string key_of(const std::uint8_t* cid, std::size_t len) {
    return {reinterpret_cast<const char*>(cid), len};
  }

  boost::asio::ip::udp::socket socket_;
  boost::asio::ip::udp::endpoint local_;
  std::uint8_t worker_;
  const QuicSecret& secret_;
  std::size_t index_;  // into server.listen
  std::shared_ptr<const tls::QuicCredentials> started_with_;
  Services& w_;
  ConnectionBudget& connections_;
  std::unordered_map<std::string, H3Connection*> cids_;
  std::map<H3Connection*, std::unique_ptr<H3Connection>> live_;
  std::size_t handshaking_ = 0;
  bool closing_ = false;
  bool looping_ = false;
};

}  // namespace floodgate::http
