#pragma once
// An HTTP/1.x message read into the exchange's protocol-neutral head (exchange/fields.hpp):
// Beast's parser does the tokenizing, framing and limits; its callbacks put the start line
// and every field straight into a RequestHead or ResponseHead the caller owns (no Beast
// header in between, nothing copied twice: a connection's request head, an upstream call's
// response head, each cleared and reused), and the body into whatever buffer the reader
// offers next, a piece at a time, as beast::http::buffer_body would.

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

#include <algorithm>
#include <cstring>
#include <span>
#include <type_traits>

#include "exchange/fields.hpp"

namespace floodgate::http {

template <bool isRequest>
class H1Parser final : public boost::beast::http::basic_parser<isRequest> {
 public:
  using Head = std::conditional_t<isRequest, RequestHead, ResponseHead>;

  // Fills `into`, emptied first (its start line too: a message refused before its start line
  // was read must not show the last one's, whose text the clearing gives back); it outlives
  // the parser.
  explicit H1Parser(Head& into) : head_(into) {
    head_.fields.clear();
    head_.version = 11;
    if constexpr (isRequest) {
      head_.method = {};
      head_.target = {};
    } else {
      head_.status = 0;
      head_.reason = {};
    }
  }

  Head& get() { return head_; }
  const Head& get() const { return head_; }

  // The body's next bytes go into `into` (the parser stops with need_buffer once it is full).
  void body_into(std::span<char> into) {
    into_ = into.data();
    left_ = into.size();
  }
  // What is left of the buffer last offered.
  std::size_t body_left() const { return left_; }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(boost::beast::http::verb, string_view method, string_view target,
                       int version, error_code&) override {
    if constexpr (isRequest) {
      head_.set_method(method);
      head_.set_target(target);
      head_.version = static_cast<unsigned>(version);
    }
  }
  void on_response_impl(int status, string_view reason, int version, error_code&) override {
    if constexpr (!isRequest) {
      head_.status = status;
      head_.reason = head_.fields.keep(reason);
      head_.version = static_cast<unsigned>(version);
    }
  }
  void on_field_impl(boost::beast::http::field, string_view name, string_view value,
                     error_code&) override {
    // A chunked body's trailer fields come here too, after the head has gone on: not kept
    // (an HTTP/1.1 client's trailers are not forwarded).
    if (!header_done_) head_.fields.add(name, value);
  }
  void on_header_impl(error_code&) override { header_done_ = true; }
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code& ec) override { return take(body, ec); }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code& ec) override {
    return take(body, ec);
  }
  void on_finish_impl(error_code&) override {}

  std::size_t take(string_view body, error_code& ec) {
    const auto n = std::min(left_, body.size());
    if (n > 0) std::memcpy(into_, body.data(), n);
    into_ += n;
    left_ -= n;
    if (n < body.size()) ec = boost::beast::http::error::need_buffer;
    return n;
  }

  Head& head_;
  bool header_done_ = false;
  char* into_ = nullptr;
  std::size_t left_ = 0;
};

}  // namespace floodgate::http
