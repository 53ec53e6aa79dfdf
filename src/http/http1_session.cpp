#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstring>

#include "coro_names.hpp"
#include "error_response.hpp"
#include "floodgate/tls/contexts.hpp"
#include "forwarding.hpp"
#include "h1_front.hpp"
#include "h2_connection.hpp"
#include "http1_client.hpp"
#include "http1_head.hpp"
#include "pipeline.hpp"
#include "proxy.hpp"
#include "session.hpp"
#include "watchdog.hpp"

namespace floodgate::http {

using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kChunkSize = 16 * 1024;
constexpr std::chrono::milliseconds kAnswerWriteTimeout{10'000};
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

// A request the parser rejected (as opposed to a connection that closed, stalled or broke):
// only these are worth an answer.
bool is_protocol_error(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

bhttp::status status_for_read_error(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) return bhttp::status::request_header_fields_too_large;
  if (ec == bhttp::error::body_limit) return bhttp::status::payload_too_large;
  return bhttp::status::bad_request;
}

// Ends a request's admission however its handling ends (finish_exchange: concurrency leases
// back, counting limits settled by the status sent). The store is still there when it runs:
// a drain lets every session finish before the worker's context goes.
class FinishGuard {
 public:
  FinishGuard(decide::Gate& gate, Exchange& x) : gate_(gate), x_(x) {}
  ~FinishGuard() { finish_exchange(gate_, x_); }
  FinishGuard(const FinishGuard&) = delete;
  FinishGuard& operator=(const FinishGuard&) = delete;

 private:
  decide::Gate& gate_;
  Exchange& x_;
};

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
      H2Connection h2(w_, client_, watch_, peer_ip_, peer_, *this);
      h2_ = &h2;
      co_await h2.run(buffer_);
      h2_ = nullptr;
      co_await close(true);
      co_await linger();
      co_return;
    }
    if (!protocols_.http1 && !tls_) co_return;
    bool first = true;
    bool closed_idle = false;
    for (;;) {
      // A drain that begins between two requests finds the connection as idle as one waiting
      // for its next request (the last response was sent whole): closed the same way, without
      // waiting for the client's close_notify.
      if (w_.draining) {
        closed_idle = true;
        break;
      }
      auto config = w_.snapshot();
      if (!first && buffer_.size() == 0 && !co_await wait_for_next_request(*config)) {
        if (!w_.draining) co_return;  // the client closed or stayed idle too long
        closed_idle = true;           // a drain ended the wait: say goodbye properly
        break;
      }
      first = false;
      RequestParser parser;
      parser.header_limit(static_cast<std::uint32_t>(config->server.max_header_bytes));
      parser.body_limit(config->server.max_body_bytes);
      watch_.guard(client_.socket(), config->server.timeouts.header_read);
      auto [read_ec, n] =
          co_await bhttp::async_read_header(client_, buffer_, parser, as_tuple(use_awaitable));
      auto ec = watch_.translate(read_ec);
      // A client that closes or stalls between requests gets nothing.
      if (ec && !is_protocol_error(ec)) co_return;
      ++w_.in_flight;
      Exchange x;
      w_.open(x, std::move(config));
      take_connection(x, parser, !ec);
      // A request the parser refused is an exchange too (answered with a request id, counted
      // and access-logged as an HTTP/2 stream's is); the connection closes after it, its
      // remaining bytes being unframed.
      bool keep_alive = false;
      if (ec)
        co_await send_error(status_for_read_error(ec), 11, false, &x);
      else
        keep_alive = co_await serve(parser, x);
      --w_.in_flight;
      w_.close(x);
      if (!keep_alive) break;
    }
    co_await close(closed_idle);
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
      auto [ec, n] =
          co_await client_.async_read_some(buffer_.prepare(kChunkSize), as_tuple(use_awaitable));
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

  // Waits for the first byte of a keep-alive connection's next request within the idle
  // timeout; only then does the header_read clock start.
  asio::awaitable<bool> wait_for_next_request(const config::Config& config) {
    watch_.guard(client_.socket(), config.server.timeouts.idle);
    state = State::idle;  // a drain may end this wait at once (SessionRegistry)
    auto [ec, n] =
        co_await client_.async_read_some(buffer_.prepare(kChunkSize), as_tuple(use_awaitable));
    state = State::busy;
    if (ec) co_return false;
    buffer_.commit(n);
    co_return true;
  }

  asio::awaitable<bool> send(const Answer& a, Exchange* x = nullptr) {
    if (x) {
      x->status = static_cast<int>(a.status);
      x->bytes_out = a.body_bytes;
    }
    count_own_status(w_.gate, x, static_cast<int>(a.status));
    asio::const_buffer bytes = asio::buffer(a.bytes);
    if (auto rest = client_.write_now({&bytes, 1}); !rest.empty()) {
      watch_.guard(client_.socket(), kAnswerWriteTimeout);
      auto [ec, n] = co_await asio::async_write(client_, rest, as_tuple(use_awaitable));
      if (ec) co_return false;
    }
    co_return a.keep_alive;
  }

  asio::awaitable<bool> send_error(bhttp::status status, unsigned version, bool keep_alive,
                                   Exchange* x = nullptr) {
    Reply reply{static_cast<int>(status)};
    co_return co_await send(render(reply, version, keep_alive, x), x);
  }

  // Serves one request whose header has been read, through the pipeline (pipeline.hpp).
  // Returns whether the connection may carry another request.
  // The request's facts as far as its head was read (`whole`: all of it), and the
  // connection's.
  void take_connection(Exchange& x, RequestParser& parser, bool whole) {
    auto& req = parser.get();
    take_http1_head(x, req, whole && req.keep_alive() && parser.is_done());
    if (!whole) x.version = 11;  // what our answer speaks, whatever the head got to say
    x.peer_ip = peer_ip_;
    x.peer = peer_;
    x.tls = client_.is_tls();
    x.tls_fingerprints = client_.fingerprints();
    w_.identify(x);
  }

  asio::awaitable<bool> serve(RequestParser& parser, Exchange& x) {
    auto& req = parser.get();
    if (!framing_is_safe(req, parser.chunked()))
      co_return co_await send_error(bhttp::status::bad_request, 11, false, &x);
    if (auto unrouted = route_exchange(x)) {
      auto status = static_cast<bhttp::status>(unrouted->status);
      co_return co_await send_error(status, x.version, x.can_continue && !unrouted->close, &x);
    }
    if (!gated(x))
      count_ungated(w_.gate, x);
    else if (auto reply = co_await decide_exchange(w_.gate, x, w_.log))
      co_return co_await send(render(*reply, x.version, x.can_continue, &x), &x);
    // Held until the response (or the WebSocket tunnel) ends: an open tunnel keeps counting
    // against a concurrency limit; a counting limit charges by the status sent.
    FinishGuard finish(w_.gate, x);
    // A drain past its deadline may have closed the client while the store decided.
    if (!client_.socket().is_open()) co_return false;
    H1Front front(Http1Client{client_, buffer_, watch_, chunk_, head_}, parser, x, w_.metrics);
    auto done = co_await w_.proxy.forward(front, x, x.config->upstream_of(*x.route));
    if (done.answer != 0)
      co_return co_await send_error(static_cast<bhttp::status>(done.answer), x.version, false, &x);
    co_return done.keep_alive;
  }

  FrontProtocols protocols_;
  H2Connection* h2_ = nullptr;  // while the connection speaks HTTP/2
  std::string peer_ip_;
  config::IpAddress peer_;
  std::shared_ptr<const tls::ServerContexts> tls_;  // the listener's, as accepted; null: plain
  Transport client_;
  Watchdog watch_;  // every socket operation of this connection runs under its deadline
  beast::flat_buffer buffer_;
  std::string head_;  // the message head being relayed, serialized (reused)
  Services& w_;
  std::array<char, kChunkSize> chunk_;  // the one body buffer of this connection
};

}  // namespace

asio::awaitable<void> run_session(tcp::socket socket,
                                  std::shared_ptr<const tls::ServerContexts> tls,
                                  FrontProtocols protocols, Services& services) {
  Session session(std::move(socket), std::move(tls), protocols, services);
  co_await session.run();
}

}  // namespace floodgate::http
