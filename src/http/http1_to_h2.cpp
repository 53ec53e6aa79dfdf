// An admitted HTTP/1.x request forwarded to an h2 upstream (upstream_h2.hpp), as nginx's
// grpc_pass translates: the head becomes HEADERS, the body (whatever its framing) DATA, and
// the response comes back with its own Content-Length or chunked, its trailers in the last
// chunk when the client said `TE: trailers`. HTTP/1.1 is half duplex: the request's body is
// sent whole before the response is read.
//
// No co_await here sits in a condition: GCC 12 miscompiled `if (co_await f(...))` in this
// file's loops (the frame was resumed corrupt: SIGILL on the first request).

#include <nghttp2/nghttp2.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <charconv>

#include "coro_names.hpp"
#include "floodgate/ascii.hpp"
#include "forwarding.hpp"
#include "h2_header_block.hpp"
#include "pipeline.hpp"
#include "upstream_leg.hpp"
#include "wire.hpp"

namespace floodgate::http {

namespace {

constexpr std::size_t kMaxBuffered = 64 * 1024;

class ToH2 {
 public:
  ToH2(WorkerContext& w, Http1Client client, RequestParser& parser, Exchange& x, ServerUse use)
      : w_(w),
        client_(client),
        parser_(parser),
        x_(x),
        use_(std::move(use)),
        wake_(client.transport.get_executor()) {}

  asio::awaitable<Forwarded> run() {
    auto& req = parser_.get();
    const bool te_trailers = asks_for_trailers(req);
    const bool expect_continue = iequals(req[bhttp::field::expect], "100-continue");
    const bool client_keep_alive = req.keep_alive();
    UpstreamFraming framing;
    if (auto n = parser_.content_length()) framing.content_length = *n;
    prepare_upstream_head(x_, req, use_.server(), framing);
    H2HeaderBlock block;
    add_upstream_request(block, req, use_.server(), te_trailers);
    const bool has_body = !parser_.is_done();
    const auto sent_at = std::chrono::steady_clock::now();

    auto call = std::make_shared<H2Call>();
    call->waker = &wake_;
    H2CallGuard guard{call, conn_};
    bool body_read = !has_body;
    bool retried = false;  // on another server, after a connection could not be made
    for (int attempt = 1;; ++attempt) {
      H2UpstreamPool::Got got{w_.h2_pool.ready(use_.server())};
      if (!got.conn) got = co_await w_.h2_pool.get(use_.server());
      if (!got.conn) {
        w_.upstream_connect_failed(use_, got.timeout, got.why);
        // Nothing was sent: another server may take it (its scheme may differ).
        if (!retried && w_.upstream_retry(x_.config, use_)) {
          retried = true;
          block = H2HeaderBlock();
          add_upstream_request(block, req, use_.server(), te_trailers);
          --attempt;
          continue;
        }
        co_return Forwarded{false, got.timeout ? 504 : 502};
      }
      conn_ = std::move(got.conn);
      if (!conn_->submit(call, block.pairs(), has_body)) {
        if (attempt < H2UpstreamPool::kAttempts) continue;
        co_return Forwarded{false, 502};
      }
      if (!body_read) {  // once: a stream sent again takes the body kept from the first
        auto failed = co_await send_body(*call, expect_continue);
        if (failed) co_return *failed;
        body_read = true;
      }
      const bool answered = co_await wait_head(*call);
      if (answered) break;
      // The origin never processed it: again on another connection, body and all if kept.
      if (call->refused && call->replayable && attempt < H2UpstreamPool::kAttempts &&
          parser_.is_done()) {
        auto next = std::make_shared<H2Call>();
        next->waker = &wake_;
        next->out = std::move(call->sent) + call->out;
        next->out_done = call->out_done;
        call = std::move(next);
        continue;
      }
      const bool timeout = !call->closed;
      if (timeout)
        w_.upstream_timed_out(use_);
      else
        w_.upstream_outcome(use_, true);
      if (auto quiet = w_.upstream_errors.allow(); quiet >= 0)
        w_.log.warn("upstream {} ({}): {} ({} similar lines suppressed)", use_.server().name,
                    use_.server().url,
                    timeout ? "response timed out" : nghttp2_http2_strerror(call->error), quiet);
      co_return Forwarded{false, timeout ? 504 : 502};
    }
    x_.upstream_took = std::chrono::steady_clock::now() - sent_at;
    w_.upstream_answered(use_, x_.upstream_took, call->status);
    co_return co_await send_response(*call, client_keep_alive && parser_.is_done(), te_trailers);
  }

 private:
  // Waits until the call changes or `timeout` passes; false on the timeout.
  asio::awaitable<bool> changed(std::chrono::milliseconds timeout) {
    wake_.expires_after(timeout);
    auto [ec] = co_await wake_.async_wait(as_tuple(use_awaitable));
    co_return ec == asio::error::operation_aborted;
  }

  // The client's body into the call as the upstream takes it. A Forwarded when it failed.
  asio::awaitable<std::optional<Forwarded>> send_body(H2Call& call, bool expect_continue) {
    const auto idle = x_.config->server.timeouts.idle;
    if (expect_continue) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      client_.watch.guard(client_.transport.socket(), idle);
      auto [ec, n] = co_await asio::async_write(client_.transport, asio::buffer(cont),
                                                as_tuple(use_awaitable));
      if (ec) co_return Forwarded{};
    }
    auto& body = parser_.get().body();
    while (!parser_.is_done()) {
      while (call.out.size() >= kMaxBuffered && !call.closed) {
        const bool woke = co_await changed(use_.server().response_timeout);
        if (!woke) break;
      }
      if (call.closed || call.out.size() >= kMaxBuffered) co_return Forwarded{false, 502};
      body.data = client_.chunk.data();
      body.size = client_.chunk.size();
      client_.watch.guard(client_.transport.socket(), idle);
      auto [ec, n] = co_await bhttp::async_read(client_.transport, client_.buffer, parser_,
                                                as_tuple(use_awaitable));
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec) {
        ec = client_.watch.translate(ec);
        if (ec == bhttp::error::body_limit) co_return Forwarded{false, 413};
        co_return Forwarded{};  // the client went away or stalled, or its framing broke
      }
      call.out.append(client_.chunk.data(), client_.chunk.size() - body.size);
      x_.bytes_in += client_.chunk.size() - body.size;
      call.out_done = parser_.is_done();
      conn_->resume(call);
    }
    co_return std::nullopt;
  }

  // True once the final head is in; false when the stream failed or timed out.
  asio::awaitable<bool> wait_head(H2Call& call) {
    for (;;) {
      if (call.head_done) co_return true;
      if (call.closed) co_return false;
      const bool woke = co_await changed(use_.server().response_timeout);
      if (!woke) co_return false;
    }
  }

  asio::awaitable<Forwarded> send_response(H2Call& call, bool keep_alive, bool te_trailers) {
    bhttp::response<bhttp::empty_body> res;  // a message: it has keep_alive()
    res.result(call.status);
    std::optional<std::string_view> length;
    for (std::size_t i = 0; i < call.head.size(); ++i) {
      if (call.head.name(i) == "content-length") length = call.head.value(i);
      res.insert(call.head.name(i), call.head.value(i));
    }
    settle_response(w_.gate, x_, res);
    strip_hop_by_hop(res);
    add_rate_headers(x_, res);
    const bool ends_now = call.in_done && call.in.empty() && call.trailers.empty();
    const bool bodiless = x_.method == "HEAD" || call.status == 204 || call.status == 304;
    bool chunked = false;
    if (length) {
      res.set(bhttp::field::content_length, *length);
    } else if (bodiless) {
    } else if (ends_now) {
      res.set(bhttp::field::content_length, "0");
    } else if (x_.version >= 11) {
      res.set(bhttp::field::transfer_encoding, "chunked");
      chunked = true;
    } else {
      keep_alive = false;  // HTTP/1.0 without a length: the body ends with the connection
    }
    res.version(x_.version);
    res.keep_alive(keep_alive);
    x_.status = call.status;
    count_status(w_.gate, x_);  // not at the body's end: a stream holds nothing
    client_.head.clear();
    append_head(client_.head, res);
    std::string out = std::move(client_.head);
    const auto idle = x_.config->server.timeouts.idle;
    bool finished = false;
    while (!finished || !out.empty()) {
      if (!call.in.empty()) {
        const auto n = call.in.size();
        if (chunked) {
          char size[20];
          auto [end, ec] = std::to_chars(size, size + sizeof size, n, 16);
          out.append(size, end).append("\r\n").append(call.in).append("\r\n");
        } else {
          out += call.in;
        }
        x_.bytes_out += n;
        call.in.clear();
        conn_->take(call, n);
      }
      if (!finished && call.in_done && call.in.empty()) {
        finished = true;
        settle_trailers(call, ends_now);
        if (chunked) {
          out += "0\r\n";
          if (te_trailers)  // only a client that said it takes them gets them (RFC 9110 6.5.1)
            for (std::size_t i = 0; i < call.trailers.size(); ++i)
              out.append(call.trailers.name(i))
                  .append(": ")
                  .append(call.trailers.value(i))
                  .append("\r\n");
          out += "\r\n";
        }
      }
      if (!out.empty()) {
        client_.watch.guard(client_.transport.socket(), idle);
        auto [ec, n] = co_await asio::async_write(client_.transport, asio::buffer(out),
                                                  as_tuple(use_awaitable));
        if (ec) co_return Forwarded{};  // the guard resets the upstream's stream
        out.clear();
        continue;  // the call may have changed during the write: look again before waiting
      }
      if (finished) break;
      if (call.closed && call.error != NGHTTP2_NO_ERROR) {
        co_return Forwarded{};  // a partial response: closing is the only honest end
      }
      // Nothing awaited since the call was last looked at: no change can have been missed.
      const bool woke = co_await changed(use_.server().response_timeout);
      if (!woke) co_return Forwarded{};
    }
    client_.head = std::move(out);  // the connection's buffer, kept for the next request
    co_return Forwarded{keep_alive, 0};
  }

  void settle_trailers(const H2Call& call, bool trailers_only) {
    // A trailers-only response (gRPC) carries its trailers in the head.
    const auto& fields = trailers_only ? call.head : call.trailers;
    settle_fields(w_.gate, x_, true, [&](std::string_view name) { return fields.find(name); });
  }

  WorkerContext& w_;
  Http1Client client_;
  RequestParser& parser_;
  Exchange& x_;
  ServerUse use_;            // the server: its requests in flight count this one until the leg ends
  asio::steady_timer wake_;  // cancelled by the call whenever it changes
  std::shared_ptr<H2UpstreamConnection> conn_;
};

}  // namespace

asio::awaitable<Forwarded> forward_to_h2(WorkerContext& w, Http1Client client,
                                         RequestParser& parser, Exchange& x, ServerUse use) {
  ToH2 leg(w, client, parser, x, std::move(use));
  co_return co_await leg.run();
}

}  // namespace floodgate::http
