#pragma once
// THE proxy driver (proxy.hpp): an admitted exchange taken to a server of its route's
// upstream and back, over a Front and an UpstreamCall. Header-only because each protocol's
// call is made in a frame of its own (run_with): the one place that knows both protocols
// (the worker's Proxy) instantiates it for each.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "floodgate/decide/gate.hpp"
#include "forwarding.hpp"
#include "net/coro_names.hpp"  // this header is included by one .cpp only
#include "net/report_exception.hpp"
#include "net/upstreams.hpp"
#include "pipeline.hpp"
#include "proxy.hpp"

namespace floodgate::http {

// What a client is told when its request's body could not be read: 413, 400, or nothing
// (it went away or stalled).
inline int answer_for(const BodyRead& r) {
  if (r.failure == BodyRead::Failure::too_large) return 413;
  if (r.failure == BodyRead::Failure::malformed) return 400;
  return 0;
}

class Driver {
 public:
  Driver(Upstreams& upstreams, decide::Gate& gate, Front& front, Exchange& x,
         const config::Upstream& up)
      : ups_(upstreams),
        gate_(gate),
        front_(front),
        x_(x),
        use_(upstreams.server(x.config, up)),
        pump_joined_(upstreams.pool.executor()) {
    abandon_.client_gone = front.gone_flag();
    front.watch(abandon_);
  }

  // The server's protocol: the caller makes the call (Call) of the protocol it speaks.
  bool h2() const { return use_.server().protocol == config::UpstreamProtocol::h2; }
  const Abandon& abandon() const { return abandon_; }

  // The whole exchange: heads, then a WebSocket's tunnel or the response relayed. `make`
  // returns the call, made in this frame: one frame per protocol, since an h2 call is four
  // times an HTTP/1.1 one's size and a coroutine frame past Asio's recycling limit (1020
  // bytes) costs a trip through malloc's slow path on every request.
  template <class Make>
  asio::awaitable<Forwarded> run_with(Make make) {
    auto call = make();
    constexpr bool multiplexed = decltype(call)::kMultiplexed;
    duplex_ = multiplexed && front_.duplex();
    auto framing = front_.framing();
    if (multiplexed)
      framing = UpstreamFraming{framing.content_length};  // DATA frames carry the body
    auto& req = front_.request();
    const UpstreamCall::Shape shape{!front_.body_done(), framing.chunked, front_.takes_trailers()};
    prepare_upstream_head(x_, req, use_.server(), framing);
    auto done = co_await exchange_heads(call, req, shape, framing.upgrade);
    if (!done && call.head().status == 101) {
      x_.status = 101;
      count_status(gate_, x_);  // an open tunnel holds nothing of a counting limit
      co_await front_.tunnel(call.head(), *call.connection());
      co_return Forwarded{};  // the connection no longer carries HTTP
    }
    if (!done) done = co_await relay_response(call);
    front_.using_upstream(nullptr);
    if (pumping_) {  // the response ended first (or failed): the request's side stops too
      stop();
      while (pumping_) co_await pump_joined_.async_wait(as_tuple(use_awaitable));
    }
    // The request's body failed (too large, malformed, or the call took no more of it): its
    // answer, unless a response had begun, which is then cut short.
    if (pump_failed_.answer != 0 && !front_.responded())
      done = Forwarded{false, pump_failed_.answer};
    else if (pump_failed_.answer != 0)
      front_.abort();
    co_return *done;
  }

 private:
  // One side of the exchange is over: the waits of the other end now.
  void stop() {
    abandon_.stopped = true;
    const auto wakers = front_.wakers();
    if (wakers.in) wakers.in->cancel();
    if (wakers.out) wakers.out->cancel();
  }

  // The request's body fed to the call beside the response's relay (a full-duplex exchange).
  asio::awaitable<void> pump(UpstreamCall& call) {
    auto step = co_await send_body(call, *pump_buffer_);
    if (!step.ok) pump_failed_ = step;
  }
  void start_pump(UpstreamCall& call) {
    pump_buffer_ = std::make_unique<std::array<char, 16 * 1024>>();
    pumping_ = true;
    asio::co_spawn(ups_.pool.executor(), pump(call), [this](std::exception_ptr e) {
      if (e) report_exception(ups_.log, ups_.metrics, "request body", e);
      pumping_ = false;
      pump_joined_.cancel();
      if (e || !pump_failed_.ok) stop();  // the response's side has nothing left to wait for
    });
  }

 private:
  // Connects, sends the request (another server once when no connection can be made; again
  // when the call says it may) and reads the response's head. A Forwarded when it failed.
  asio::awaitable<std::optional<Forwarded>> exchange_heads(UpstreamCall& call, RequestHead& req,
                                                           const UpstreamCall::Shape& shape,
                                                           bool upgrade) {
    bool retried = false;  // on another server, after a connection could not be made
    bool sent = false;     // a head left once: another one that leaves is a re-send
    bool body_sent = !shape.has_body;
    for (;;) {
      if (abandon_()) co_return Forwarded{};  // the client went away: nothing is sent
      front_.using_upstream(nullptr);         // a connection given up on (a retry) is gone
      call.to(use_);
      UpstreamCall::Opened opened{call.reuse()};
      if (!opened.ok) opened = co_await call.open();
      if (!opened.ok) {
        ups_.connect_failed(use_, opened.timeout, opened.why);
        // Nothing was sent (the body is still unread): another server may take it.
        if (!retried && ups_.retry(x_.config, use_)) {
          retried = true;
          continue;
        }
        co_return Forwarded{false, opened.timeout ? 504 : 502};
      }
      front_.using_upstream(call.connection());
      const auto sent_at = std::chrono::steady_clock::now();
      auto step = call.send_head(req, shape);
      if (step.ok && std::exchange(sent, true)) ups_.resent(use_);
      if (step.ok && !body_sent && duplex_) {  // fed beside the response, from now on
        start_pump(call);
        body_sent = true;
      } else if (step.ok && !body_sent) {  // once: a request sent again takes the kept body
        step = co_await send_body(call, front_.scratch());
        if (!step.ok && !step.retry && step.why.empty()) co_return Forwarded{false, step.answer};
        body_sent = true;
      }
      if (step.ok) step = co_await call.read_head(upgrade);
      if (step.ok) {
        x_.upstream_took = std::chrono::steady_clock::now() - sent_at;
        ups_.answered(use_, x_.upstream_took, call.head().status);
        co_return std::nullopt;
      }
      if (step.retry) continue;
      co_return failed(step);
    }
  }

  // The client's body, as the call takes it, through `buffer`. A step that failed without a
  // `why` is the client's (its answer, or 0) or the call's own refusal to buffer more.
  asio::awaitable<UpstreamCall::Step> send_body(UpstreamCall& call, std::span<char> buffer) {
    const bool continued = co_await front_.send_continue();
    if (!continued) co_return quiet(0);
    for (;;) {
      auto r = co_await front_.read_body(buffer);
      if (!r) co_return quiet(answer_for(r));
      const auto* trailers = r.last ? front_.request_trailers() : nullptr;
      auto step = co_await call.send_body(buffer.first(r.n), r.last, trailers);
      if (!step.ok || r.last) co_return step;
    }
  }

  static UpstreamCall::Step quiet(int answer) {
    UpstreamCall::Step step;
    step.ok = false;
    step.answer = answer;
    return step;
  }

  // The upstream failed before a response head reached the client: counted toward its
  // server's ejection, logged (at most a line a second), and the status to answer.
  Forwarded failed(const UpstreamCall::Step& step) {
    // The client went away (its stream reset, and with it the upstream connection closed):
    // says nothing of the server.
    if (abandon_()) return Forwarded{};
    if (step.timeout)
      ups_.timed_out(use_);
    else if (step.blame)
      ups_.outcome(use_, true);
    if (!step.why.empty())
      if (auto quiet = ups_.errors.allow(); quiet >= 0)
        ups_.log.warn("upstream {} ({}): {} ({} similar lines suppressed)", use_.server().name,
                      use_.server().url, step.why, quiet);
    return Forwarded{false, step.answer};
  }

  // The response's head rewritten for the client, then its body as the client takes it.
  asio::awaitable<Forwarded> relay_response(UpstreamCall& call) {
    auto& res = call.head();
    settle_response(gate_, x_, res.fields);
    strip_hop_by_hop(res.fields);
    add_rate_headers(x_, res.fields);
    x_.status = res.status;
    count_status(gate_, x_);  // not at the body's end: a long download holds nothing
    const auto body = call.body();
    front_.set_head(res, body);
    if (body.has_body && call.head_first() && (front_.eager_head() || call.streams())) {
      const bool sent = co_await front_.write_body({}, false, nullptr);
      if (!sent) co_return Forwarded{};
    }
    const auto buffer = front_.scratch();
    for (;;) {
      BodyRead r{0, true};
      if (body.has_body) r = co_await call.read_body(buffer);
      if (!r && abandon_()) co_return Forwarded{};  // nobody is left to tell
      if (!r) {
        // Nothing reached the client yet: it can still be told what happened.
        if (!front_.responded())
          co_return Forwarded{false, r.failure == BodyRead::Failure::timeout ? 504 : 502};
        front_.abort();
        if (auto quiet = ups_.errors.allow(); quiet >= 0)
          ups_.log.warn("upstream {} ({}): response body: {} ({} similar lines suppressed)",
                        use_.server().name, use_.server().url,
                        r.error ? r.error.message() : std::string("the stream failed"), quiet);
        co_return Forwarded{};  // a partial response: closing is the only honest end
      }
      const Trailers* trailers = r.last ? call.trailers() : nullptr;
      if (trailers && trailers->size() > 0)
        settle_fields(gate_, x_, true,
                      [trailers](std::string_view n) { return trailers->find(n); });
      const bool written = co_await front_.write_body(buffer.first(r.n), r.last, trailers);
      if (!written) co_return Forwarded{};
      if (r.last) break;
    }
    front_.using_upstream(nullptr);
    call.done();
    co_return Forwarded{front_.keeps_alive(), 0};
  }

  Upstreams& ups_;
  decide::Gate& gate_;
  Front& front_;
  Exchange& x_;
  ServerUse use_;  // the server: its requests in flight count this one until the driver ends
  Abandon abandon_;
  bool duplex_ = false;
  // A full-duplex exchange's request side: running, how it failed, its buffer.
  bool pumping_ = false;
  UpstreamCall::Step pump_failed_;
  asio::steady_timer pump_joined_;  // cancelled when the request's side ends
  std::unique_ptr<std::array<char, 16 * 1024>> pump_buffer_;
};

}  // namespace floodgate::http
