#pragma once
// The client side of an HTTP/2 stream for the proxy driver: the shared stream front
// (exchange/stream_front.hpp) over an H2Connection. nghttp2's data provider drains the
// response from H2Stream::out as the client's window takes it.

#include "exchange/stream_front.hpp"
#include "h2_connection.hpp"
#include "h2_header_block.hpp"

namespace floodgate::http {

using H2Front = StreamFront<H2Connection, H2Stream, H2HeaderBlock>;

}  // namespace floodgate::http
