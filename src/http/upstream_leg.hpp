#pragma once
// The upstream leg of an admitted HTTP/1.x request: a pooled keep-alive connection to a
// server of the route's upstream (another server once when no connection can be made; one
// retry on a fresh connection when a reused one turns out closed), the request head and body
// relayed to it, the response head read and rewritten, and its body streamed back; an
// accepted WebSocket upgrade becomes a tunnel.

#include <boost/asio/awaitable.hpp>

#include "exchange.hpp"
#include "http1_client.hpp"
#include "worker_context.hpp"

namespace floodgate::http {

struct Forwarded {
  bool keep_alive = false;  // the client connection may carry another request
  // A status of ours the client must still be sent (nothing of a response reached it yet);
  // the connection closes after it. 0: nothing to send.
  int answer = 0;
};

// `parser` holds the request's head as received (the leg rewrites it for the upstream with
// prepare_upstream_head); its body, if any, is still unread.
boost::asio::awaitable<Forwarded> forward(WorkerContext& w, Http1Client client,
                                          RequestParser& parser, Exchange& x,
                                          const config::Upstream& up);

// The same to an h2 upstream's server (`protocol: h2`; http1_to_h2.cpp).
boost::asio::awaitable<Forwarded> forward_to_h2(WorkerContext& w, Http1Client client,
                                                RequestParser& parser, Exchange& x, ServerUse use);

}  // namespace floodgate::http
