#pragma once
// The client side of an HTTP/3 stream for the proxy driver: the shared stream front
// (exchange/stream_front.hpp) over an H3Connection, as HTTP/2's is. nghttp3 reads the response
// from H3Stream::out by reference, and each piece stays until the client acknowledges it.

#include "exchange/header_block.hpp"
#include "exchange/stream_front.hpp"
#include "h3_connection.hpp"

namespace floodgate::http {

using H3Front = StreamFront<H3Connection, H3Stream, HeaderBlock>;

}  // namespace floodgate::http
