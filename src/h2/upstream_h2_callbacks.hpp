#pragma once
// nghttp2's callbacks for an H2UpstreamConnection (upstream_h2.hpp), kept in
// upstream_h2_callbacks.cpp: how an origin's frames become an H2Call's head, body, trailers
// and end, and how a call's request body is handed to nghttp2.

#include <nghttp2/nghttp2.h>

#include <cstdint>

namespace floodgate::http {

// A callback set for an upstream session (the user data is the H2UpstreamConnection); the
// caller deletes it once the session is made. Null when nghttp2 cannot allocate it.
nghttp2_session_callbacks* new_upstream_callbacks();

// A request body's data provider (source.ptr is the H2Call): what the call has in `out`,
// then the end of the stream or its trailers.
ssize_t read_upstream_body(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void* user);

}  // namespace floodgate::http
