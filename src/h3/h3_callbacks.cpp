// ngtcp2's and nghttp3's callbacks for an H3Connection. Each is a C callback: its body catches
// everything and returns the library's error code, so that no exception crosses into C.

#include "h3_callbacks.hpp"

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "floodgate/ascii.hpp"
#include "h3_connection.hpp"
#include "quic_endpoint.hpp"

namespace floodgate::http {

namespace {

// Runs `body` (returning 0 or an error code), turning an exception into `failure`.
template <class Body>
int guarded(int failure, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return failure;
  }
}

H3Connection& conn_of(void* user) {
  return *static_cast<H3Connection*>(user);
}

std::string_view text_of(nghttp3_rcbuf* buf) {
  const auto b = nghttp3_rcbuf_get_buf(buf);
  return {reinterpret_cast<const char*>(b.base), b.len};
}

bool client_bidi(std::int64_t id) {
  return ngtcp2_is_bidi_stream(id) && (id & 0x1) == 0;
}

}  // namespace

// --- ngtcp2 ---

int H3Callbacks::recv_stream_data(ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id,
                                  std::uint64_t, const std::uint8_t* data, std::size_t len,
                                  void* user, void*) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (!c.h3_) return NGTCP2_ERR_CALLBACK_FAILURE;
    const auto n =
        nghttp3_conn_read_stream(c.h3_, id, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (n < 0) {
      ngtcp2_ccerr_set_application_error(
          &c.last_error_, nghttp3_err_infer_quic_app_error_code(static_cast<int>(n)), nullptr, 0);
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    // HTTP/3's own framing is consumed at once; a body's bytes only as they are forwarded.
    ngtcp2_conn_extend_max_stream_offset(conn, id, static_cast<std::uint64_t>(n));
    ngtcp2_conn_extend_max_offset(conn, static_cast<std::uint64_t>(n));
    return 0;
  });
}

int H3Callbacks::acked_stream_data_offset(ngtcp2_conn*, std::int64_t id, std::uint64_t,
                                          std::uint64_t datalen, void* user, void*) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (c.h3_ && nghttp3_conn_add_ack_offset(c.h3_, id, datalen) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
  });
}

int H3Callbacks::stream_close(ngtcp2_conn*, std::uint32_t flags, std::int64_t id,
                              std::uint64_t app_error_code, void* user, void*) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
      app_error_code = NGHTTP3_H3_NO_ERROR;
    if (c.h3_) {
      const int rv = nghttp3_conn_close_stream(c.h3_, id, app_error_code);
      if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND) {
        ngtcp2_ccerr_set_application_error(&c.last_error_,
                                           nghttp3_err_infer_quic_app_error_code(rv), nullptr, 0);
        return NGTCP2_ERR_CALLBACK_FAILURE;
      }
    }
    // A stream whose coroutine still runs is counted until it ends (stream_task_ended).
    auto it = c.streams_.find(id);
    if (it != c.streams_.end()) {
      auto& s = *it->second;
      s.closed = true;
      s.close_code = app_error_code;
      s.notify();
      if (!s.task_done) return 0;
      c.streams_.erase(it);
    }
    if (client_bidi(id)) c.extend_streams();
    return 0;
  });
}

// The client's RESET_STREAM: counted against the connection's reset budget (rapid reset).
int H3Callbacks::stream_reset(ngtcp2_conn*, std::int64_t id, std::uint64_t, std::uint64_t,
                              void* user, void*) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (c.h3_ && nghttp3_conn_shutdown_stream_read(c.h3_, id) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    if (client_bidi(id)) c.charge_reset();
    return 0;
  });
}

int H3Callbacks::stream_stop_sending(ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user,
                                     void*) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (c.h3_ && nghttp3_conn_shutdown_stream_read(c.h3_, id) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
  });
}

int H3Callbacks::extend_max_remote_streams_bidi(ngtcp2_conn*, std::uint64_t max_streams,
                                                void* user) {
  auto& c = conn_of(user);
  if (c.h3_) nghttp3_conn_set_max_client_streams_bidi(c.h3_, max_streams);
  return 0;
}

int H3Callbacks::extend_max_stream_data(ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user,
                                        void*) {
  auto& c = conn_of(user);
  if (c.h3_ && nghttp3_conn_unblock_stream(c.h3_, id) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

void H3Callbacks::rand(std::uint8_t* dest, std::size_t len, const ngtcp2_rand_ctx*) {
  gnutls_rnd(GNUTLS_RND_NONCE, dest, len);
}

int H3Callbacks::get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token,
                                       std::size_t, void* user) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    *cid = c.ep_.new_cid();
    const auto& secret = c.ep_.secret();
    if (ngtcp2_crypto_generate_stateless_reset_token(token, secret.data(), secret.size(), cid) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    c.ep_.add_cid(*cid, c);
    return 0;
  });
}

int H3Callbacks::remove_connection_id(ngtcp2_conn*, const ngtcp2_cid* cid, void* user) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    conn_of(user).ep_.remove_cid(*cid);
    return 0;
  });
}

int H3Callbacks::recv_tx_key(ngtcp2_conn*, ngtcp2_encryption_level level, void* user) {
  return guarded(NGTCP2_ERR_CALLBACK_FAILURE, [&] {
    if (level != NGTCP2_ENCRYPTION_LEVEL_1RTT) return 0;
    return conn_of(user).setup_http3() ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
  });
}

int H3Callbacks::handshake_completed(ngtcp2_conn*, void* user) {
  auto& c = conn_of(user);
  if (c.handshaking_) {
    c.handshaking_ = false;
    c.ep_.handshake_ended();
  }
  return 0;
}

ngtcp2_callbacks H3Callbacks::quic() {
  ngtcp2_callbacks cb{};
  cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.handshake_completed = &handshake_completed;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.recv_stream_data = &recv_stream_data;
  cb.acked_stream_data_offset = &acked_stream_data_offset;
  cb.stream_close = &stream_close;
  cb.rand = &rand;
  cb.get_new_connection_id = &get_new_connection_id;
  cb.remove_connection_id = &remove_connection_id;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.stream_reset = &stream_reset;
  cb.extend_max_remote_streams_bidi = &extend_max_remote_streams_bidi;
  cb.extend_max_stream_data = &extend_max_stream_data;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.stream_stop_sending = &stream_stop_sending;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.recv_tx_key = &recv_tx_key;
  return cb;
}

// --- nghttp3 ---

namespace {

H3Stream* stream_of(void* stream_user) {
  return static_cast<H3Stream*>(stream_user);
}

}  // namespace

int H3Callbacks::begin_headers(nghttp3_conn* h3, std::int64_t id, void* user, void*) {
  return guarded(NGHTTP3_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    auto s = std::make_shared<H3Stream>(id, c.timer_.get_executor());
    nghttp3_conn_set_stream_user_data(h3, id, s.get());
    c.streams_[id] = std::move(s);
    return 0;
  });
}

// Each field of the request's head. Its bytes are counted as SETTINGS_MAX_FIELD_SECTION_SIZE
// counts them (name, value and 32 each): nghttp3 only announces that bound, so past it the
// fields are dropped here and the stream is answered 431.
int H3Callbacks::recv_header(nghttp3_conn*, std::int64_t, std::int32_t token, nghttp3_rcbuf* name,
                             nghttp3_rcbuf* value, std::uint8_t, void* user, void* stream_user) {
  return guarded(NGHTTP3_ERR_CALLBACK_FAILURE, [&] {
    auto* s = stream_of(stream_user);
    if (!s) return 0;
    const auto n = text_of(name);
    const auto v = text_of(value);
    s->header_bytes += n.size() + v.size() + 32;
    if (s->header_bytes > conn_of(user).max_header_bytes_) return 0;
    if (s->in_trailers) {
      s->trailers.add(n, v);
      return 0;
    }
    switch (token) {
      case NGHTTP3_QPACK_TOKEN__METHOD:
        s->method = v;
        return 0;
      case NGHTTP3_QPACK_TOKEN__SCHEME:
        s->scheme = v;
        return 0;
      case NGHTTP3_QPACK_TOKEN__AUTHORITY:
        s->authority = v;
        return 0;
      case NGHTTP3_QPACK_TOKEN__PATH:
        s->path = v;
        return 0;
      case NGHTTP3_QPACK_TOKEN__PROTOCOL:
        s->extended_connect = true;
        return 0;
      case NGHTTP3_QPACK_TOKEN_COOKIE:
        if (!s->cookies.empty()) s->cookies += "; ";
        s->cookies += v;
        return 0;
      default:
        s->head.fields.add(n, v);
        return 0;
    }
  });
}

int H3Callbacks::end_headers(nghttp3_conn*, std::int64_t, int fin, void* user, void* stream_user) {
  return guarded(NGHTTP3_ERR_CALLBACK_FAILURE, [&] {
    auto* s = stream_of(stream_user);
    if (!s) return 0;
    s->head_done = true;
    if (fin) s->body_done = true;
    auto& c = conn_of(user);
    auto it = c.streams_.find(s->id);
    if (it != c.streams_.end()) c.start_stream(it->second);
    return 0;
  });
}

int H3Callbacks::begin_trailers(nghttp3_conn*, std::int64_t, void*, void* stream_user) {
  if (auto* s = stream_of(stream_user)) s->in_trailers = true;
  return 0;
}

int H3Callbacks::end_trailers(nghttp3_conn*, std::int64_t, int, void*, void* stream_user) {
  if (auto* s = stream_of(stream_user)) s->notify();
  return 0;
}

int H3Callbacks::recv_data(nghttp3_conn*, std::int64_t id, const std::uint8_t* data,
                           std::size_t len, void* user, void* stream_user) {
  return guarded(NGHTTP3_ERR_CALLBACK_FAILURE, [&] {
    auto* s = stream_of(stream_user);
    auto& c = conn_of(user);
    if (!s || s->discard_body || s->closed) {
      ngtcp2_conn_extend_max_stream_offset(c.conn_, id, len);
      ngtcp2_conn_extend_max_offset(c.conn_, len);
      return 0;
    }
    s->body.append(reinterpret_cast<const char*>(data), len);
    s->x.bytes_in += len;
    s->wake_out.cancel();
    s->wake.cancel();
    return 0;
  });
}

int H3Callbacks::deferred_consume(nghttp3_conn*, std::int64_t id, std::size_t consumed, void* user,
                                  void*) {
  auto& c = conn_of(user);
  ngtcp2_conn_extend_max_stream_offset(c.conn_, id, consumed);
  ngtcp2_conn_extend_max_offset(c.conn_, consumed);
  return 0;
}

int H3Callbacks::end_stream(nghttp3_conn*, std::int64_t, void*, void* stream_user) {
  if (auto* s = stream_of(stream_user)) {
    s->body_done = true;
    s->notify();
  }
  return 0;
}

int H3Callbacks::stream_closed(nghttp3_conn*, std::int64_t, std::uint64_t code, void*,
                               void* stream_user) {
  if (auto* s = stream_of(stream_user)) {
    s->closed = true;
    s->close_code = code;
    s->notify();
  }
  return 0;
}

// nghttp3 has freed the acknowledged bytes of the response: the pieces they were in go.
int H3Callbacks::acked_stream_data(nghttp3_conn*, std::int64_t, std::uint64_t datalen, void*,
                                   void* stream_user) {
  auto* s = stream_of(stream_user);
  if (!s) return 0;
  while (datalen > 0 && !s->out.empty()) {
    const auto left = s->out.front().size() - s->out_acked;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, datalen));
    s->out_acked += n;
    s->out_bytes -= n;
    datalen -= n;
    if (s->out_acked == s->out.front().size()) {
      s->out.pop_front();
      s->out_acked = 0;
      if (s->out_given > 0) --s->out_given;
    }
  }
  s->wake.cancel();
  return 0;
}

int H3Callbacks::stop_sending(nghttp3_conn*, std::int64_t id, std::uint64_t code, void* user,
                              void*) {
  auto& c = conn_of(user);
  if (ngtcp2_conn_shutdown_stream_read(c.conn_, 0, id, code) != 0)
    return NGHTTP3_ERR_CALLBACK_FAILURE;
  return 0;
}

// nghttp3 resets a stream whose message broke HTTP/3's rules: the client's doing, charged.
int H3Callbacks::reset_stream(nghttp3_conn*, std::int64_t id, std::uint64_t code, void* user,
                              void*) {
  return guarded(NGHTTP3_ERR_CALLBACK_FAILURE, [&] {
    auto& c = conn_of(user);
    if (ngtcp2_conn_shutdown_stream_write(c.conn_, 0, id, code) != 0)
      return NGHTTP3_ERR_CALLBACK_FAILURE;
    c.charge_reset();
    return 0;
  });
}

// The response body, by reference: the pieces not yet handed over, then its end (with
// trailers when it has them); nothing yet: WOULDBLOCK, resumed by H3Connection::resume.
nghttp3_ssize H3Callbacks::read_body(nghttp3_conn* h3, std::int64_t id, nghttp3_vec* vec,
                                     std::size_t veccnt, std::uint32_t* pflags, void*,
                                     void* stream_user) {
  auto* s = stream_of(stream_user);
  if (!s) return NGHTTP3_ERR_CALLBACK_FAILURE;
  std::size_t n = 0;
  while (n < veccnt && s->out_given < s->out.size()) {
    auto& piece = s->out[s->out_given++];
    vec[n].base = reinterpret_cast<std::uint8_t*>(piece.data());
    vec[n].len = piece.size();
    s->x.bytes_out += piece.size();
    ++n;
  }
  if (s->out_given == s->out.size() && s->out_done) {
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    if (!s->out_trailers.empty()) {
      *pflags |= NGHTTP3_DATA_FLAG_NO_END_STREAM;
      HeaderBlock block;
      for (const auto& f : s->out_trailers) block.add(f.name, f.value);
      std::vector<nghttp3_nv> nva;
      block.pairs_into<nghttp3_nv>(nva, NGHTTP3_NV_FLAG_NONE);
      if (nghttp3_conn_submit_trailers(h3, id, nva.data(), nva.size()) != 0)
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    }
    return static_cast<nghttp3_ssize>(n);
  }
  if (n == 0) {
    s->out_blocked = true;
    return NGHTTP3_ERR_WOULDBLOCK;
  }
  return static_cast<nghttp3_ssize>(n);
}

nghttp3_callbacks H3Callbacks::http3() {
  nghttp3_callbacks cb{};
  cb.acked_stream_data = &acked_stream_data;
  cb.stream_close = &stream_closed;
  cb.recv_data = &recv_data;
  cb.deferred_consume = &deferred_consume;
  cb.begin_headers = &begin_headers;
  cb.recv_header = &recv_header;
  cb.end_headers = &end_headers;
  cb.begin_trailers = &begin_trailers;
  cb.recv_trailer = &recv_header;
  cb.end_trailers = &end_trailers;
  cb.stop_sending = &stop_sending;
  cb.end_stream = &end_stream;
  cb.reset_stream = &reset_stream;
  return cb;
}

}  // namespace floodgate::http
