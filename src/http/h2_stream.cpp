// One HTTP/2 stream through the pipeline: the head into the exchange, route, limits, then
// either a reply of ours or the request forwarded to a pooled HTTP/1.1 upstream connection,
// its body relayed as DATA arrives (the window reopening only as it is forwarded) and the
// response streamed back as DATA (the upstream read only as fast as the client takes it).

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <optional>

#include "coro_names.hpp"
#include "floodgate/ascii.hpp"
#include "forwarding.hpp"
#include "h2_connection.hpp"
#include "http1_client.hpp"
#include "pipeline.hpp"
#include "exchange.hpp"
#include "wire.hpp"

// GCC 12 reports Asio's coroutine frames as freed by a mismatched operator delete once it
// inlines enough of them into one function (this file's): they are allocated and freed by
// the pair in awaitable_frame_base, through Asio's recycling allocator. A false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace floodgate::http {

namespace {

constexpr std::size_t kChunk = 16 * 1024;
constexpr std::uint64_t kUpstreamHeaderLimit = 64 * 1024;

// Parses into s.out what `buffer` already holds of the response body, as far as the buffered
// bound allows, without waiting for the socket; sets s.out_done. False on a malformed body.
bool parse_buffered(ResponseParser& rp, beast::flat_buffer& buffer, H2Stream& s) {
  auto& body = rp.get().body();
  while (!rp.is_done() && buffer.size() > 0 && s.out.size() - s.out_sent < H2Stream::kMaxOut) {
    // A body's bytes are no more than the bytes they are parsed from: straight into s.out.
    const auto start = s.out.size();
    const auto room = std::min(buffer.size(), H2Stream::kMaxOut - (start - s.out_sent));
    s.out.resize(start + room);
    body.data = s.out.data() + start;
    body.size = room;
    beast::error_code ec;
    const auto used = rp.put(buffer.data(), ec);
    buffer.consume(used);
    s.out.resize(s.out.size() - body.size);
    if (ec == bhttp::error::need_more) break;  // a chunk header cut short: the socket has it
    if (ec && ec != bhttp::error::need_buffer) return false;
    if (used == 0) break;
  }
  s.out_done = rp.is_done();
  return true;
}

}  // namespace

asio::awaitable<bool> changed(H2Stream& s, std::chrono::milliseconds timeout) {
  s.wake.expires_after(timeout);
  auto [ec] = co_await s.wake.async_wait(as_tuple(use_awaitable));
  co_return ec == asio::error::operation_aborted;
}

asio::awaitable<void> H2Connection::serve(std::shared_ptr<H2Stream> sp) {
  auto& s = *sp;
  auto& x = s.x;
  ++w_.in_flight;
  struct InFlight {
    std::uint64_t& n;
    ~InFlight() { --n; }
  } in_flight{w_.in_flight};
  x.config = w_.snapshot();  // a reload applies to the streams that start after it
  x.arrived = w_.clock.now();
  if (x.config->log.access_log) x.started = std::chrono::steady_clock::now();
  x.fields = &s.head;
  if (!s.cookies.empty()) s.head.set(bhttp::field::cookie, s.cookies);
  x.method = s.method;
  x.raw_target = s.path;
  x.host_field = s.authority.empty() ? std::string_view(s.head[bhttp::field::host])
                                     : std::string_view(s.authority);
  x.peer_ip = peer_ip_;
  x.peer = peer_;
  x.tls = client_.is_tls();
  x.tls_fingerprints = client_.fingerprints();
  x.jwks = w_.jwks;
  x.protocol = "h2";
  identify(x, w_.request_ids);
  const auto& config = *x.config;

  std::optional<Reply> reply;
  auto host = s.head.find(bhttp::field::host);
  if (s.header_bytes > config.server.max_header_bytes)
    reply = Reply{431};
  else if (s.method == "CONNECT" || s.extended_connect)
    reply = Reply{400};  // floodgate forwards requests, not tunnels
  else if (!valid_host(s.authority) || s.head.count(bhttp::field::host) > 1 ||
           (host != s.head.end() && !valid_host(host->value())))
    reply = Reply{400};  // as HTTP/1.1's Host (forwarding.hpp): no userinfo, path or spaces
  else if (host != s.head.end() && !s.authority.empty() && !iequals(host->value(), s.authority))
    reply = Reply{400};  // RFC 9113 8.3.1: they must name the same
  else if (auto unrouted = route_exchange(x))
    reply = Reply{unrouted->status};
  else if (s.closed)
    co_return;  // reset before anything was decided: nothing is charged
  else if (gated(x))
    reply = co_await decide_exchange(w_.gate, x, w_.log);
  else
    count_ungated(w_.gate, x);

  if (reply) {
    submit_reply(s, *reply);
  } else {
    // Held until the response ends: an open stream counts against a concurrency limit, and
    // a counting limit charges by the status it ends with.
    struct Finish {
      decide::Gate& gate;
      Exchange& x;
      ~Finish() { finish_exchange(gate, x); }
    } finish{w_.gate, x};
    auto use = w_.upstream_server(x.config, config.upstream_of(*x.route));
    if (use.server().protocol == config::UpstreamProtocol::h2)
      co_await forward_h2(s, use);
    else
      co_await forward(s, use);
  }
  // nghttp2 reads the body through `s` until the stream closes; a client that takes none of
  // it for the idle timeout gets the stream reset.
  while (!s.closed)
    if (!co_await changed(s, config.server.timeouts.idle)) stalled(s);
  if (config.log.access_log) log_exchange(x, *w_.access_log, w_.gate.hasher(config));
}

asio::awaitable<void> H2Connection::forward(H2Stream& s, ServerUse& use) {
  auto& x = s.x;
  const auto& config = *x.config;
  const auto idle = config.server.timeouts.idle;
  auto fail = [&](int status) {
    if (s.responded) {
      reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);
    } else {
      submit_reply(s, Reply{status});
    }
  };
  // The upstream's HTTP/1.1 request: the stream's fields, :authority as Host.
  auto& req = s.head;
  req.method_string(s.method);
  req.target(s.path);
  if (!s.authority.empty()) req.set(bhttp::field::host, s.authority);
  UpstreamFraming framing;
  framing.content_length = content_length_of(req);
  framing.chunked = !framing.content_length && !s.body_done;
  prepare_upstream_head(x, req, use.server(), framing);

  if (s.closed) co_return;  // reset while the limits were decided
  auto conn = w_.pool.take(use.server());
  for (bool retried = false; !conn;) {
    Watchdog connecting(client_.get_executor());
    auto fresh = co_await w_.pool.connect(use.server(), connecting);
    if (!fresh.error) {
      conn = std::move(fresh.conn);
      break;
    }
    w_.upstream_connect_failed(use, fresh.error == beast::error::timeout, fresh.why);
    // Nothing was sent: another server may take it, once.
    if (retried || s.closed || !w_.upstream_retry(x.config, use)) {
      fail(status_for_upstream_error(fresh.error));
      co_return;
    }
    retried = true;
    conn = w_.pool.take(use.server());
  }
  const auto& u = use.server();
  // A stream has no socket of its own to time: the upstream connection's watchdog times it.
  auto& watch = conn->watch;
  s.upstream = conn.get();
  struct Unhook {
    H2Stream& s;
    ~Unhook() { s.upstream = nullptr; }
  } unhook{s};
  if (s.closed) {  // reset (or the connection ended) while connecting: nothing was sent on it
    s.upstream = nullptr;
    w_.pool.give_back(u, std::move(conn));
    co_return;
  }

  // The head, then the body as it arrives.
  const auto sent_at = std::chrono::steady_clock::now();
  std::string head;
  head.reserve(512);  // one allocation for a typical head, not one per doubling
  append_head(head, req);
  watch.guard(conn->stream.socket(), u.response_timeout);
  auto [hec, hn] =
      co_await asio::async_write(conn->stream, asio::buffer(head), as_tuple(use_awaitable));
  if (hec) {
    fail(status_for_upstream_error(watch.translate(hec)));
    co_return;
  }
  std::uint64_t forwarded = 0;
  while (framing.chunked || framing.content_length.value_or(0) > 0) {
    while (s.body.empty() && !s.body_done && !s.closed)
      if (!co_await changed(s, idle)) break;  // the client stalled mid-body
    if (s.closed) co_return;                  // reset by the client: the partial request is dropped
    if (s.body.empty() && !s.body_done) {
      stalled(s);
      co_return;
    }
    forwarded += s.body.size();
    if (forwarded > config.server.max_body_bytes) {
      fail(413);
      co_return;
    }
    // nghttp2 resets a stream whose DATA overruns its content-length; should a byte past it
    // ever get here, it would be the start of a second request upstream: never written.
    if (framing.content_length && forwarded > *framing.content_length) {
      reset(s, NGHTTP2_PROTOCOL_ERROR);
      co_return;
    }
    std::string piece;
    if (framing.chunked && !s.body.empty()) {
      char size[20];
      auto [end, ec] = std::to_chars(size, size + sizeof size, s.body.size(), 16);
      piece.append(size, end).append("\r\n").append(s.body).append("\r\n");
    } else {
      piece = s.body;
    }
    const auto n = s.body.size();
    s.body.clear();
    const bool last = s.body_done;  // more may arrive while this piece is written
    if (last && framing.chunked) piece += "0\r\n\r\n";
    watch.guard(conn->stream.socket(), u.response_timeout);
    auto [bec, bn] =
        co_await asio::async_write(conn->stream, asio::buffer(piece), as_tuple(use_awaitable));
    if (bec) {
      fail(status_for_upstream_error(watch.translate(bec)));
      co_return;
    }
    consumed(s, n);
    if (last) break;
  }

  // The response head (interim 1xx skipped), rewritten as for HTTP/1.1, then its body.
  std::optional<ResponseParser> rp;
  const bool head_only = s.method == "HEAD";
  for (;;) {
    rp.emplace();
    rp->header_limit(kUpstreamHeaderLimit);
    rp->body_limit(boost::none);
    rp->skip(head_only);
    watch.guard(conn->stream.socket(), u.response_timeout);
    auto [rec, rn] =
        co_await bhttp::async_read_header(conn->stream, conn->buffer, *rp, as_tuple(use_awaitable));
    if (auto ec = watch.translate(rec)) {
      // The stream closed under it (its upstream connection is closed then): says nothing of
      // the server, so no failure is counted toward its ejection.
      if (s.closed) co_return;
      if (ec == beast::error::timeout)
        w_.upstream_timed_out(use);
      else
        w_.upstream_outcome(use, true);
      fail(status_for_upstream_error(ec));
      co_return;
    }
    if (rp->get().result_int() >= 200) break;
    if (rp->get().result_int() == 101) {  // nothing here asked to switch protocols
      fail(502);
      co_return;
    }
  }
  x.upstream_took = std::chrono::steady_clock::now() - sent_at;
  w_.upstream_answered(use, x.upstream_took, rp->get().result_int());
  auto& res = rp->get();
  const bool upstream_keep_alive = rp->keep_alive();
  const auto length = rp->content_length();
  settle_response(w_.gate, x, res);
  strip_hop_by_hop(res);
  add_rate_headers(x, res);
  H2HeaderBlock response_head(res.result_int());
  for (const auto& f : res) response_head.add(f.name_string(), f.value());
  if (length) response_head.add("content-length", std::uint64_t{*length});
  const bool has_body = !rp->is_done();
  // The body that came in with the head goes into the same write as the HEADERS frame (a
  // small response is then one TLS record and one send, not two).
  if (!parse_buffered(*rp, conn->buffer, s)) {
    reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);  // the client gets no status
    co_return;
  }
  x.status = res.result_int();
  count_status(w_.gate, x);  // not at the body's end: a long download holds nothing
  submit_head(s, response_head, has_body);
  while (!rp->is_done()) {
    // A client that takes none of it for the idle timeout holds the stream, its buffer and an
    // upstream connection no longer: the stream is reset.
    while (s.out.size() - s.out_sent >= H2Stream::kMaxOut && !s.closed)
      if (!co_await changed(s, idle)) stalled(s);
    if (s.closed) co_return;  // the client went away: the upstream connection is dropped
    watch.guard(conn->stream.socket(), u.response_timeout);
    auto [ec, n] = co_await conn->stream.async_read_some(conn->buffer.prepare(kChunk),
                                                         as_tuple(use_awaitable));
    conn->buffer.commit(n);
    bool ok = (!ec || ec == asio::error::eof) && parse_buffered(*rp, conn->buffer, s);
    if (ok && ec == asio::error::eof) {  // ends a body framed by the connection's end, or fails
      beast::error_code eof_ec;
      rp->put_eof(eof_ec);
      ok = !eof_ec;
      s.out_done = rp->is_done();
    }
    if (!ok) {
      reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);
      co_return;
    }
    resume(s);
  }
  if (upstream_keep_alive && conn->buffer.size() == 0) {
    s.upstream = nullptr;
    w_.pool.give_back(u, std::move(conn));
  }
}

}  // namespace floodgate::http
