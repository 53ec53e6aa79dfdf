#pragma once
// An HTTP/1.x client connection as the upstream leg and the tunnel use it: its transport,
// the bytes read from it past the request's head, and the connection's one deadline and
// buffers. Owned by the session; these are references into it.

#include <boost/beast/core/flat_buffer.hpp>

#include <span>
#include <string>

#include "h1_parser.hpp"
#include "net/transport.hpp"
#include "net/watchdog.hpp"

namespace floodgate::http {

using RequestParser = H1Parser<true>;
using ResponseParser = H1Parser<false>;

struct Http1Client {
  Transport& transport;
  boost::beast::flat_buffer& buffer;  // read from the client, not yet consumed
  Watchdog& watch;                    // every socket operation of the connection runs under it
  std::span<char> chunk;              // the connection's one body buffer
  std::string& head;                  // the message head being relayed, serialized (reused)
  ResponseHead& response;             // an upstream's response head, read (reused)
};

}  // namespace floodgate::http
