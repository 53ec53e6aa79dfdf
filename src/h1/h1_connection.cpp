#include "h1_connection.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "error_response.hpp"
#include "exchange/forwarding.hpp"
#include "exchange/pipeline.hpp"
#include "h1_front.hpp"
#include "http1_head.hpp"
#include "net/coro_names.hpp"

namespace floodgate::http {

namespace {

constexpr std::chrono::milliseconds kAnswerWriteTimeout{10'000};

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

}  // namespace

H1Connection::H1Connection(Transport& client, Watchdog& watch, beast::flat_buffer& buffer,
                           SessionRegistry::Entry& entry, std::string_view peer_ip,
                           const config::IpAddress& peer, Services& w, std::string_view alt_svc)
    : client_(client),
      watch_(watch),
      buffer_(buffer),
      entry_(entry),
      peer_ip_(peer_ip),
      peer_(peer),
      alt_svc_(alt_svc),
      w_(w) {}

asio::awaitable<H1Connection::End> H1Connection::run() {
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
      if (!w_.draining) co_return End::gone;  // the client closed or stayed idle too long
      closed_idle = true;                     // a drain ended the wait: say goodbye properly
      break;
    }
    first = false;
    RequestParser parser(request_);
    parser.header_limit(static_cast<std::uint32_t>(config->server.max_header_bytes));
    parser.body_limit(config->server.max_body_bytes);
    watch_.guard(client_.socket(), config->server.timeouts.header_read);
    auto [read_ec, n] =
        co_await bhttp::async_read_header(client_, buffer_, parser, as_tuple(use_awaitable));
    auto ec = watch_.translate(read_ec);
    // A client that closes or stalls between requests gets nothing.
    if (ec && !is_protocol_error(ec)) co_return End::gone;
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
  co_return closed_idle ? End::close_idle : End::close;
}

// Waits for the first byte of a keep-alive connection's next request within the idle
// timeout; only then does the header_read clock start.
asio::awaitable<bool> H1Connection::wait_for_next_request(const config::Config& config) {
  watch_.guard(client_.socket(), config.server.timeouts.idle);
  entry_.state = SessionRegistry::Entry::State::idle;  // a drain may end this wait at once
  auto [ec, n] = co_await client_.async_read_some(buffer_.prepare(kChunk), as_tuple(use_awaitable));
  entry_.state = SessionRegistry::Entry::State::busy;
  if (ec) co_return false;
  buffer_.commit(n);
  co_return true;
}

asio::awaitable<bool> H1Connection::send(const Answer& a, Exchange* x) {
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

asio::awaitable<bool> H1Connection::send_error(bhttp::status status, unsigned version,
                                               bool keep_alive, Exchange* x) {
  Reply reply{static_cast<int>(status)};
  co_return co_await send(render(reply, version, keep_alive, x), x);
}

// The request's facts as far as its head was read (`whole`: all of it), and the
// connection's.
void H1Connection::take_connection(Exchange& x, RequestParser& parser, bool whole) {
  auto& req = parser.get();
  take_http1_head(x, req, whole && parser.keep_alive() && parser.is_done());
  if (!whole) x.version = 11;  // what our answer speaks, whatever the head got to say
  x.peer_ip = peer_ip_;
  x.peer = peer_;
  x.tls = client_.is_tls();
  x.tls_fingerprints = client_.fingerprints();
  x.alt_svc = alt_svc_;
  w_.identify(x);
}

// Serves one request whose header has been read, through the pipeline (pipeline.hpp).
// Returns whether the connection may carry another request.
asio::awaitable<bool> H1Connection::serve(RequestParser& parser, Exchange& x) {
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
  H1Front front(Http1Client{client_, buffer_, watch_, chunk_, head_, response_}, parser, x,
                w_.metrics);
  auto done = co_await w_.proxy.forward(front, x, x.config->upstream_of(*x.route));
  if (done.answer != 0)
    co_return co_await send_error(static_cast<bhttp::status>(done.answer), x.version, false, &x);
  co_return done.keep_alive;
}

}  // namespace floodgate::http
