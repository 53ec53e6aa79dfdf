#include "h1_front.hpp"

#include <boost/beast/http.hpp>

#include "exchange/forwarding.hpp"
#include "floodgate/ascii.hpp"
#include "net/coro_names.hpp"
#include "tunnel.hpp"
#include "wire.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

H1Front::H1Front(Http1Client client, RequestParser& parser, Exchange& x, metrics::Metrics& metrics)
    : client_(client),
      parser_(parser),
      x_(x),
      metrics_(metrics),
      writer_(client.transport, client.watch, x.config->server.timeouts.idle, &x.bytes_out) {
  const auto& req = parser.get();
  const bool has_body = !parser.is_done();
  framing_.content_length =
      parser.content_length() ? std::optional(*parser.content_length()) : std::nullopt;
  framing_.chunked = parser.chunked();
  framing_.upgrade = !has_body && is_websocket_upgrade(req);
  expect_continue_ = has_body && iequals(req.fields.get("expect"), "100-continue");
  te_trailers_ = asks_for_trailers(req.fields);
  keep_alive_ = parser.keep_alive();
}

asio::awaitable<bool> H1Front::send_continue() {
  if (!expect_continue_) co_return true;
  static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
  client_.watch.guard(client_.transport.socket(), x_.config->server.timeouts.idle);
  auto [ec, n] =
      co_await asio::async_write(client_.transport, asio::buffer(cont), as_tuple(use_awaitable));
  co_return !ec;
}

asio::awaitable<BodyRead> H1Front::read_body(std::span<char> into) {
  auto r = co_await read_body_piece(client_.transport, client_.buffer, parser_, client_.watch,
                                    x_.config->server.timeouts.idle, into);
  x_.bytes_in += r.n;
  co_return r;
}

void H1Front::set_head(ResponseHead& res, const ResponseBody& body) {
  keep_alive_ = keep_alive_ && parser_.is_done();
  bool chunked = false;
  // The driver stripped the hop-by-hop fields (the framing and Connection among them): the
  // client's come back here.
  auto& f = res.fields;
  if (body.length) {
    f.set("Content-Length", std::to_string(*body.length));
  } else if (body.has_body) {
    if (x_.version >= 11) {
      f.set("Transfer-Encoding", "chunked");
      chunked = true;
    } else {
      keep_alive_ = false;  // HTTP/1.0 without a length: the body ends with the connection
    }
  }
  res.version = x_.version;
  if (x_.version >= 11 && !keep_alive_) f.set("Connection", "close");
  if (x_.version < 11 && keep_alive_) f.set("Connection", "keep-alive");
  client_.head.clear();
  append_head(client_.head, res);
  writer_.start(client_.head, chunked);
}

// Not a coroutine of its own: the driver awaits the writer's (which counts the bytes out).
asio::awaitable<bool> H1Front::write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) {
  trailer_fields_.clear();
  // Only a client that said it takes them gets them (RFC 9110 section 6.5.1).
  if (last && writer_.chunked() && te_trailers_ && trailers)
    for (std::size_t i = 0; i < trailers->size(); ++i)
      trailer_fields_.append(trailers->name(i))
          .append(": ")
          .append(trailers->value(i))
          .append("\r\n");
  return writer_.write(piece, last, trailer_fields_);
}

asio::awaitable<void> H1Front::tunnel(ResponseHead& head, UpstreamConnection& upstream) {
  co_await run_tunnel(client_, head, upstream, x_, metrics_);
}

}  // namespace floodgate::http
