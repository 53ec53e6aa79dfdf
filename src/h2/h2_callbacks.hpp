#pragma once
// nghttp2's callbacks for an H2Connection (h2_connection.hpp). Each runs inside mem_recv or
// mem_send on the worker's thread, and none lets an exception out (nghttp2 is C): a failure
// becomes NGHTTP2_ERR_CALLBACK_FAILURE, which ends the connection.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <utility>

#include "h2_connection.hpp"
#include "nghttp2_util.hpp"

namespace floodgate::http {

struct H2Callbacks {
  template <typename F>
  static int guarded(F&& f) noexcept {
    return nghttp2_guarded(std::forward<F>(f));
  }
  static H2Connection& self(void* user);
  static H2Stream* find(H2Connection& c, std::int32_t id);
  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                           const std::uint8_t* data, std::size_t len, void* user);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user);
  static ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*);
  // The response body: what the stream's coroutine has put in `out` so far.
  static ssize_t read_body_of(H2Stream& stream, std::uint8_t* buf, std::size_t length,
                              std::uint32_t* flags);
};

}  // namespace floodgate::http
