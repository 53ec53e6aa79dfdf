#pragma once
// The client side of an HTTP/3 stream for the proxy driver (proxy.hpp), as H2Front is for an
// HTTP/2 stream: the request's body taken from the stream's DATA as it arrives (the client's
// QUIC windows reopened only as each piece has been forwarded), the response's HEADERS
// submitted with the body's first piece, its DATA by reference until the client acknowledges
// it (at most H3Stream::kMaxOut unacknowledged), trailers after. A client that takes none of
// it, or sends none of its body, for the idle timeout has the stream reset.

#include "exchange/header_block.hpp"
#include "exchange/proxy.hpp"
#include "h3_connection.hpp"

namespace floodgate::http {

class H3Front final : public Front {
 public:
  // Makes the stream's fields the upstream's request head (method, target, :authority as
  // Host), as an HTTP/1.1 request's head is.
  H3Front(H3Connection& conn, H3Stream& s);
  ~H3Front() override;
  H3Front(const H3Front&) = delete;
  H3Front& operator=(const H3Front&) = delete;

  RequestHead& request() override { return s_.head; }
  UpstreamFraming framing() const override { return framing_; }
  bool body_done() const override { return s_.body_done && s_.body.empty(); }
  bool takes_trailers() const override { return te_trailers_; }
  boost::asio::awaitable<bool> send_continue() override { co_return true; }
  boost::asio::awaitable<BodyRead> read_body(std::span<char> into) override;
  const Trailers* request_trailers() const override {
    return s_.trailers.empty() ? nullptr : &s_.trailers;
  }
  bool duplex() const override { return true; }
  void watch(const Abandon& abandon) override { abandon_ = &abandon; }
  Wakers wakers() override { return {&s_.wake, &s_.wake_out}; }
  const bool* gone_flag() const override { return &s_.closed; }

  void set_head(ResponseHead& head, const ResponseBody& body) override;
  boost::asio::awaitable<bool> write_body(std::span<const char> piece, bool last,
                                          const Trailers* trailers) override;
  bool responded() const override { return s_.responded; }
  bool eager_head() const override { return true; }
  void abort() override;
  void using_upstream(UpstreamConnection* c) override { s_.upstream = c; }
  bool keeps_alive() const override { return true; }
  std::span<char> scratch() override {
    if (!scratch_) scratch_ = conn_.take_scratch();
    return *scratch_;
  }
  std::string& head_buffer() override { return head_; }
  ResponseHead& response_head() override { return response_; }
  Watchdog* watchdog() override { return nullptr; }
  boost::asio::awaitable<void> tunnel(ResponseHead&, UpstreamConnection&) override {
    co_return;  // an HTTP/3 request never asks for an upgrade (CONNECT is refused)
  }

 private:
  bool abandoned() const { return s_.closed || (abandon_ && (*abandon_)()); }

  H3Connection& conn_;
  H3Stream& s_;
  const Abandon* abandon_ = nullptr;
  UpstreamFraming framing_;
  bool te_trailers_ = false;
  std::uint64_t forwarded_ = 0;  // of the request's body
  std::size_t unconsumed_ = 0;   // bytes handed on whose window has not reopened yet
  HeaderBlock head_block_;       // the response's, submitted with its body's first piece
  bool has_body_ = false;
  std::string head_;
  ResponseHead response_;
  std::unique_ptr<H3Connection::Scratch> scratch_;
};

}  // namespace floodgate::http
