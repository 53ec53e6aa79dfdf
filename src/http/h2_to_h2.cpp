// An admitted HTTP/2 stream forwarded to an h2 upstream (upstream_h2.hpp) as a stream of its
// own: the head rewritten as for any upstream, then both directions relayed at once, so that
// client-streaming, server-streaming and bidirectional gRPC calls work. Each direction holds
// at most one window plus 64 KiB here (H2Stream::kMaxOut): the client's window reopens only as its
// DATA is handed to the upstream, the upstream's only as its DATA is handed to the client. Trailers
// travel both ways; the response's are where a streamed answer reports its true cost (settle:
// response_trailer:NAME).

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "coro_names.hpp"
#include "floodgate/ascii.hpp"
#include "forwarding.hpp"
#include "grpc.hpp"
#include "h2_connection.hpp"
#include "pipeline.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

namespace {

// Fields a response must not carry over HTTP/2 (RFC 9113 8.2.2), whatever the origin sent.
bool connection_specific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// One of the rate-limit fields floodgate adds to an admitted request's response.
bool is_rate_header(const Exchange& x, std::string_view name) {
  for (const auto& [n, v] : x.admission.headers)
    if (iequals(n, name)) return true;
  return false;
}

}  // namespace

asio::awaitable<void> H2Connection::forward_h2(H2Stream& s, ServerUse& use) {
  const config::UpstreamServer* u = &use.server();  // another after a failed connection
  auto& x = s.x;
  const auto& config = *x.config;
  const auto idle = config.server.timeouts.idle;
  auto fail = [&](int status) {
    if (s.responded)
      reset(s, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);
    else
      submit_reply(s, Reply{status});
  };

  // The upstream's request: the stream's fields rewritten as for any upstream (Host from
  // :authority, forwarding fields), then as HTTP/2 pseudo-headers and lower-case fields.
  const bool te_trailers = asks_for_trailers(s.head);
  auto& req = s.head;
  req.method_string(s.method);
  req.target(s.path);
  if (!s.authority.empty()) req.set(bhttp::field::host, s.authority);
  UpstreamFraming framing;
  framing.content_length = content_length_of(req);  // nghttp2 has checked DATA matches it
  prepare_upstream_head(x, req, *u, framing);
  H2HeaderBlock block;
  add_upstream_request(block, req, *u, te_trailers);
  const bool has_body = !s.body_done || !s.body.empty() || !s.trailers.empty();

  auto call = std::make_shared<H2Call>();
  call->waker = &s.wake;
  std::shared_ptr<H2UpstreamConnection> conn;
  H2CallGuard guard{call, conn};
  const auto sent_at = std::chrono::steady_clock::now();
  std::uint64_t forwarded = 0;
  bool retried = false;  // on another server, after a connection could not be made
  for (int attempt = 1;; ++attempt) {
    if (s.closed) co_return;  // reset while the limits were decided or a connection was made
    // Most calls find an open connection with room: no coroutine of the pool's for them.
    H2UpstreamPool::Got got{w_.h2_pool.ready(*u)};
    if (!got.conn) got = co_await w_.h2_pool.get(*u);
    if (!got.conn) {
      w_.upstream_connect_failed(use, got.timeout, got.why);
      // Nothing was sent: another server may take it, once (its scheme may differ).
      if (!retried && !s.closed && w_.upstream_retry(x.config, use)) {
        retried = true;
        u = &use.server();
        block = H2HeaderBlock();
        add_upstream_request(block, req, *u, te_trailers);
        --attempt;
        continue;
      }
      fail(got.timeout ? 504 : 502);
      co_return;
    }
    conn = std::move(got.conn);
    if (s.closed) co_return;
    if (!conn->submit(call, block.pairs(), has_body)) {
      if (attempt < H2UpstreamPool::kAttempts) continue;
      fail(502);
      co_return;
    }
    // Both directions, until the response has ended (or either side failed).
    for (;;) {
      if (s.closed) co_return;  // the client reset the stream: the guard resets the upstream's
      // Request: what the client sent, as the upstream takes it.
      if (!call->out_done && !s.body.empty() && call->out.size() < H2Stream::kMaxOut) {
        forwarded += s.body.size();
        if (forwarded > config.server.max_body_bytes) {
          fail(413);
          co_return;
        }
        const auto n = s.body.size();
        call->out += s.body;
        s.body.clear();
        consumed(s, n);
        conn->resume(*call);
      }
      if (!call->out_done && s.body_done && s.body.empty()) {
        call->out_trailers = std::move(s.trailers);
        call->out_done = true;
        conn->resume(*call);
      }
      if (call->closed && call->error != NGHTTP2_NO_ERROR && !call->in_done) break;
      // Response: the head once, then the body as the client takes it, then the trailers.
      if (call->head_done && !s.responded) {
        x.upstream_took = std::chrono::steady_clock::now() - sent_at;
        w_.upstream_answered(use, x.upstream_took, call->status);
        const auto& from = call->head;
        auto field = [&from](std::string_view n) { return from.find(n); };
        settle_fields(w_.gate, x, false, field);
        x.status = call->status;
        count_status(w_.gate, x);  // not at the body's end: a stream holds nothing
        // The origin's fields as they are (the rate-limit ones ours replace), then ours.
        H2HeaderBlock head(x.status);
        for (std::size_t i = 0; i < from.size(); ++i)
          if (!connection_specific(from.name(i)) && !is_rate_header(x, from.name(i)))
            head.add(from.name(i), from.value(i));
        for (const auto& [n, v] : x.admission.headers) head.add(n, v);
        const bool ends = call->in_done && call->in.empty() && call->trailers.empty();
        if (ends)
          settle_fields(w_.gate, x, true,
              field);  // trailers-only: they are in the head  // trailers-only: they are here
        submit_head(s, head, !ends);
      }
      if (s.responded && !call->in.empty() && s.out.size() - s.out_sent < H2Stream::kMaxOut) {
        const auto n = call->in.size();
        s.out += call->in;
        call->in.clear();
        conn->take(*call, n);
        resume(s);
      }
      if (s.responded && call->in_done && call->in.empty()) {
        if (!s.out_done) {
          settle_fields(w_.gate, x, true, [&](auto n) { return call->trailers.find(n); });
          s.out_trailers = std::move(call->trailers);
          s.out_done = true;
          resume(s);
        }
        co_return;
      }
      // Waiting on the upstream (a head, body, room for the request) or on the client.
      const bool upstream_owes = !call->head_done || (!call->in_done && call->in.empty());
      const bool woke = co_await changed(s, upstream_owes ? u->response_timeout : idle);
      if (!woke) {
        if (upstream_owes) w_.upstream_timed_out(use);
        if (upstream_owes && !call->head_done)
          fail(504);
        else if (upstream_owes)
          reset(s, NGHTTP2_CANCEL, ResetCause::upstream);
        else
          stalled(s);
        co_return;
      }
    }
    // The upstream's stream failed. One the origin never processed goes again, body and
    // all, when all of it was kept.
    if (call->refused && call->replayable && !s.responded && attempt < H2UpstreamPool::kAttempts) {
      auto next = std::make_shared<H2Call>();
      next->waker = &s.wake;
      next->out = std::move(call->sent) + call->out;
      next->out_done = call->out_done;
      next->out_trailers = std::move(call->out_trailers);
      call = std::move(next);
      continue;
    }
    w_.upstream_outcome(use, true);
    if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
      w_.log.warn("upstream {} ({}): stream failed: {} ({} similar lines suppressed)", u->name,
                  u->url, nghttp2_http2_strerror(call->error), quiet);
    fail(502);
    co_return;
  }
}

}  // namespace floodgate::http
