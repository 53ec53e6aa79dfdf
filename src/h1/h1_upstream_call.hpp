#pragma once
// One request on a pooled keep-alive HTTP/1.1 connection to a server (proxy.hpp's
// UpstreamCall): the head written with the body's first piece, the response head read (1xx
// skipped), its body read a piece at a time, the connection given back once the response
// was read whole. A reused connection the upstream closed meanwhile is reported as `retry`
// once, when the request (no body, idempotent) may safely go again.

#include <optional>
#include <string>

#include "exchange/proxy.hpp"
#include "h1_body.hpp"
#include "http1_client.hpp"

namespace floodgate::http {

class H1UpstreamCall final : public UpstreamCall {
 public:
  // `watch`: the front's watchdog the upstream's socket operations run under (null: the
  // connection's own); `head`: where the request's head is serialized; `response`: where the
  // response's is read.
  H1UpstreamCall(UpstreamPool& pool, Watchdog* watch, std::string& head, ResponseHead& response)
      : UpstreamCall(false, response), pool_(pool), front_watch_(watch), head_(head) {}
  ~H1UpstreamCall() override;
  // Its body is framed as HTTP/1.1 frames it (Content-Length, chunked, an upgrade).
  static constexpr bool kMultiplexed = false;

  bool reuse() override;
  boost::asio::awaitable<Opened> open() override;
  Step send_head(RequestHead& head, const Shape& shape) override;
  boost::asio::awaitable<Step> send_body(std::span<const char> piece, bool last,
                                         const Trailers* trailers) override;
  boost::asio::awaitable<Step> read_head(bool upgrade) override;
  ResponseBody body() const override;
  bool head_first() const override { return conn_->buffer.size() == 0; }
  boost::asio::awaitable<BodyRead> read_body(std::span<char> into) override;
  void done() override;
  UpstreamConnection* connection() override { return conn_.get(); }

 private:
  // The call failed with `ec` (translated): a retry when a reused connection turned out
  // closed and the request may go again, else what to answer.
  Step failed(const boost::system::error_code& ec);
  Watchdog& watch() { return front_watch_ ? *front_watch_ : conn_->watch; }

  UpstreamPool& pool_;
  Watchdog* front_watch_;
  UpstreamConnectionPtr conn_;
  std::string& head_;  // the request's, serialized
  std::optional<BodyWriter> writer_;
  std::optional<ResponseParser> parser_;  // the response's, into response_
  bool head_only_ = false;                // a HEAD request: its response has no body
  bool retryable_ = false;                // no body, idempotent: may go again on a new connection
  bool stale_retried_ = false;            // once
};

}  // namespace floodgate::http
