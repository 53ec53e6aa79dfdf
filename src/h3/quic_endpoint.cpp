#include "quic_endpoint.hpp"

#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <boost/asio/co_spawn.hpp>

#include <chrono>
#include <vector>

#include "floodgate/tls/quic_credentials.hpp"
#include "h3_connection.hpp"
#include "net/coro_names.hpp"
#include "net/report_exception.hpp"
#include "quic_time.hpp"

namespace floodgate::http {

using udp = asio::ip::udp;

namespace {

// Handshakes under way in one worker above which a new connection must first prove its address
// with a Retry (one more round trip): a flood of spoofed Initials then costs a stateless packet
// each, not a TLS handshake's state.
constexpr std::size_t kRetryAbove = 256;
// How long a Retry token is good for.
constexpr std::uint64_t kRetryTokenLife = 10 * NGTCP2_SECONDS;
// The largest datagram floodgate receives (QUIC's own limit is 65527).
constexpr std::size_t kMaxDatagram = 65536;

}  // namespace

QuicEndpoint::QuicEndpoint(udp::socket socket, std::uint8_t worker, const QuicSecret& secret,
                           std::size_t index,
                           std::shared_ptr<const tls::QuicCredentials> credentials, Services& w,
                           ConnectionBudget& connections)
    : socket_(std::move(socket)),
      worker_(worker),
      secret_(secret),
      index_(index),
      started_with_(std::move(credentials)),
      w_(w),
      connections_(connections) {
  boost::system::error_code ec;
  local_ = socket_.local_endpoint(ec);
  // Sends never wait: a datagram the kernel has no room for is lost, and QUIC sends it again.
  socket_.non_blocking(true, ec);
}

QuicEndpoint::~QuicEndpoint() = default;

asio::awaitable<void> QuicEndpoint::run() {
  looping_ = true;
  struct Ended {
    bool& looping;
    ~Ended() { looping = false; }
  } ended{looping_};
  std::vector<std::uint8_t> buffer(kMaxDatagram);
  for (;;) {
    udp::endpoint from;
    auto [ec, n] =
        co_await socket_.async_receive_from(asio::buffer(buffer), from, as_tuple(use_awaitable));
    if (!socket_.is_open() || ec == asio::error::operation_aborted) co_return;
    if (ec) continue;  // an ICMP error for an earlier send: nothing to do
    on_datagram(from, {buffer.data(), n});
  }
}

void QuicEndpoint::on_datagram(const udp::endpoint& from, std::span<const std::uint8_t> data) {
  // An empty datagram is no packet: ngtcp2 asserts on one (Debian builds it with assertions),
  // which would end the process. Found by fuzz_quic.
  if (data.empty()) return;
  ngtcp2_version_cid vc;
  const int rv = ngtcp2_pkt_decode_version_cid(&vc, data.data(), data.size(), kQuicCidLength);
  if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
    if (!closing_) send_version_negotiation(vc, from);
    return;
  }
  if (rv != 0) return;
  if (auto it = cids_.find(key_of(vc.dcid, vc.dcidlen)); it != cids_.end()) {
    it->second->feed(from, data);
    return;
  }
  if (vc.version == 0) {  // a short header: a connection that is not (or no longer) here
    send_stateless_reset(vc, data.size(), from);
    return;
  }
  if (!closing_) accept(from, data);
}

void QuicEndpoint::accept(const udp::endpoint& from, std::span<const std::uint8_t> data) {
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, data.data(), data.size()) != 0) return;
  // 0-RTT is never accepted (no session is resumed): a replayed request could be charged twice.
  if (hd.type == NGTCP2_PKT_0RTT) return;
  ngtcp2_cid original{};
  const ngtcp2_cid* original_dcid = nullptr;
  const auto ts = quic_now();
  if (hd.tokenlen > 0 && hd.token[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY2) {
    const auto remote = quic_addr(from);
    if (ngtcp2_crypto_verify_retry_token2(&original, hd.token, hd.tokenlen, secret_.data(),
                                          secret_.size(), hd.version, remote.addr, remote.addrlen,
                                          &hd.dcid, kRetryTokenLife, ts) != 0) {
      w_.metrics.http3_retries_failed.fetch_add(1, std::memory_order_relaxed);
      return;  // a forged or stale token: dropped (the client's own timers end it)
    }
    original_dcid = &original;
  } else if (handshaking_ >= kRetryAbove) {
    send_retry(hd, from);
    return;
  }
  // At server.max_connections a new one is not taken: its Initial is dropped, and the client
  // tries again (as a TCP connection waits in the listen queue).
  auto slot = connections_.try_take(w_.snapshot()->server.max_connections);
  if (!slot) {
    w_.metrics.count(metrics::Metrics::AcceptPause::max_connections);
    return;
  }
  auto conn =
      std::make_unique<H3Connection>(*this, w_, std::move(slot), credentials(), local_, from);
  if (!conn->init(hd, original_dcid)) return;
  auto& c = *conn;
  live_.emplace(&c, std::move(conn));
  c.feed(from, data);
  asio::co_spawn(socket_.get_executor(), c.run(),
                 [this, &c, report = log_exceptions(w_.log, w_.metrics, "http3 connection")](
                     std::exception_ptr e) {
                   report(e);
                   ended(c);
                 });
}

void QuicEndpoint::ended(H3Connection& c) {
  live_.erase(&c);
  close_socket_when_done();
}

void QuicEndpoint::send(const ngtcp2_addr& to, std::span<const std::uint8_t> packet) {
  udp::endpoint dest;
  if (to.addrlen > dest.capacity()) return;
  std::memcpy(dest.data(), to.addr, to.addrlen);
  dest.resize(to.addrlen);
  boost::system::error_code ec;
  socket_.send_to(asio::buffer(packet.data(), packet.size()), dest, 0, ec);
}

ngtcp2_cid QuicEndpoint::new_cid() {
  ngtcp2_cid cid{};
  cid.datalen = kQuicCidLength;
  gnutls_rnd(GNUTLS_RND_NONCE, cid.data, cid.datalen);
  cid.data[0] = worker_;
  return cid;
}

void QuicEndpoint::add_cid(const ngtcp2_cid& cid, H3Connection& c) {
  cids_[key_of(cid.data, cid.datalen)] = &c;
}

void QuicEndpoint::remove_cid(const ngtcp2_cid& cid) {
  cids_.erase(key_of(cid.data, cid.datalen));
}

void QuicEndpoint::send_version_negotiation(const ngtcp2_version_cid& vc, const udp::endpoint& to) {
  std::array<std::uint8_t, 256> out;
  std::uint8_t unused = 0;
  gnutls_rnd(GNUTLS_RND_NONCE, &unused, 1);
  const std::uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
  const auto n =
      ngtcp2_pkt_write_version_negotiation(out.data(), out.size(), unused, vc.scid, vc.scidlen,
                                           vc.dcid, vc.dcidlen, versions, std::size(versions));
  if (n > 0) send(quic_addr(to), {out.data(), static_cast<std::size_t>(n)});
}

void QuicEndpoint::send_retry(const ngtcp2_pkt_hd& hd, const udp::endpoint& to) {
  const auto scid = new_cid();
  std::array<std::uint8_t, NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN2> token;
  const auto remote = quic_addr(to);
  const auto tokenlen =
      ngtcp2_crypto_generate_retry_token2(token.data(), secret_.data(), secret_.size(), hd.version,
                                          remote.addr, remote.addrlen, &scid, &hd.dcid, quic_now());
  if (tokenlen < 0) return;
  std::array<std::uint8_t, 1280> out;
  const auto n =
      ngtcp2_crypto_write_retry(out.data(), out.size(), hd.version, &hd.scid, &scid, &hd.dcid,
                                token.data(), static_cast<std::size_t>(tokenlen));
  if (n <= 0) return;
  w_.metrics.http3_retries_sent.fetch_add(1, std::memory_order_relaxed);
  send(remote, {out.data(), static_cast<std::size_t>(n)});
}

// A short-header packet for a connection ID of this worker's that no connection holds (one that
// ended, or one of a previous run): a stateless reset tells the client at once instead of at its
// idle timeout. Smaller than what it answers (RFC 9000 10.3.3: no loop of resets, no
// amplification); a packet too small to be answered so is dropped.
void QuicEndpoint::send_stateless_reset(const ngtcp2_version_cid& vc, std::size_t received,
                                        const udp::endpoint& to) {
  constexpr std::size_t kMinReset =
      NGTCP2_MIN_STATELESS_RESET_RANDLEN + 1 + NGTCP2_STATELESS_RESET_TOKENLEN;
  if (vc.dcidlen != kQuicCidLength || vc.dcid[0] != worker_ || received <= kMinReset + 1) return;
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, vc.dcid, vc.dcidlen);
  std::array<std::uint8_t, NGTCP2_STATELESS_RESET_TOKENLEN> token;
  if (ngtcp2_crypto_generate_stateless_reset_token(token.data(), secret_.data(), secret_.size(),
                                                   &cid) != 0)
    return;
  const std::size_t size = std::min<std::size_t>(received - 1, 64);
  std::array<std::uint8_t, 64> random;
  const std::size_t randlen = size - 1 - NGTCP2_STATELESS_RESET_TOKENLEN;
  gnutls_rnd(GNUTLS_RND_NONCE, random.data(), randlen);
  std::array<std::uint8_t, 64> out;
  const auto n = ngtcp2_pkt_write_stateless_reset(out.data(), out.size(), token.data(),
                                                  random.data(), randlen);
  if (n > 0) send(quic_addr(to), {out.data(), static_cast<std::size_t>(n)});
}

void QuicEndpoint::close() {
  closing_ = true;
  close_socket_when_done();
}

void QuicEndpoint::close_socket_when_done() {
  if (!closing_ || !live_.empty()) return;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

// The snapshot's credentials for this listener (a reload's new certificates serve the
// connections accepted after it); those of the start when the listeners changed (restart).
std::shared_ptr<const tls::QuicCredentials> QuicEndpoint::credentials() const {
  auto cfg = w_.snapshot();
  const auto& listen = cfg->server.listen;
  if (index_ < listen.size() && listen[index_].tls && listen[index_].tls->quic)
    return listen[index_].tls->quic;
  return started_with_;
}

}  // namespace floodgate::http
