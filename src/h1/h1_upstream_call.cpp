#include "h1_upstream_call.hpp"

#include <boost/asio/ssl/error.hpp>

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "net/coro_names.hpp"
#include "wire.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

namespace {

constexpr std::uint64_t kUpstreamHeaderLimit = 64 * 1024;

bool is_idempotent(std::string_view method) {
  static constexpr std::string_view kIdempotent[] = {"GET", "HEAD",   "OPTIONS",
                                                     "PUT", "DELETE", "TRACE"};
  return std::find(std::begin(kIdempotent), std::end(kIdempotent), method) != std::end(kIdempotent);
}

// The ways a reused keep-alive connection shows that its upstream closed it meanwhile.
bool is_stale_connection(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

}  // namespace

H1UpstreamCall::~H1UpstreamCall() {
  // The watchdog guards no socket once the call is over (the connection goes after this).
  if (front_watch_)
    front_watch_->relax();
  else if (conn_)
    conn_->watch.relax();
}

bool H1UpstreamCall::reuse() {
  conn_ = pool_.take(server());
  return conn_ != nullptr;
}

asio::awaitable<UpstreamCall::Opened> H1UpstreamCall::open() {
  // A front without a watchdog of its own times the connecting with one made for it.
  std::optional<Watchdog> own;
  if (!front_watch_) own.emplace(pool_.executor());
  auto fresh = co_await pool_.connect(server(), front_watch_ ? *front_watch_ : *own);
  if (fresh.error) co_return Opened{false, fresh.error == beast::error::timeout, fresh.why};
  conn_ = std::move(fresh.conn);
  co_return Opened{true};
}

UpstreamCall::Step H1UpstreamCall::send_head(RequestHead& req, const Shape& shape) {
  head_only_ = req.method == "HEAD";
  retryable_ = !shape.has_body && is_idempotent(req.method);
  head_.clear();
  append_head(head_, req);
  writer_.emplace(conn_->stream, watch(), server().response_timeout);
  writer_->start(head_, shape.chunked);
  return Step{};  // the head leaves with the body's first piece, or in read_head
}

asio::awaitable<UpstreamCall::Step> H1UpstreamCall::send_body(std::span<const char> piece,
                                                              bool last, const Trailers*) {
  const bool sent = co_await writer_->write(piece, last);
  if (!sent) co_return failed(writer_->error());
  co_return Step{};
}

asio::awaitable<UpstreamCall::Step> H1UpstreamCall::read_head(bool upgrade) {
  if (!writer_->written()) {  // a request without a body: its head alone (one frame fewer)
    const bool sent = co_await writer_->write({}, true);
    if (!sent) co_return failed(writer_->error());
  }
  const auto timeout = server().response_timeout;
  for (;;) {
    parser_.emplace(response_);
    parser_->header_limit(kUpstreamHeaderLimit);
    parser_->body_limit(boost::none);
    parser_->skip(head_only_);
    watch().guard(conn_->stream.socket(), timeout);
    auto [read_ec, n] = co_await bhttp::async_read_header(conn_->stream, conn_->buffer, *parser_,
                                                          as_tuple(use_awaitable));
    if (auto ec = watch().translate(read_ec)) co_return failed(ec);
    const auto code = parser_->get().status;
    if (code >= 200) co_return Step{};
    // 101 is final for an upgrade we asked for; anything else switching protocols on a
    // request that did not ask is a broken upstream.
    if (code == 101) {
      if (upgrade) co_return Step{};
      co_return failed(bhttp::error::bad_version);
    }
  }
}

UpstreamCall::Step H1UpstreamCall::failed(const beast::error_code& ec) {
  // A pooled connection the upstream closed just as we reused it: safe to try once more on a
  // new one, but only when nothing of a body has been consumed. It says nothing of the server.
  const bool stale = conn_->reused && is_stale_connection(ec);
  if (stale && retryable_ && !stale_retried_) {
    stale_retried_ = true;
    watch().relax();
    conn_.reset();
    Step retry;
    retry.ok = false;
    retry.retry = true;
    return retry;
  }
  Step step;
  step.ok = false;
  step.timeout = ec == beast::error::timeout;
  step.blame = !stale;
  step.answer = status_for_upstream_error(ec);
  step.why = ec.message();
  return step;
}

ResponseBody H1UpstreamCall::body() const {
  ResponseBody b;
  if (auto n = parser_->content_length()) b.length = *n;
  b.has_body = !parser_->is_done();
  return b;
}

// Not a coroutine of its own: the driver awaits read_body_piece's.
asio::awaitable<BodyRead> H1UpstreamCall::read_body(std::span<char> into) {
  return read_body_piece(conn_->stream, conn_->buffer, *parser_, watch(), server().response_timeout,
                         into);
}

void H1UpstreamCall::done() {
  if (parser_->keep_alive() && conn_->buffer.size() == 0) {
    watch().relax();
    pool_.give_back(server(), std::move(conn_));
  }
}

}  // namespace floodgate::http
