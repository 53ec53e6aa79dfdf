#pragma once
// What floodgate's two kinds of nghttp2 session share: the clients' (h2_connection.hpp, server
// mode) and the upstreams' (upstream_h2.hpp, client mode).

#include <nghttp2/nghttp2.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::http {

// A connection's reads (one nghttp2_session_mem_recv each) and writes (take_output's batch).
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kWriteBatch = 64 * 1024;

// A name or value nghttp2 hands a callback, as text.
inline std::string_view view(const std::uint8_t* p, std::size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

// Runs a callback's body so that no exception crosses into nghttp2 (C): one becomes
// NGHTTP2_ERR_CALLBACK_FAILURE, which ends the connection.
template <typename F>
int nghttp2_guarded(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
}

// Appends to `out` what the session has to send, until it has nothing more or `out` holds
// `batch` bytes: one write's worth.
inline void take_output(nghttp2_session* session, std::string& out, std::size_t batch) {
  while (out.size() < batch) {
    const std::uint8_t* data = nullptr;
    auto n = nghttp2_session_mem_send(session, &data);
    if (n <= 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

}  // namespace floodgate::http
