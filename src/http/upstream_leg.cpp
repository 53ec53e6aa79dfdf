#include "upstream_leg.hpp"

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include <optional>

#include "coro_names.hpp"
#include "floodgate/ascii.hpp"
#include "forwarding.hpp"
#include "pipeline.hpp"
#include "relay.hpp"
#include "tunnel.hpp"
#include "wire.hpp"

namespace floodgate::http {

namespace {

constexpr std::uint64_t kUpstreamHeaderLimit = 64 * 1024;

bool is_idempotent(bhttp::verb v) {
  return v == bhttp::verb::get || v == bhttp::verb::head || v == bhttp::verb::options ||
         v == bhttp::verb::put || v == bhttp::verb::delete_ || v == bhttp::verb::trace;
}

// A parse error in the body (bad chunk framing and the like), as opposed to the client
// closing or stalling.
bool is_malformed_body(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_chunk).category() &&
         ec != bhttp::error::partial_message && ec != bhttp::error::end_of_stream &&
         ec != bhttp::error::need_buffer;
}

// The ways a reused keep-alive connection shows that its upstream closed it meanwhile.
bool is_stale_connection(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

// One request's way to its upstream and back.
class Leg {
 public:
  Leg(WorkerContext& w, Http1Client client, RequestParser& parser, Exchange& x, ServerUse use)
      : w_(w), client_(client), parser_(parser), x_(x), use_(std::move(use)) {}

  asio::awaitable<Forwarded> run() {
    auto& req = parser_.get();
    const bool has_body = !parser_.is_done();
    const bool expect_continue = iequals(req[bhttp::field::expect], "100-continue");
    const bool head = req.method() == bhttp::verb::head;
    const bool retryable = !has_body && is_idempotent(req.method());
    const bool upgrade = !has_body && is_websocket_upgrade(req);
    const bool client_keep_alive = req.keep_alive();
    UpstreamFraming framing{std::nullopt, parser_.chunked(), upgrade};
    if (auto n = parser_.content_length()) framing.content_length = *n;
    prepare_upstream_head(x_, req, use_.server(), framing);

    std::optional<ResponseParser> rp;
    UpstreamConnectionPtr conn;
    // Declared after conn, so it runs first: the watchdog never outlives the socket it guards.
    struct Unguard {
      Watchdog& w;
      ~Unguard() { w.relax(); }
    } unguard{client_.watch};
    bool retried = false;        // on another server, after a connection could not be made
    bool stale_retried = false;  // on a new connection, after a reused one was found closed
    for (;;) {
      conn = w_.pool.take(use_.server());
      if (!conn) {
        auto fresh = co_await w_.pool.connect(use_.server(), client_.watch);
        if (fresh.error) {
          w_.upstream_connect_failed(use_, fresh.error == beast::error::timeout, fresh.why);
          // Nothing was sent (the body is still unread): another server may take it.
          if (!retried && w_.upstream_retry(x_.config, use_)) {
            retried = true;
            continue;
          }
          co_return Forwarded{false, status_for_upstream_error(fresh.error)};
        }
        conn = std::move(fresh.conn);
      }
      const auto sent_at = std::chrono::steady_clock::now();
      auto sent = co_await send_request(*conn, expect_continue);
      x_.bytes_in = sent.body_bytes;
      if (sent.failed == RelayResult::Side::read) {
        // Nothing of a response has reached the client yet: a body that broke the framing
        // gets its status (the upstream connection, with a partial request, is dropped).
        if (sent.error == bhttp::error::body_limit) co_return Forwarded{false, 413};
        if (is_malformed_body(sent.error)) co_return Forwarded{false, 400};
        co_return Forwarded{};  // or the client went away or stalled mid-body
      }
      beast::error_code ec = sent.error;
      if (!ec) ec = co_await read_response_header(*conn, rp, head, upgrade);
      if (!ec) {
        x_.upstream_took = std::chrono::steady_clock::now() - sent_at;
        w_.upstream_answered(use_, x_.upstream_took, rp->get().result_int());
        break;
      }
      // A pooled connection the upstream closed just as we reused it: safe to try once more
      // on a new one, but only when nothing of a body has been consumed.
      const bool stale = conn->reused && is_stale_connection(ec);
      if (stale && retryable && !stale_retried) {
        stale_retried = true;
        continue;
      }
      if (ec == beast::error::timeout)
        w_.upstream_timed_out(use_);
      else if (!stale)  // a keep-alive connection closed under us says nothing of the server
        w_.upstream_outcome(use_, true);
      if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
        w_.log.warn("upstream {} ({}): {} ({} similar lines suppressed)", use_.server().name,
                    use_.server().url, ec.message(), quiet);
      co_return Forwarded{false, status_for_upstream_error(ec)};
    }
    if (rp->get().result() == bhttp::status::switching_protocols) {
      x_.status = 101;
      count_status(w_.gate, x_);  // an open tunnel holds nothing of a counting limit
      co_await run_tunnel(client_, rp->get(), *conn, x_, w_.metrics);
      co_return Forwarded{};  // the connection no longer carries HTTP
    }
    co_return co_await send_response(*rp, std::move(conn), client_keep_alive && parser_.is_done());
  }

 private:
  // Sends the request (header and body) to an upstream connection.
  asio::awaitable<RelayResult> send_request(UpstreamConnection& conn, bool expect_continue) {
    const auto idle = x_.config->server.timeouts.idle;
    if (expect_continue && !parser_.is_done()) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      client_.watch.guard(client_.transport.socket(), idle);
      auto [cec, cn] = co_await asio::async_write(client_.transport, asio::buffer(cont),
                                                  as_tuple(use_awaitable));
      if (cec) co_return RelayResult{RelayResult::Side::read, client_.watch.translate(cec)};
    }
    client_.head.clear();
    append_head(client_.head, parser_.get());
    co_return co_await relay_message(
        RelayLeg{client_.transport, idle}, client_.buffer, parser_,
        RelayLeg{conn.stream, use_.server().response_timeout}, client_.head,
        parser_.chunked() ? BodyFraming::chunked : BodyFraming::raw, client_.chunk, client_.watch);
  }

  // Reads the upstream's final response header, skipping interim 1xx responses.
  asio::awaitable<beast::error_code> read_response_header(UpstreamConnection& conn,
                                                          std::optional<ResponseParser>& rp,
                                                          bool head, bool upgrade) {
    for (;;) {
      rp.emplace();
      rp->header_limit(kUpstreamHeaderLimit);
      rp->body_limit(boost::none);
      rp->skip(head);
      client_.watch.guard(conn.stream.socket(), use_.server().response_timeout);
      auto [read_ec, n] =
          co_await bhttp::async_read_header(conn.stream, conn.buffer, *rp, as_tuple(use_awaitable));
      if (auto ec = client_.watch.translate(read_ec)) co_return ec;
      auto code = rp->get().result_int();
      if (code >= 200) co_return beast::error_code{};
      // 101 is final for an upgrade we asked for; anything else switching protocols on a
      // request that did not ask is a broken upstream.
      if (code == 101) co_return upgrade ? beast::error_code{} : bhttp::error::bad_version;
    }
  }

  asio::awaitable<Forwarded> send_response(ResponseParser& rp, UpstreamConnectionPtr conn,
                                           bool keep_alive) {
    auto& res = rp.get();
    const bool upstream_keep_alive = rp.keep_alive();
    const auto content_length = rp.content_length();
    const bool has_body = !rp.is_done();
    settle_response(w_.gate, x_, res);
    strip_hop_by_hop(res);
    add_rate_headers(x_, res);
    auto framing = BodyFraming::raw;
    if (content_length) {
      res.content_length(*content_length);
    } else if (has_body) {
      if (x_.version >= 11) {
        res.chunked(true);
        framing = BodyFraming::chunked;
      } else {
        keep_alive = false;  // HTTP/1.0 without a length: the body ends with the connection
      }
    }
    res.version(x_.version);
    res.keep_alive(keep_alive);
    x_.status = res.result_int();
    count_status(w_.gate, x_);  // not at the body's end: a long download holds nothing
    client_.head.clear();
    append_head(client_.head, res);
    auto relayed =
        co_await relay_message(RelayLeg{conn->stream, use_.server().response_timeout}, conn->buffer,
                               rp, RelayLeg{client_.transport, x_.config->server.timeouts.idle},
                               client_.head, framing, client_.chunk, client_.watch);
    x_.bytes_out = relayed.body_bytes;
    if (!relayed) {
      // Nothing reached the client yet: it can still be told what happened.
      if (relayed.failed == RelayResult::Side::read && !relayed.head_written)
        co_return Forwarded{false, status_for_upstream_error(relayed.error)};
      if (relayed.failed == RelayResult::Side::read)
        if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
          w_.log.warn("upstream {} ({}): response body: {} ({} similar lines suppressed)",
                      use_.server().name, use_.server().url, relayed.error.message(), quiet);
      co_return Forwarded{};  // the client has a partial response: closing is the only honest end
    }
    if (upstream_keep_alive && conn->buffer.size() == 0)
      w_.pool.give_back(use_.server(), std::move(conn));
    co_return Forwarded{keep_alive, 0};
  }

  WorkerContext& w_;
  Http1Client client_;
  RequestParser& parser_;
  Exchange& x_;
  ServerUse use_;  // the server: its requests in flight count this one until the leg ends
};

}  // namespace

asio::awaitable<Forwarded> forward(WorkerContext& w, Http1Client client, RequestParser& parser,
                                   Exchange& x, const config::Upstream& up) {
  auto use = w.upstream_server(x.config, up);
  if (use.server().protocol == config::UpstreamProtocol::h2)
    co_return co_await forward_to_h2(w, client, parser, x, std::move(use));
  Leg leg(w, client, parser, x, std::move(use));
  co_return co_await leg.run();
}

}  // namespace floodgate::http
