#pragma once
// A QUIC client over a plain UDP socket, written with ngtcp2's client side, its GnuTLS helper
// and nghttp3: what the HTTP/3 flood client (h3_flood.cpp) and the QUIC fuzz target
// (fuzz/fuzz_quic.cpp) drive. It checks no certificate. Blocking reads with a timeout
// (`pump`), one thread, test code only.

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace floodgate::testing {

inline ngtcp2_tstamp now() {
  return static_cast<ngtcp2_tstamp>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

inline void random_bytes(std::uint8_t* p, std::size_t n) {
  gnutls_rnd(GNUTLS_RND_NONCE, p, n);
}

inline constexpr const char* kPriority =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
    "+AES-256-GCM:+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1";

struct QuicSocket {
  int fd = -1;
  sockaddr_in server{};
  sockaddr_in local{};
  std::uint64_t bytes_in = 0, bytes_out = 0, datagrams_in = 0, retries = 0;
  explicit QuicSocket(std::uint16_t port) {
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    server.sin_family = AF_INET;
    server.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof server);
    socklen_t len = sizeof local;
    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  }
  ~QuicSocket() { close(fd); }
  void send(const std::uint8_t* p, std::size_t n) {
    if (::send(fd, p, n, 0) > 0) bytes_out += n;
  }
  // One datagram within `timeout_ms` (0 bytes: none came).
  std::size_t receive(std::uint8_t* p, std::size_t cap, int timeout_ms) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return 0;
    const auto n = recv(fd, p, cap, 0);
    if (n <= 0) return 0;
    bytes_in += static_cast<std::size_t>(n);
    ++datagrams_in;
    // A Retry: a long header (0x80) of type 3 (bits 0x30) in QUIC v1.
    if ((p[0] & 0x80) && ((p[0] & 0x30) >> 4) == 3) ++retries;
    return static_cast<std::size_t>(n);
  }
};

class QuicClient {
 public:
  explicit QuicClient(QuicSocket& sock) : sock_(sock) {}
  ~QuicClient() {
    if (h3_) nghttp3_conn_del(h3_);
    if (conn_) ngtcp2_conn_del(conn_);
    if (tls_) gnutls_deinit(tls_);
    if (cred_) gnutls_certificate_free_credentials(cred_);
  }

  // `window`: the flow-control window each of our streams gives the server; `stall`: the bytes
  // of a response are never consumed, so that window never reopens (a reader that takes
  // nothing).
  bool init(std::uint64_t window = 1 << 20, bool stall = false) {
    stall_ = stall;
    ngtcp2_cid dcid;
    dcid.datalen = 18;
    scid_.datalen = 8;
    random_bytes(dcid.data, dcid.datalen);
    random_bytes(scid_.data, scid_.datalen);
    const auto& scid = scid_;
    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now();
    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_stream_data_bidi_local = window;
    params.initial_max_stream_data_uni = 1 << 20;
    params.initial_max_data = 16 << 20;
    params.initial_max_streams_uni = 3;
    params.max_idle_timeout = 60 * NGTCP2_SECONDS;
    ngtcp2_callbacks cb{};
    cb.client_initial = ngtcp2_crypto_client_initial_cb;
    cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    cb.encrypt = ngtcp2_crypto_encrypt_cb;
    cb.decrypt = ngtcp2_crypto_decrypt_cb;
    cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
    cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
    cb.update_key = ngtcp2_crypto_update_key_cb;
    cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
    cb.rand = [](std::uint8_t* p, std::size_t n, const ngtcp2_rand_ctx*) { random_bytes(p, n); };
    cb.get_new_connection_id = [](ngtcp2_conn*, ngtcp2_cid* cid, std::uint8_t* token,
                                  std::size_t len, void*) {
      cid->datalen = len;
      random_bytes(cid->data, len);
      random_bytes(token, NGTCP2_STATELESS_RESET_TOKENLEN);
      return 0;
    };
    cb.handshake_completed = [](ngtcp2_conn*, void* user) {
      static_cast<QuicClient*>(user)->handshake_done_ = true;
      return 0;
    };
    cb.recv_rx_key = [](ngtcp2_conn*, ngtcp2_encryption_level level, void* user) {
      if (level != NGTCP2_ENCRYPTION_LEVEL_1RTT) return 0;
      return static_cast<QuicClient*>(user)->setup_http3() ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
    };
    cb.recv_stream_data = [](ngtcp2_conn* conn, std::uint32_t flags, std::int64_t id, std::uint64_t,
                             const std::uint8_t* data, std::size_t len, void* user, void*) {
      auto* c = static_cast<QuicClient*>(user);
      if (!c->h3_) return 0;
      const auto n = nghttp3_conn_read_stream(c->h3_, id, data, len,
                                              (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
      if (n < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
      ngtcp2_conn_extend_max_stream_offset(conn, id, static_cast<std::uint64_t>(n));
      ngtcp2_conn_extend_max_offset(conn, static_cast<std::uint64_t>(n));
      return 0;
    };
    cb.acked_stream_data_offset = [](ngtcp2_conn*, std::int64_t id, std::uint64_t,
                                     std::uint64_t len, void* user, void*) {
      auto* c = static_cast<QuicClient*>(user);
      return c->h3_ && nghttp3_conn_add_ack_offset(c->h3_, id, len) != 0
                 ? NGTCP2_ERR_CALLBACK_FAILURE
                 : 0;
    };
    cb.stream_close = [](ngtcp2_conn*, std::uint32_t flags, std::int64_t id, std::uint64_t code,
                         void* user, void*) {
      auto* c = static_cast<QuicClient*>(user);
      if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
      if (c->h3_) nghttp3_conn_close_stream(c->h3_, id, code);
      ++c->streams_closed_;
      return 0;
    };
    cb.extend_max_stream_data = [](ngtcp2_conn*, std::int64_t id, std::uint64_t, void* user,
                                   void*) {
      auto* c = static_cast<QuicClient*>(user);
      if (c->h3_) nghttp3_conn_unblock_stream(c->h3_, id);
      return 0;
    };
    ngtcp2_path path{{reinterpret_cast<ngtcp2_sockaddr*>(&sock_.local), sizeof sock_.local},
                     {reinterpret_cast<ngtcp2_sockaddr*>(&sock_.server), sizeof sock_.server},
                     nullptr};
    if (ngtcp2_conn_client_new(&conn_, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings,
                               &params, nullptr, this) != 0)
      return false;
    if (gnutls_init(&tls_, GNUTLS_CLIENT) != 0 ||
        gnutls_priority_set_direct(tls_, kPriority, nullptr) != 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(tls_) != 0 ||
        gnutls_certificate_allocate_credentials(&cred_) != 0 ||
        gnutls_credentials_set(tls_, GNUTLS_CRD_CERTIFICATE, cred_) != 0)
      return false;
    ref_.get_conn = [](ngtcp2_crypto_conn_ref* r) {
      return static_cast<ngtcp2_conn*>(r->user_data);
    };
    ref_.user_data = conn_;
    gnutls_session_set_ptr(tls_, &ref_);
    gnutls_datum_t alpn{const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>("h3")),
                        2};
    gnutls_alpn_set_protocols(tls_, &alpn, 1, 0);
    gnutls_server_name_set(tls_, GNUTLS_NAME_DNS, "localhost", 9);
    ngtcp2_conn_set_tls_native_handle(conn_, tls_);
    return true;
  }

  // Everything ngtcp2 and nghttp3 would send now; false once the connection is over.
  bool write() {
    std::array<std::uint8_t, 1452> buf;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi{};
    for (int i = 0; i < 256; ++i) {
      std::int64_t id = -1;
      int fin = 0;
      std::array<nghttp3_vec, 16> vec;
      nghttp3_ssize count = 0;
      if (h3_) {
        count = nghttp3_conn_writev_stream(h3_, &id, &fin, vec.data(), vec.size());
        if (count < 0) return false;
      }
      ngtcp2_ssize written = -1;
      std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
      if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
      const auto n = ngtcp2_conn_writev_stream(
          conn_, &ps.path, &pi, buf.data(), buf.size(), &written, flags, id,
          reinterpret_cast<const ngtcp2_vec*>(vec.data()), static_cast<std::size_t>(count), now());
      if (n < 0) {
        if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
          nghttp3_conn_block_stream(h3_, id);
          continue;
        }
        if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
          nghttp3_conn_shutdown_stream_write(h3_, id);
          continue;
        }
        if (n == NGTCP2_ERR_WRITE_MORE) {
          nghttp3_conn_add_write_offset(h3_, id, static_cast<std::size_t>(written));
          continue;
        }
        return false;
      }
      if (written >= 0 && h3_)
        nghttp3_conn_add_write_offset(h3_, id, static_cast<std::size_t>(written));
      if (n == 0) break;
      sock_.send(buf.data(), static_cast<std::size_t>(n));
    }
    ngtcp2_conn_update_pkt_tx_time(conn_, now());
    return true;
  }

  // Reads (and handles timers) for up to `ms`; false once the connection is over.
  bool pump(int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    std::array<std::uint8_t, 65536> buf;
    while (!over_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            until - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) break;
      const auto expiry = ngtcp2_conn_get_expiry(conn_);
      const auto t = now();
      int wait = static_cast<int>(left);
      if (expiry != UINT64_MAX)
        wait = std::min<int>(wait, expiry > t ? static_cast<int>((expiry - t) / 1000000) + 1 : 0);
      const auto n = sock_.receive(buf.data(), buf.size(), wait);
      if (n > 0) {
        ngtcp2_path path{{reinterpret_cast<ngtcp2_sockaddr*>(&sock_.local), sizeof sock_.local},
                         {reinterpret_cast<ngtcp2_sockaddr*>(&sock_.server), sizeof sock_.server},
                         nullptr};
        ngtcp2_pkt_info pi{};
        const int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, buf.data(), n, now());
        if (rv != 0) {
          over_ = true;
          const auto* err = ngtcp2_conn_get_ccerr(conn_);
          if (err && rv == NGTCP2_ERR_DRAINING) {
            closed_by_server_ = true;
            close_code_ = err->error_code;
          }
          break;
        }
      } else if (ngtcp2_conn_get_expiry(conn_) <= now()) {
        if (ngtcp2_conn_handle_expiry(conn_, now()) != 0) {
          over_ = true;
          break;
        }
      }
      if (!write()) over_ = true;
    }
    return !over_;
  }

  // Without waiting: every datagram already here read, timers handled, what is due written.
  // For a caller that runs the server on the same thread between calls (the fuzz target).
  bool poll_once() {
    std::array<std::uint8_t, 65536> buf;
    for (std::size_t n; !over_ && (n = sock_.receive(buf.data(), buf.size(), 0)) > 0;) {
      ngtcp2_path path{{reinterpret_cast<ngtcp2_sockaddr*>(&sock_.local), sizeof sock_.local},
                       {reinterpret_cast<ngtcp2_sockaddr*>(&sock_.server), sizeof sock_.server},
                       nullptr};
      ngtcp2_pkt_info pi{};
      if (ngtcp2_conn_read_pkt(conn_, &path, &pi, buf.data(), n, now()) != 0) over_ = true;
    }
    if (!over_ && ngtcp2_conn_get_expiry(conn_) <= now() &&
        ngtcp2_conn_handle_expiry(conn_, now()) != 0)
      over_ = true;
    if (!over_ && !write()) over_ = true;
    return !over_;
  }

  bool handshake(int ms) {
    if (!write()) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!handshake_done_ && !over_ && std::chrono::steady_clock::now() < until) pump(20);
    return handshake_done_;
  }

  // A GET of `path`; false when no stream may open.
  bool request(const std::string& authority, std::string_view path) {
    std::int64_t id = -1;
    if (ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr) != 0) return false;
    const auto nv = [](std::string_view n, std::string_view v) {
      return nghttp3_nv{reinterpret_cast<const std::uint8_t*>(n.data()),
                        reinterpret_cast<const std::uint8_t*>(v.data()), n.size(), v.size(),
                        NGHTTP3_NV_FLAG_NONE};
    };
    const nghttp3_nv head[] = {nv(":method", "GET"), nv(":scheme", "https"),
                               nv(":authority", authority), nv(":path", path)};
    if (nghttp3_conn_submit_request(h3_, id, head, std::size(head), nullptr, nullptr) != 0)
      return false;
    last_stream_ = id;
    return write();
  }

  // A GET whose stream is then reset at once by the client; false when no stream may open.
  bool reset_request(const std::string& authority) {
    if (!request(authority, "/slow/2000")) return false;
    ngtcp2_conn_shutdown_stream(conn_, 0, last_stream_, NGHTTP3_H3_REQUEST_CANCELLED);
    write();
    return true;
  }

  // `bytes` as the whole of a new request stream, raw (no HTTP/3 framing of ours): what a
  // fuzzer's input becomes. False when no stream may be opened or the connection is over.
  bool send_raw_stream(const std::uint8_t* bytes, std::size_t len) {
    std::int64_t id = -1;
    if (ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr) != 0) return false;
    std::array<std::uint8_t, 1452> buf;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi{};
    std::size_t off = 0;
    for (int i = 0; i < 1000 && !over_; ++i) {
      ngtcp2_vec v{const_cast<std::uint8_t*>(bytes + off), len - off};
      ngtcp2_ssize written = -1;
      const auto n =
          ngtcp2_conn_writev_stream(conn_, &ps.path, &pi, buf.data(), buf.size(), &written,
                                    NGTCP2_WRITE_STREAM_FLAG_FIN, id, &v, 1, now());
      if (n < 0) return false;
      if (written > 0) off += static_cast<std::size_t>(written);
      if (n == 0) return off == len;
      sock_.send(buf.data(), static_cast<std::size_t>(n));
      if (off == len && written >= 0) return true;
    }
    return off == len;
  }

  bool handshake_done() const { return handshake_done_; }
  void keep_alive(int ms) {
    ngtcp2_conn_set_keep_alive_timeout(conn_,
                                       static_cast<ngtcp2_duration>(ms) * NGTCP2_MILLISECONDS);
  }
  // Whether a long-header datagram is addressed to this client (its DCID is our SCID).
  bool addressed_to(const std::uint8_t* p, std::size_t n) const {
    return n > 6 + scid_.datalen && (p[0] & 0x80) && p[5] == scid_.datalen &&
           std::memcmp(p + 6, scid_.data, scid_.datalen) == 0;
  }
  bool over() const { return over_; }
  bool closed_by_server() const { return closed_by_server_; }
  std::uint64_t close_code() const { return close_code_; }
  std::uint64_t streams_closed() const { return streams_closed_; }

 private:
  bool setup_http3() {
    nghttp3_callbacks cb{};
    cb.deferred_consume = [](nghttp3_conn*, std::int64_t id, std::size_t n, void* user, void*) {
      auto* c = static_cast<QuicClient*>(user);
      ngtcp2_conn_extend_max_stream_offset(c->conn_, id, n);
      ngtcp2_conn_extend_max_offset(c->conn_, n);
      return 0;
    };
    cb.recv_data = [](nghttp3_conn*, std::int64_t id, const std::uint8_t*, std::size_t n,
                      void* user, void*) {
      auto* c = static_cast<QuicClient*>(user);
      if (c->stall_) return 0;
      ngtcp2_conn_extend_max_stream_offset(c->conn_, id, n);
      ngtcp2_conn_extend_max_offset(c->conn_, n);
      return 0;
    };
    nghttp3_settings settings;
    nghttp3_settings_default(&settings);
    if (nghttp3_conn_client_new(&h3_, &cb, &settings, nghttp3_mem_default(), this) != 0)
      return false;
    std::int64_t control, encoder, decoder;
    return ngtcp2_conn_open_uni_stream(conn_, &control, nullptr) == 0 &&
           nghttp3_conn_bind_control_stream(h3_, control) == 0 &&
           ngtcp2_conn_open_uni_stream(conn_, &encoder, nullptr) == 0 &&
           ngtcp2_conn_open_uni_stream(conn_, &decoder, nullptr) == 0 &&
           nghttp3_conn_bind_qpack_streams(h3_, encoder, decoder) == 0;
  }

  QuicSocket& sock_;
  ngtcp2_conn* conn_ = nullptr;
  nghttp3_conn* h3_ = nullptr;
  gnutls_session_t tls_ = nullptr;
  gnutls_certificate_credentials_t cred_ = nullptr;
  ngtcp2_crypto_conn_ref ref_{};
  ngtcp2_cid scid_{};
  bool stall_ = false;
  std::int64_t last_stream_ = -1;
  bool handshake_done_ = false;
  bool over_ = false;
  bool closed_by_server_ = false;
  std::uint64_t close_code_ = 0;
  std::uint64_t streams_closed_ = 0;
};

}  // namespace floodgate::testing
