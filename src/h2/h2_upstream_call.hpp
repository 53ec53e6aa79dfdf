#pragma once
// One request as a stream on an HTTP/2 connection to an h2 server (proxy.hpp's UpstreamCall,
// over upstream_h2.hpp): the head becomes HEADERS, the body DATA as the origin's window
// takes it, the response's head, DATA and trailers come back as the front takes them (the
// origin's window reopens only then). A stream the origin refused unprocessed (GOAWAY,
// REFUSED_STREAM) is reported as `retry` while attempts remain and the whole body was kept,
// and goes again on another connection with it.

#include <boost/asio/steady_timer.hpp>

#include <memory>

#include "exchange/proxy.hpp"
#include "upstream_h2.hpp"

namespace floodgate::http {

class H2UpstreamCall final : public UpstreamCall {
 public:
  // `wakers`: the front's timers, shared (none: the call's own); `abandon`: when to stop
  // waiting; `response`: where the response's head goes.
  H2UpstreamCall(H2UpstreamPool& pool, Exchange& x, Wakers wakers, const Abandon& abandon,
                 ResponseHead& response);
  // A stream of a multiplexed connection: DATA frames carry its body (no chunked encoding,
  // no upgrade), and the request's body may flow beside the response (gRPC's streaming).
  static constexpr bool kMultiplexed = true;

  bool reuse() override;
  boost::asio::awaitable<Opened> open() override;
  Step send_head(RequestHead& head, const Shape& shape) override;
  boost::asio::awaitable<Step> send_body(std::span<const char> piece, bool last,
                                         const Trailers* trailers) override;
  boost::asio::awaitable<Step> read_head(bool upgrade) override;
  ResponseBody body() const override { return body_; }
  bool head_first() const override { return call_->in.empty() && !call_->in_done; }
  boost::asio::awaitable<BodyRead> read_body(std::span<char> into) override;
  void done() override {}
  UpstreamConnection* connection() override { return nullptr; }

 private:
  H2CallPtr fresh_call();
  std::chrono::milliseconds timeout() const { return server().response_timeout; }

  H2UpstreamPool& pool_;
  Exchange& x_;
  const Abandon& abandon_;
  // Cancelled by the call whenever it changes: the response's waits on `in_`, the request's
  // on `out_` (the front's, or these).
  boost::asio::steady_timer own_in_;
  boost::asio::steady_timer own_out_;
  boost::asio::steady_timer& in_;
  boost::asio::steady_timer& out_;
  H2CallPtr call_;
  std::shared_ptr<H2UpstreamConnection> conn_;
  H2CallGuard guard_{call_, conn_};  // declared after what it refers to: it goes first
  H2HeaderBlock block_;
  int attempt_ = 0;
  bool request_done_ = false;  // the whole body is in the call (none, or its last piece)
  ResponseBody body_;
};

}  // namespace floodgate::http
