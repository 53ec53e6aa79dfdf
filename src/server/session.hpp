#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "exchange/services.hpp"

namespace floodgate::tls {
class ServerContexts;
}

namespace floodgate::http {

// What a listener speaks besides what TLS negotiates: HTTP/1.x, and on a plain listener
// HTTP/2 with prior knowledge (h2c).
struct FrontProtocols {
  bool http1 = true;
  bool h2c = false;
  // An rls.listen listener: every HTTP/2 stream is a call to Envoy's rate limit service
  // (Services::rls), and nothing but HTTP/2 is spoken.
  bool rls = false;
  // `h3=":PORT"; ma=86400` on a TLS listener that lists h3 (set once its port is bound): every
  // HTTP/1.1 and HTTP/2 answer says so, or clients never try HTTP/3.
  std::string_view alt_svc;  // a view of the acceptor's text, which outlives every session
};

// Serves one downstream connection until it closes, times out, or the worker drains; with
// `tls`, after a TLS handshake with the certificate its SNI selects (and the protocol ALPN
// settles on: h2 or HTTP/1.1).
boost::asio::awaitable<void> run_session(boost::asio::ip::tcp::socket socket,
                                         std::shared_ptr<const tls::ServerContexts> tls,
                                         FrontProtocols protocols, Services& services);

}  // namespace floodgate::http
