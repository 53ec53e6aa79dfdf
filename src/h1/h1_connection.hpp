#pragma once
// An HTTP/1.x connection after its protocol is known (the session has done TLS and ruled out
// HTTP/2): requests read one after the other, each an exchange through the pipeline, until
// the client closes, stays idle too long, or the worker drains.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/status.hpp>

#include <array>
#include <string>
#include <string_view>

#include "error_response.hpp"
#include "exchange/exchange.hpp"
#include "exchange/services.hpp"
#include "http1_client.hpp"
#include "net/session_registry.hpp"

namespace floodgate::http {

class H1Connection {
 public:
  static constexpr std::size_t kChunk = 16 * 1024;  // the connection's one body buffer

  // References into the session, which outlives this.
  H1Connection(Transport& client, Watchdog& watch, boost::beast::flat_buffer& buffer,
               SessionRegistry::Entry& entry, std::string_view peer_ip,
               const config::IpAddress& peer, Services& w, std::string_view alt_svc = {});
  H1Connection(const H1Connection&) = delete;
  H1Connection& operator=(const H1Connection&) = delete;

  // How it ended: the client went (closed, stalled, broke: nothing more to do), or the
  // connection is to be closed (`close_idle`: between two requests, by a drain).
  enum class End { gone, close, close_idle };
  boost::asio::awaitable<End> run();

 private:
  boost::asio::awaitable<bool> wait_for_next_request(const config::Config& config);
  boost::asio::awaitable<bool> send(const Answer& a, Exchange* x = nullptr);
  boost::asio::awaitable<bool> send_error(boost::beast::http::status status, unsigned version,
                                          bool keep_alive, Exchange* x = nullptr);
  void take_connection(Exchange& x, RequestParser& parser, bool whole);
  boost::asio::awaitable<bool> serve(RequestParser& parser, Exchange& x);

  Transport& client_;
  Watchdog& watch_;  // every socket operation of the connection runs under its deadline
  boost::beast::flat_buffer& buffer_;
  SessionRegistry::Entry& entry_;  // its state: idle while waiting for the next request
  std::string_view peer_ip_;
  const config::IpAddress& peer_;
  std::string_view alt_svc_;  // the listener's Alt-Svc (h3), for every answer
  Services& w_;
  RequestHead request_;             // the request being read (reused: its memory stays)
  std::string head_;                // the message head being relayed, serialized (reused)
  ResponseHead response_;           // the upstream's response head (reused)
  std::array<char, kChunk> chunk_;  // the one body buffer of this connection
};

}  // namespace floodgate::http
