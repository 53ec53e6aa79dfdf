#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstring>

#include "floodgate/tls/contexts.hpp"
#include "h1/h1_connection.hpp"
#include "h2/h2_connection.hpp"
#include "net/coro_names.hpp"
#include "net/watchdog.hpp"
#include "session.hpp"

namespace floodgate::http {

using tcp = asio::ip::tcp;

namespace {

// How long a closing TLS connection waits for the client's close_notify after sending its
// own: long enough for a client that answers, short enough not to hold a dead one.
constexpr std::chrono::milliseconds kTlsCloseTimeout{1'000};
// A lingering close after HTTP/2 (Session::linger): how long and how much.
constexpr std::chrono::milliseconds kLingerTimeout{1'000};
constexpr std::size_t kLingerBytes = 256 * 1024;

std::string peer_text(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "0.0.0.0";
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped())
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.to_string();
}

class Session final : public SessionRegistry::Entry {
 public:
  Session(tcp::socket socket, std::shared_ptr<const tls::ServerContexts> tls,
          FrontProtocols protocols, Services& w)
      : Entry(w.sessions),
        protocols_(protocols),
        peer_ip_(peer_text(socket)),
        peer_(config::parse_ip(peer_ip_).value_or(config::IpAddress{})),
        tls_(std::move(tls)),
        client_(std::move(socket)),
        watch_(client_.get_executor()),
        w_(w) {
    w_.metrics.active_connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~Session() { w_.metrics.active_connections.fetch_sub(1, std::memory_order_relaxed); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // For a drain (SessionRegistry). Cancelling the read is enough: the session sees `draining`.
  void end_idle_wait() override {
    beast::error_code ignored;
    client_.socket().cancel(ignored);
  }
  // The client socket closed, every client operation fails at once; the watchdog times out
  // an upstream one (and the ones after it), so the session ends within a loop turn or two.
  void abort() override {
    beast::error_code ignored;
    client_.socket().close(ignored);
    watch_.expire();
    if (h2_) h2_->abort_streams();
  }

  asio::awaitable<void> run() {
    if (tls_ && !co_await handshake()) co_return;
    if (co_await speaks_h2()) {
      H2Connection h2(w_, client_, watch_, peer_ip_, peer_, *this,
                      protocols_.rls ? w_.rls : nullptr, protocols_.alt_svc);
      h2_ = &h2;
      co_await h2.run(buffer_);
      h2_ = nullptr;
      co_await close(true);
      co_await linger();
      co_return;
    }
    if (protocols_.rls || (!protocols_.http1 && !tls_)) co_return;
    H1Connection h1(client_, watch_, buffer_, *this, peer_ip_, peer_, w_, protocols_.alt_svc);
    const auto end = co_await h1.run();
    if (end != H1Connection::End::gone) co_await close(end == H1Connection::End::close_idle);
  }

 private:
  // Whether this connection speaks HTTP/2: as ALPN settled with TLS; on a plain listener that
  // lists h2c, when it opens with the HTTP/2 connection preface (RFC 9113 section 3.4), which
  // no HTTP/1.1 request line can begin like.
  asio::awaitable<bool> speaks_h2() {
    if (tls_) {
      const unsigned char* alpn = nullptr;
      unsigned len = 0;
      SSL_get0_alpn_selected(client_.tls_handle(), &alpn, &len);
      co_return len == 2 && std::memcmp(alpn, "h2", 2) == 0;
    }
    if (!protocols_.h2c) co_return false;
    if (!protocols_.http1) co_return true;
    static constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    watch_.guard(client_.socket(), w_.snapshot()->server.timeouts.header_read);
    for (;;) {
      std::string_view seen(static_cast<const char*>(buffer_.data().data()), buffer_.size());
      if (seen.size() >= preface.size()) co_return seen.substr(0, preface.size()) == preface;
      if (seen != preface.substr(0, seen.size())) co_return false;
      auto [ec, n] = co_await client_.async_read_some(buffer_.prepare(H1Connection::kChunk),
                                                      as_tuple(use_awaitable));
      if (ec) co_return false;  // the HTTP/1.1 reader finds the connection closed
      buffer_.commit(n);
    }
  }

  asio::awaitable<void> close(bool closed_idle) {
    state = State::closing;
    if (client_.is_tls()) {
      // close_notify tells the client the response was not cut short (RFC 8446 section 6.1).
      // After a response the client's own close_notify is awaited, so that a request it sent
      // meanwhile does not turn our close into a reset that could destroy that response; an
      // idle connection a drain closes has no response to lose: ours is sent, theirs not
      // awaited (which RFC 8446 allows), and the drain is not held up by silent clients.
      if (closed_idle) SSL_set_shutdown(client_.tls_handle(), SSL_RECEIVED_SHUTDOWN);
      watch_.guard(client_.socket(), kTlsCloseTimeout);
      co_await client_.tls().async_shutdown(as_tuple(use_awaitable));
      watch_.relax();
    }
    beast::error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  // After an HTTP/2 connection's GOAWAY the client may still be sending (streams it opened
  // before reading it): closing at once would answer those bytes with a TCP reset, which
  // destroys the GOAWAY in the client's receive buffer before it is read, and with it the last
  // stream id the client needs to retry safely. As nginx's lingering close: with our side shut,
  // what comes is read and dropped until the client closes, for at most 1 s and 256 KiB.
  asio::awaitable<void> linger() {
    if (!client_.socket().is_open()) co_return;
    std::array<char, 16 * 1024> scratch;
    std::size_t dropped = 0;
    watch_.guard(client_.socket(), kLingerTimeout);
    while (dropped < kLingerBytes) {
      auto [ec, n] =
          co_await client_.socket().async_read_some(asio::buffer(scratch), as_tuple(use_awaitable));
      if (ec) break;
      dropped += n;
    }
    watch_.relax();
  }

  // The TLS handshake, within the header_read timeout: a client that connects and says
  // nothing costs no more than one that never sends its request line.
  asio::awaitable<bool> handshake() {
    SSL* ssl = tls_->new_connection();
    if (!ssl) co_return false;
    const auto config = w_.snapshot();
    client_.start_tls(ssl, config->tls_fingerprints);
    watch_.guard(client_.socket(), config->server.timeouts.header_read);
    auto [ec] = co_await client_.tls().async_handshake(asio::ssl::stream_base::server,
                                                       as_tuple(use_awaitable));
    if (ec) {
      w_.metrics.tls_handshake_failures.fetch_add(1, std::memory_order_relaxed);
      w_.log.debug("TLS handshake with {} failed: {}", peer_ip_, watch_.translate(ec).message());
      co_return false;
    }
    co_return true;
  }

  FrontProtocols protocols_;
  H2Connection* h2_ = nullptr;  // while the connection speaks HTTP/2
  std::string peer_ip_;
  config::IpAddress peer_;
  std::shared_ptr<const tls::ServerContexts> tls_;  // the listener's, as accepted; null: plain
  Transport client_;
  Watchdog watch_;  // every socket operation of this connection runs under its deadline
  beast::flat_buffer buffer_;
  Services& w_;
};

}  // namespace

asio::awaitable<void> run_session(tcp::socket socket,
                                  std::shared_ptr<const tls::ServerContexts> tls,
                                  FrontProtocols protocols, Services& services) {
  Session session(std::move(socket), std::move(tls), protocols, services);
  co_await session.run();
}

}  // namespace floodgate::http
