#include "h3_front.hpp"

#include <nghttp3/nghttp3.h>

#include <algorithm>

#include "exchange/forwarding.hpp"
#include "net/changed_on.hpp"
#include "net/coro_names.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2/h2_stream.cpp
#endif

namespace floodgate::http {

H3Front::H3Front(H3Connection& conn, H3Stream& s) : conn_(conn), s_(s) {
  te_trailers_ = asks_for_trailers(s.head.fields);
  auto& req = s.head;
  req.method = s.method;  // the stream's, which outlives the exchange
  req.target = s.path;
  if (!s.authority.empty()) req.fields.set("Host", s.authority);
  framing_.content_length = content_length_of(req.fields);  // nghttp3 checks DATA against it
  framing_.chunked = !framing_.content_length && !body_done();
}

H3Front::~H3Front() {
  conn_.consumed(s_, unconsumed_);  // a piece read when the exchange ended otherwise
  if (scratch_) conn_.give_back(std::move(scratch_));
}

asio::awaitable<BodyRead> H3Front::read_body(std::span<char> into) {
  // The piece before has been handed on: the client's windows reopen by it.
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
      // A byte past content-length would start a second request upstream: never written.
      if (framing_.content_length && forwarded_ > *framing_.content_length) {
        conn_.reset(s_, NGHTTP3_H3_MESSAGE_ERROR);
        co_return gone;
      }
      const bool last = s_.body_done && s_.body.empty();
      if (last) conn_.consumed(s_, std::exchange(unconsumed_, 0));
      co_return BodyRead{n, last};
    }
    if (s_.body_done) co_return BodyRead{0, true};
    if (!co_await changed_on(s_.wake_out, idle)) {  // the client stalled mid-body
      conn_.stalled(s_);
      co_return gone;
    }
  }
}

void H3Front::set_head(ResponseHead& res, const ResponseBody& body) {
  head_block_ = HeaderBlock(res.status);
  for (const auto& f : res.fields) head_block_.add(f.name, f.value);
  if (body.length) head_block_.add("content-length", *body.length);
  has_body_ = body.has_body;
}

asio::awaitable<bool> H3Front::write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) {
  if (abandoned()) co_return false;
  if (!s_.responded) conn_.submit_head(s_, head_block_, has_body_);
  if (!has_body_) co_return true;
  if (!piece.empty()) {
    // A client that acknowledges none of it for the idle timeout holds the stream, its buffer
    // and an upstream no longer: the stream is reset.
    const auto idle = s_.x.config->server.timeouts.idle;
    while (s_.out_bytes >= H3Stream::kMaxOut && !abandoned()) {
      if (!co_await changed_on(s_.wake, idle)) conn_.stalled(s_);
    }
    if (abandoned()) co_return false;
    s_.out.emplace_back(piece.data(), piece.size());
    s_.out_bytes += piece.size();
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

void H3Front::abort() {
  if (!s_.closed) conn_.reset(s_, NGHTTP3_H3_INTERNAL_ERROR);
}

}  // namespace floodgate::http
