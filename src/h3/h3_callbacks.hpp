#pragma once
// The C callbacks an H3Connection gives ngtcp2 and nghttp3 (h3_callbacks.cpp): each a static
// member, a friend of the connection, that never lets an exception out.

#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>

#include <cstddef>
#include <cstdint>

namespace floodgate::http {

struct H3Callbacks {
  static ngtcp2_callbacks quic();
  static nghttp3_callbacks http3();
  static nghttp3_ssize read_body(nghttp3_conn* h3, std::int64_t id, nghttp3_vec* vec,
                                 std::size_t veccnt, std::uint32_t* pflags, void* user,
                                 void* stream_user);

  // ngtcp2's
  static int recv_stream_data(ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id,
                              std::uint64_t offset, const std::uint8_t* data, std::size_t len,
                              void* user, void* stream_user);
  static int acked_stream_data_offset(ngtcp2_conn* conn, std::int64_t id, std::uint64_t offset,
                                      std::uint64_t datalen, void* user, void* stream_user);
  static int stream_close(ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id,
                          std::uint64_t app_error_code, void* user, void* stream_user);
  static int stream_reset(ngtcp2_conn* conn, std::int64_t id, std::uint64_t final_size,
                          std::uint64_t app_error_code, void* user, void* stream_user);
  static int stream_stop_sending(ngtcp2_conn* conn, std::int64_t id, std::uint64_t app_error_code,
                                 void* user, void* stream_user);
  static int extend_max_remote_streams_bidi(ngtcp2_conn* conn, std::uint64_t max_streams,
                                            void* user);
  static int extend_max_stream_data(ngtcp2_conn* conn, std::int64_t id, std::uint64_t max_data,
                                    void* user, void* stream_user);
  static void rand(std::uint8_t* dest, std::size_t len, const ngtcp2_rand_ctx* ctx);
  static int get_new_connection_id(ngtcp2_conn* conn, ngtcp2_cid* cid, std::uint8_t* token,
                                   std::size_t cidlen, void* user);
  static int remove_connection_id(ngtcp2_conn* conn, const ngtcp2_cid* cid, void* user);
  static int recv_tx_key(ngtcp2_conn* conn, ngtcp2_encryption_level level, void* user);
  static int handshake_completed(ngtcp2_conn* conn, void* user);

  // nghttp3's
  static int begin_headers(nghttp3_conn* h3, std::int64_t id, void* user, void* stream_user);
  static int recv_header(nghttp3_conn* h3, std::int64_t id, std::int32_t token, nghttp3_rcbuf* name,
                         nghttp3_rcbuf* value, std::uint8_t flags, void* user, void* stream_user);
  static int end_headers(nghttp3_conn* h3, std::int64_t id, int fin, void* user, void* stream_user);
  static int begin_trailers(nghttp3_conn* h3, std::int64_t id, void* user, void* stream_user);
  static int end_trailers(nghttp3_conn* h3, std::int64_t id, int fin, void* user,
                          void* stream_user);
  static int recv_data(nghttp3_conn* h3, std::int64_t id, const std::uint8_t* data, std::size_t len,
                       void* user, void* stream_user);
  static int deferred_consume(nghttp3_conn* h3, std::int64_t id, std::size_t consumed, void* user,
                              void* stream_user);
  static int end_stream(nghttp3_conn* h3, std::int64_t id, void* user, void* stream_user);
  static int stream_closed(nghttp3_conn* h3, std::int64_t id, std::uint64_t code, void* user,
                           void* stream_user);
  static int acked_stream_data(nghttp3_conn* h3, std::int64_t id, std::uint64_t datalen, void* user,
                               void* stream_user);
  static int stop_sending(nghttp3_conn* h3, std::int64_t id, std::uint64_t code, void* user,
                          void* stream_user);
  static int reset_stream(nghttp3_conn* h3, std::int64_t id, std::uint64_t code, void* user,
                          void* stream_user);
};

}  // namespace floodgate::http
