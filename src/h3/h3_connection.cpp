#include "h3_connection.hpp"

#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include <boost/asio/co_spawn.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "floodgate/tls/quic_credentials.hpp"
#include "h3_callbacks.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"
#include "quic_endpoint.hpp"
#include "quic_time.hpp"

namespace floodgate::http {

using udp = asio::ip::udp;

namespace {

// TLS 1.3 only (QUIC), with the suites QUIC defines, and no middlebox compatibility mode
// (RFC 9001 8.4).
constexpr const char* kPriority =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:"
    "+AES-256-GCM:+CHACHA20-POLY1305:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
    "+GROUP-SECP384R1";
// Flow control: how far a client may send ahead of what floodgate has forwarded, per stream and
// per connection (ngtcp2 widens each up to its max_* as the connection proves fast).
constexpr std::uint64_t kStreamWindow = 256 * 1024;
constexpr std::uint64_t kMaxStreamWindow = 1024 * 1024;
constexpr std::uint64_t kConnectionWindow = 1024 * 1024;
constexpr std::uint64_t kMaxConnectionWindow = 8 * 1024 * 1024;
// Datagrams one write sends at most before it yields (ngtcp2's pacing decides when more go).
constexpr std::size_t kMaxBurst = 64;
// The largest datagram floodgate sends: what fits an Ethernet frame in IPv6 (RFC 9000 14).
constexpr std::size_t kMaxPacket = 1452;

std::string peer_text(const udp::endpoint& ep) {
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.to_string();
}

ngtcp2_conn* conn_of_ref(ngtcp2_crypto_conn_ref* ref);

}  // namespace

H3Connection::H3Connection(QuicEndpoint& endpoint, Services& w, ConnectionBudget::Slot slot,
                           std::shared_ptr<const tls::QuicCredentials> credentials,
                           const udp::endpoint& local, const udp::endpoint& peer)
    : Entry(w.sessions),
      ep_(endpoint),
      w_(w),
      slot_(std::move(slot)),
      credentials_(std::move(credentials)),
      local_(local),
      peer_addr_(peer),
      peer_ip_(peer_text(peer)),
      peer_(config::parse_ip(peer_ip_).value_or(config::IpAddress{})),
      config_(w.snapshot()),
      timer_(endpoint.executor()),
      tasks_done_(endpoint.executor()),
      max_header_bytes_(config_->server.max_header_bytes),
      resets_(config_->server.http2.max_resets_per_second) {
  ngtcp2_ccerr_default(&last_error_);
  w_.metrics.active_connections.fetch_add(1, std::memory_order_relaxed);
}

H3Connection::~H3Connection() {
  for (const auto& cid : own_cids_) ep_.remove_cid(cid);
  if (conn_) {
    std::vector<ngtcp2_cid> cids(ngtcp2_conn_get_scid(conn_, nullptr));
    ngtcp2_conn_get_scid(conn_, cids.data());
    for (const auto& cid : cids) ep_.remove_cid(cid);
  }
  if (handshaking_) ep_.handshake_ended();
  if (h3_) nghttp3_conn_del(h3_);
  if (conn_) ngtcp2_conn_del(conn_);
  if (tls_) gnutls_deinit(tls_);
  w_.metrics.active_connections.fetch_sub(1, std::memory_order_relaxed);
}

ngtcp2_path H3Connection::path_to(const udp::endpoint& remote) {
  return {quic_addr(local_), quic_addr(remote), nullptr};
}

bool H3Connection::init(const ngtcp2_pkt_hd& hd, const ngtcp2_cid* original_dcid) {
  ep_.handshake_started();
  const auto& server = config_->server;
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = quic_now();
  settings.max_tx_udp_payload_size = kMaxPacket;
  settings.max_window = kMaxConnectionWindow;
  settings.max_stream_window = kMaxStreamWindow;
  // Both default to none: a client that stops mid-handshake would hold its state for ever.
  settings.handshake_timeout =
      static_cast<ngtcp2_duration>(server.timeouts.header_read.count()) * NGTCP2_MILLISECONDS;
  if (hd.tokenlen > 0) {
    settings.token = hd.token;
    settings.tokenlen = hd.tokenlen;
    settings.token_type = NGTCP2_TOKEN_TYPE_RETRY;
  }
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_stream_data_bidi_remote = kStreamWindow;
  params.initial_max_stream_data_uni = kStreamWindow;
  params.initial_max_data = kConnectionWindow;
  params.initial_max_streams_bidi = server.http2.max_concurrent_streams;
  params.initial_max_streams_uni = 3;  // control and the two QPACK streams
  params.max_idle_timeout =
      static_cast<ngtcp2_duration>(server.timeouts.idle.count()) * NGTCP2_MILLISECONDS;
  params.disable_active_migration = 1;
  params.original_dcid_present = 1;
  if (original_dcid) {
    params.original_dcid = *original_dcid;
    params.retry_scid = hd.dcid;
    params.retry_scid_present = 1;
  } else {
    params.original_dcid = hd.dcid;
  }
  const auto scid = ep_.new_cid();
  const auto& secret = ep_.secret();
  if (ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, secret.data(),
                                                   secret.size(), &scid) != 0)
    return false;
  params.stateless_reset_token_present = 1;
  const auto callbacks = H3Callbacks::quic();
  const auto path = path_to(peer_addr_);
  if (ngtcp2_conn_server_new(&conn_, &hd.scid, &scid, &path, hd.version, &callbacks, &settings,
                             &params, nullptr, this) != 0) {
    conn_ = nullptr;
    return false;
  }
  if (!setup_tls()) return false;
  // The client's first DCID (it may send Initials to it until it learns ours) and ours.
  own_cids_.push_back(hd.dcid);
  ep_.add_cid(hd.dcid, *this);
  ep_.add_cid(scid, *this);
  return true;
}

namespace {
ngtcp2_conn* conn_of_ref(ngtcp2_crypto_conn_ref* ref) {
  return static_cast<ngtcp2_conn*>(ref->user_data);
}
}  // namespace

bool H3Connection::setup_tls() {
  if (!credentials_) return false;
  // No early data and no session tickets: every request comes after a full handshake, from a
  // validated address (a replayed 0-RTT request could be charged to a limit twice).
  if (gnutls_init(&tls_, GNUTLS_SERVER | GNUTLS_NO_AUTO_SEND_TICKET) != 0) {
    tls_ = nullptr;
    return false;
  }
  if (gnutls_priority_set_direct(tls_, kPriority, nullptr) != 0) return false;
  if (ngtcp2_crypto_gnutls_configure_server_session(tls_) != 0) return false;
  conn_ref_.get_conn = &conn_of_ref;
  conn_ref_.user_data = conn_;
  gnutls_session_set_ptr(tls_, &conn_ref_);
  if (config_->tls_fingerprints) handshake_.fingerprints = &fingerprints_;
  if (!credentials_->configure(tls_, handshake_)) return false;
  gnutls_datum_t alpn{const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>("h3")), 2};
  if (gnutls_alpn_set_protocols(tls_, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) return false;
  ngtcp2_conn_set_tls_native_handle(conn_, tls_);
  return true;
}

bool H3Connection::setup_http3() {
  if (h3_) return true;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  settings.max_field_section_size = max_header_bytes_;
  settings.qpack_max_dtable_capacity = 4096;
  settings.qpack_blocked_streams = 100;
  const auto callbacks = H3Callbacks::http3();
  if (nghttp3_conn_server_new(&h3_, &callbacks, &settings, nghttp3_mem_default(), this) != 0) {
    h3_ = nullptr;
    return false;
  }
  const auto* params = ngtcp2_conn_get_local_transport_params(conn_);
  nghttp3_conn_set_max_client_streams_bidi(h3_, params->initial_max_streams_bidi);
  if (ngtcp2_conn_get_streams_uni_left(conn_) < 3) return false;
  std::int64_t control = 0, encoder = 0, decoder = 0;
  if (ngtcp2_conn_open_uni_stream(conn_, &control, nullptr) != 0 ||
      nghttp3_conn_bind_control_stream(h3_, control) != 0 ||
      ngtcp2_conn_open_uni_stream(conn_, &encoder, nullptr) != 0 ||
      ngtcp2_conn_open_uni_stream(conn_, &decoder, nullptr) != 0 ||
      nghttp3_conn_bind_qpack_streams(h3_, encoder, decoder) != 0)
    return false;
  return true;
}

void H3Connection::feed(const udp::endpoint& from, std::span<const std::uint8_t> packet) {
  if (done_) return;
  const auto path = path_to(from);
  ngtcp2_pkt_info pi{};
  const int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, packet.data(), packet.size(), quic_now());
  if (close_pending_) {
    send_close();
  } else if (rv != 0) {
    switch (rv) {
      case NGTCP2_ERR_DRAINING:   // the client closed
      case NGTCP2_ERR_DROP_CONN:  // ngtcp2 says: drop it without a word
      case NGTCP2_ERR_RETRY:      // not used: Retry is decided before a connection exists
        done_ = true;
        break;
      case NGTCP2_ERR_CRYPTO:
        if (last_error_.type == NGTCP2_CCERR_TYPE_TRANSPORT && last_error_.error_code == 0)
          ngtcp2_ccerr_set_tls_alert(&last_error_, ngtcp2_conn_get_tls_alert(conn_), nullptr, 0);
        send_close();
        break;
      default:
        if (last_error_.type == NGTCP2_CCERR_TYPE_TRANSPORT && last_error_.error_code == 0)
          ngtcp2_ccerr_set_liberr(&last_error_, rv, nullptr, 0);
        send_close();
        break;
    }
  }
  kick();
}

void H3Connection::kick() {
  timer_.cancel();
}

asio::awaitable<void> H3Connection::run() {
  for (;;) {
    if (!done_) {
      if (w_.draining && h3_ && !goaway_sent_) {
        // No new request stream is taken; those under way finish.
        goaway_sent_ = true;
        nghttp3_conn_submit_shutdown_notice(h3_);
        nghttp3_conn_shutdown(h3_);
      }
      if (w_.draining && (tasks_ == 0 || !h3_)) {
        ngtcp2_ccerr_set_application_error(&last_error_, NGHTTP3_H3_NO_ERROR, nullptr, 0);
        write();
        send_close();
      }
    }
    if (!done_) write();
    if (close_pending_) send_close();
    if (done_) break;
    state = tasks_ > 0 || handshaking_ ? State::busy : State::idle;
    const auto expiry = ngtcp2_conn_get_expiry(conn_);
    const auto t = quic_now();
    if (expiry == UINT64_MAX)
      timer_.expires_after(std::chrono::hours(24));
    else
      timer_.expires_after(std::chrono::nanoseconds(expiry > t ? expiry - t : 0));
    auto [ec] = co_await timer_.async_wait(as_tuple(use_awaitable));
    if (ec || done_) continue;  // a kick: write what changed
    const int rv = ngtcp2_conn_handle_expiry(conn_, quic_now());
    if (rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
      if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT)
        w_.metrics.http3_handshake_timeouts.fetch_add(1, std::memory_order_relaxed);
      done_ = true;  // silently: the client's own idle timer ends it there
    } else if (rv != 0) {
      ngtcp2_ccerr_set_liberr(&last_error_, rv, nullptr, 0);
      send_close();
    }
  }
  state = State::closing;
  closed_all_streams();
  while (tasks_ > 0) {
    tasks_done_.expires_after(std::chrono::seconds(1));
    co_await tasks_done_.async_wait(as_tuple(use_awaitable));
  }
}

void H3Connection::closed_all_streams() {
  for (auto& [id, s] : streams_) {
    s->closed = true;
    s->notify();
  }
}

void H3Connection::write() {
  if (done_ || !conn_) return;
  std::array<std::uint8_t, kMaxPacket> buf;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  const auto ts = quic_now();
  const auto quantum = ngtcp2_conn_get_send_quantum(conn_);
  const auto max_packets = std::clamp<std::size_t>(quantum / kMaxPacket, 1, kMaxBurst);
  for (std::size_t sent = 0; sent < max_packets;) {
    std::int64_t stream_id = -1;
    int fin = 0;
    std::array<nghttp3_vec, 16> vec;
    nghttp3_ssize count = 0;
    if (h3_ && ngtcp2_conn_get_max_data_left(conn_) > 0) {
      count = nghttp3_conn_writev_stream(h3_, &stream_id, &fin, vec.data(), vec.size());
      if (count < 0) {
        ngtcp2_ccerr_set_application_error(
            &last_error_, nghttp3_err_infer_quic_app_error_code(static_cast<int>(count)), nullptr,
            0);
        send_close();
        return;
      }
    }
    ngtcp2_ssize written = -1;
    std::uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    if (fin) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    const auto n = ngtcp2_conn_writev_stream(
        conn_, &ps.path, &pi, buf.data(), buf.size(), &written, flags, stream_id,
        reinterpret_cast<const ngtcp2_vec*>(vec.data()), static_cast<std::size_t>(count), ts);
    if (n < 0) {
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        nghttp3_conn_block_stream(h3_, stream_id);
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
        nghttp3_conn_shutdown_stream_write(h3_, stream_id);
        continue;
      }
      if (n == NGTCP2_ERR_WRITE_MORE) {
        if (nghttp3_conn_add_write_offset(h3_, stream_id, static_cast<std::size_t>(written)) != 0)
          break;
        continue;
      }
      ngtcp2_ccerr_set_liberr(&last_error_, static_cast<int>(n), nullptr, 0);
      send_close();
      return;
    }
    if (written >= 0 && h3_ &&
        nghttp3_conn_add_write_offset(h3_, stream_id, static_cast<std::size_t>(written)) != 0) {
      ngtcp2_ccerr_set_application_error(&last_error_, NGHTTP3_H3_INTERNAL_ERROR, nullptr, 0);
      send_close();
      return;
    }
    if (n == 0) break;  // nothing more may go now (congestion, pacing, or nothing to send)
    ep_.send(ps.path.remote, {buf.data(), static_cast<std::size_t>(n)});
    ++sent;
  }
  ngtcp2_conn_update_pkt_tx_time(conn_, ts);
}

void H3Connection::send_close() {
  if (close_sent_ || !conn_) {
    done_ = true;
    return;
  }
  close_sent_ = true;
  done_ = true;
  if (ngtcp2_conn_in_closing_period(conn_) || ngtcp2_conn_in_draining_period(conn_)) return;
  std::array<std::uint8_t, kMaxPacket> buf;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  const auto n = ngtcp2_conn_write_connection_close(conn_, &ps.path, &pi, buf.data(), buf.size(),
                                                    &last_error_, quic_now());
  if (n > 0) ep_.send(ps.path.remote, {buf.data(), static_cast<std::size_t>(n)});
}

void H3Connection::abort() {
  ngtcp2_ccerr_set_application_error(&last_error_, NGHTTP3_H3_NO_ERROR, nullptr, 0);
  send_close();
  for (auto& [id, s] : streams_)
    if (s->upstream) {
      boost::system::error_code ignored;
      s->upstream->stream.socket().close(ignored);
    }
  closed_all_streams();
  kick();
}

}  // namespace floodgate::http
