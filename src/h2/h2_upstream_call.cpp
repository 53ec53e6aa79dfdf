#include "h2_upstream_call.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>

#include "net/coro_names.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

namespace {

// The request's body held for the origin beyond what its window took.
constexpr std::size_t kMaxBuffered = 64 * 1024;

}  // namespace

H2UpstreamCall::H2UpstreamCall(H2UpstreamPool& pool, Exchange& x, Wakers wakers,
                               const Abandon& abandon, ResponseHead& response)
    : UpstreamCall(true, response),
      pool_(pool),
      x_(x),
      abandon_(abandon),
      own_in_(pool.executor()),
      own_out_(pool.executor()),
      in_(wakers.in ? *wakers.in : own_in_),
      out_(wakers.out ? *wakers.out : own_out_) {}

H2CallPtr H2UpstreamCall::fresh_call() {
  auto call = std::make_shared<H2Call>();
  call->waker = &in_;
  call->waker_out = &out_;
  return call;
}

// Most calls find an open connection with room: no coroutine of the pool's for them.
bool H2UpstreamCall::reuse() {
  conn_ = pool_.ready(server());
  return conn_ != nullptr;
}

asio::awaitable<UpstreamCall::Opened> H2UpstreamCall::open() {
  auto got = co_await pool_.get(server());
  if (!got.conn) co_return Opened{false, got.timeout, got.why};
  conn_ = std::move(got.conn);
  co_return Opened{true};
}

UpstreamCall::Step H2UpstreamCall::send_head(RequestHead& req, const Shape& shape) {
  ++attempt_;
  // Built again for each server: its scheme and authority may differ.
  block_ = H2HeaderBlock();
  add_upstream_request(block_, req, server(), shape.takes_trailers);
  if (!call_) {
    call_ = fresh_call();
    request_done_ = !shape.has_body;
  }
  if (!conn_->submit(call_, block_.pairs(), shape.has_body)) {
    Step step;
    step.ok = false;
    step.retry = attempt_ < H2UpstreamPool::kAttempts;  // another connection may take it
    step.answer = 502;
    return step;
  }
  return Step{};
}

asio::awaitable<UpstreamCall::Step> H2UpstreamCall::send_body(std::span<const char> piece,
                                                              bool last, const Trailers* trailers) {
  auto& call = *call_;
  while (call.out.size() >= kMaxBuffered && !call.closed && !abandon_()) {
    const bool woke = co_await changed_on(out_, timeout());
    if (!woke) break;
  }
  if (call.closed || call.out.size() >= kMaxBuffered || abandon_()) {
    Step step;
    step.ok = false;
    step.answer = abandon_() ? 0 : 502;
    co_return step;
  }
  call.out.append(piece.data(), piece.size());
  if (last && trailers)
    for (std::size_t i = 0; i < trailers->size(); ++i)
      call.out_trailers.add(trailers->name(i), trailers->value(i));
  call.out_done = last;
  request_done_ = last;
  conn_->resume(call);
  co_return Step{};
}

asio::awaitable<UpstreamCall::Step> H2UpstreamCall::read_head(bool) {
  for (;;) {
    if (call_->head_done || call_->closed) break;
    if (abandon_()) co_return Step{false, false, false, false, 0, {}};  // nothing to answer
    const bool woke = co_await changed_on(in_, timeout());
    if (!woke) break;
  }
  if (call_->head_done) {
    auto& call = *call_;
    // A copy the driver rewrites for the client; the call's stays as received (a
    // trailers-only response's trailers).
    response_.fields.clear();
    response_.status = call.status;
    response_.reason = {};
    std::optional<std::string_view> length;
    for (const auto& f : call.head) {
      if (f.name == "content-length") length = f.value;
      response_.fields.add(f.name, f.value);
    }
    const bool bodiless = x_.method == "HEAD" || call.status == 204 || call.status == 304;
    // A response that ended with its head: its trailers, if any (gRPC's trailers-only
    // answer), are in the head.
    const bool ends_now = call.in_done && call.in.empty() && call.trailers.empty();
    body_ = {};
    if (length) {
      std::uint64_t n = 0;
      auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), n);
      if (ec == std::errc{} && end == length->data() + length->size()) body_.length = n;
    } else if (ends_now && !bodiless) {
      body_.length = 0;
    }
    body_.has_body = !bodiless && !ends_now;
    trailers_ = ends_now ? &call.head : &call.trailers;
    co_return Step{};
  }
  // The origin never processed it: again on another connection, body and all if kept.
  if (call_->refused && call_->replayable && attempt_ < H2UpstreamPool::kAttempts &&
      request_done_) {
    auto next = fresh_call();
    next->out = std::move(call_->sent) + call_->out;
    next->out_done = call_->out_done;
    next->out_trailers = std::move(call_->out_trailers);
    call_->waker = nullptr;
    call_->waker_out = nullptr;
    call_ = std::move(next);
    Step retry;
    retry.ok = false;
    retry.retry = true;
    co_return retry;
  }
  const bool timeout = !call_->closed;
  Step step;
  step.ok = false;
  step.timeout = timeout;
  step.blame = !timeout;
  step.answer = timeout ? 504 : 502;
  step.why = timeout ? "response timed out" : nghttp2_http2_strerror(call_->error);
  co_return step;
}

asio::awaitable<BodyRead> H2UpstreamCall::read_body(std::span<char> into) {
  auto& call = *call_;
  for (;;) {
    if (!call.in.empty()) {
      const auto n = std::min(into.size(), call.in.size());
      std::copy_n(call.in.data(), n, into.data());
      call.in.erase(0, n);
      conn_->take(call, n);
      co_return BodyRead{n, call.in_done && call.in.empty()};
    }
    if (call.in_done) co_return BodyRead{0, true};
    if (call.closed || abandon_()) {  // a partial response, or nobody to take it
      BodyRead failed;
      failed.failure = BodyRead::Failure::gone;
      co_return failed;
    }
    const bool woke = co_await changed_on(in_, timeout());
    if (!woke) {
      BodyRead failed;
      failed.failure = BodyRead::Failure::timeout;
      co_return failed;
    }
  }
}

}  // namespace floodgate::http
