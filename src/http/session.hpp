#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "worker_context.hpp"

namespace floodgate::tls {
class ServerContexts;
}

namespace floodgate::http {

// Serves one downstream connection until it closes, times out, or the worker drains; with
// `tls`, after a TLS handshake with the certificate its SNI selects.
boost::asio::awaitable<void> run_session(boost::asio::ip::tcp::socket socket,
                                         std::shared_ptr<const tls::ServerContexts> tls,
                                         WorkerContext& worker);

}  // namespace floodgate::http
