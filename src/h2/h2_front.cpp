#include "h2_front.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>

#include "exchange/forwarding.hpp"
#include "net/coro_names.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

H2Front::H2Front(H2Connection& conn, H2Stream& s) : conn_(conn), s_(s) {
  te_trailers_ = asks_for_trailers(s.head.fields);
  auto& req = s.head;
  req.method = s.method;  // the stream's, which outlives the exchange
  req.target = s.path;
  if (!s.authority.empty()) req.fields.set("Host", s.authority);
  framing_.content_length = content_length_of(req.fields);  // nghttp2 has checked DATA matches it
  framing_.chunked = !framing_.content_length && !body_done();
}

H2Front::~H2Front() {
  conn_.consumed(s_, unconsumed_);  // a piece read when the exchange ended otherwise
  if (scratch_) conn_.give_back(std::move(scratch_));
}

asio::awaitable<BodyRead> H2Front::read_body(std::span<char> into) {
  // The piece before has been handed on: the client's window reopens by it.
  conn_.consumed(s_, std::exchange(unconsumed_, 0));
  const auto idle = s_.x.config->server.timeouts.idle;
  BodyRead gone;
  gone.failure = BodyRead::Failure::gone;
  for (;;) {
    if (abandoned()) co_return gone;  // reset by the client: the partial request is dropped
    if (!s_.body.empty()) {
      const auto n = std::min(into.size(), s_.body.size());
      std::copy_n(s_.body.data(), n, into.data());
      s_.body.erase(0, n);
      unconsumed_ = n;
      forwarded_ += n;
      if (forwarded_ > s_.x.config->server.max_body_bytes) {
        BodyRead too_large;
        too_large.failure = BodyRead::Failure::too_large;
        co_return too_large;
      }
      // nghttp2 resets a stream whose DATA overruns its content-length; should a byte past it
      // ever get here, it would be the start of a second request upstream: never written.
      if (framing_.content_length && forwarded_ > *framing_.content_length) {
        conn_.reset(s_, NGHTTP2_PROTOCOL_ERROR);
        co_return gone;
      }
      const bool last = s_.body_done && s_.body.empty();
      // The last piece has nothing after it to wait for: its window reopens now (an
      // unconsumed byte would be lost to the connection's window for good).
      if (last) conn_.consumed(s_, std::exchange(unconsumed_, 0));
      co_return BodyRead{n, last};
    }
    if (s_.body_done) co_return BodyRead{0, true};
    const bool woke = co_await changed_on(s_.wake_out, idle);
    if (!woke) {  // the client stalled mid-body
      conn_.stalled(s_);
      co_return gone;
    }
  }
}

void H2Front::set_head(ResponseHead& res, const ResponseBody& body) {
  head_block_ = H2HeaderBlock(res.status);
  for (const auto& f : res.fields) head_block_.add(f.name, f.value);
  if (body.length) head_block_.add("content-length", *body.length);
  has_body_ = body.has_body;
}

asio::awaitable<bool> H2Front::write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) {
  if (abandoned()) co_return false;
  // The HEADERS leave with the body's first piece (a small response: one write).
  if (!s_.responded) conn_.submit_head(s_, head_block_, has_body_);
  if (!has_body_) co_return true;
  if (!piece.empty()) {
    // A client that takes none of it for the idle timeout holds the stream, its buffer and an
    // upstream no longer: the stream is reset.
    const auto idle = s_.x.config->server.timeouts.idle;
    while (s_.out.size() - s_.out_sent >= H2Stream::kMaxOut && !abandoned()) {
      const bool woke = co_await changed_on(s_.wake, idle);
      if (!woke) conn_.stalled(s_);
    }
    if (abandoned()) co_return false;
    s_.out.append(piece.data(), piece.size());
  }
  if (last) {
    if (trailers)
      for (std::size_t i = 0; i < trailers->size(); ++i)
        s_.out_trailers.add(trailers->name(i), trailers->value(i));
    s_.out_done = true;
  }
  conn_.resume(s_);
  co_return true;
}

void H2Front::abort() {
  if (!s_.closed) conn_.reset(s_, NGHTTP2_INTERNAL_ERROR, ResetCause::upstream);
}

}  // namespace floodgate::http
