#pragma once
// The client side of an HTTP/1.x exchange for the proxy driver (proxy.hpp): the request's
// body read from the connection through its parser, 100 Continue when asked for, and the
// response written back framed for the client's version (its own length, re-chunked, or
// ended by closing for HTTP/1.0), trailers in the last chunk for a client that said
// `TE: trailers`; an accepted WebSocket upgrade becomes a tunnel.

#include <optional>

#include "exchange/proxy.hpp"
#include "h1_body.hpp"
#include "http1_client.hpp"

namespace floodgate::http {

class H1Front final : public Front {
 public:
  // `parser` holds the request's head as received; its body, if any, is still unread. What
  // the head says of the client (keep-alive, Expect, TE, an upgrade) is read now, before the
  // driver rewrites it for the upstream.
  H1Front(Http1Client client, RequestParser& parser, Exchange& x, metrics::Metrics& metrics);

  RequestHead& request() override { return parser_.get(); }
  UpstreamFraming framing() const override { return framing_; }
  bool body_done() const override { return parser_.is_done(); }
  bool takes_trailers() const override { return te_trailers_; }
  boost::asio::awaitable<bool> send_continue() override;
  boost::asio::awaitable<BodyRead> read_body(std::span<char> into) override;
  const Trailers* request_trailers() const override { return nullptr; }
  bool duplex() const override { return false; }
  void watch(const Abandon&) override {}
  Wakers wakers() override { return {}; }
  const bool* gone_flag() const override { return nullptr; }

  void set_head(ResponseHead& head, const ResponseBody& body) override;
  boost::asio::awaitable<bool> write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) override;
  bool responded() const override { return writer_.written(); }
  bool eager_head() const override { return false; }    // the head leaves with the body
  void abort() override {}                              // the session closes the connection
  void using_upstream(UpstreamConnection*) override {}  // aborting the session expires its watchdog
  bool keeps_alive() const override { return keep_alive_; }
  std::span<char> scratch() override { return client_.chunk; }
  std::string& head_buffer() override { return client_.head; }
  ResponseHead& response_head() override { return client_.response; }
  Watchdog* watchdog() override { return &client_.watch; }
  boost::asio::awaitable<void> tunnel(ResponseHead& head, UpstreamConnection& upstream) override;

 private:
  Http1Client client_;
  RequestParser& parser_;
  Exchange& x_;
  metrics::Metrics& metrics_;
  UpstreamFraming framing_;
  bool expect_continue_ = false;
  bool te_trailers_ = false;
  bool keep_alive_ = false;  // the client's, until the response's framing decides
  BodyWriter writer_;
  std::string trailer_fields_;
};

}  // namespace floodgate::http
