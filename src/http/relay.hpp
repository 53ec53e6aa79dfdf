#pragma once
// Streams a message body from a parser to a serializer through one fixed buffer, so a
// 10 MiB body costs one buffer of memory, not 10 MiB. Parser and serializer share the
// message (its header was already written); the body's chunks are re-framed by the
// serializer (Content-Length passes through, chunked is re-chunked).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>
#include <span>

namespace floodgate::http {

struct RelayResult {
  enum class Side { none, read, write };
  Side failed = Side::none;
  boost::system::error_code error;
  explicit operator bool() const { return failed == Side::none; }
};

template <bool isRequest>
boost::asio::awaitable<RelayResult> relay_body(
    boost::beast::tcp_stream& from, boost::beast::flat_buffer& from_buffer,
    boost::beast::http::parser<isRequest, boost::beast::http::buffer_body>& parser,
    boost::beast::tcp_stream& to,
    boost::beast::http::serializer<isRequest, boost::beast::http::buffer_body>& serializer,
    std::span<char> chunk, std::chrono::milliseconds read_timeout,
    std::chrono::milliseconds write_timeout) {
  namespace bhttp = boost::beast::http;
  using boost::asio::as_tuple;
  using boost::asio::use_awaitable;
  auto& body = parser.get().body();
  while (!parser.is_done()) {
    body.data = chunk.data();
    body.size = chunk.size();
    from.expires_after(read_timeout);
    auto [rec, rn] = co_await bhttp::async_read(from, from_buffer, parser, as_tuple(use_awaitable));
    if (rec == bhttp::error::need_buffer) rec = {};
    if (rec) co_return RelayResult{RelayResult::Side::read, rec};
    body.size = chunk.size() - body.size;
    body.data = chunk.data();
    body.more = !parser.is_done();
    to.expires_after(write_timeout);
    auto [wec, wn] = co_await bhttp::async_write(to, serializer, as_tuple(use_awaitable));
    if (wec == bhttp::error::need_buffer) wec = {};
    if (wec) co_return RelayResult{RelayResult::Side::write, wec};
  }
  if (!serializer.is_done()) {  // a body that ended with the header: write the framing's end
    body.data = nullptr;
    body.size = 0;
    body.more = false;
    to.expires_after(write_timeout);
    auto [wec, wn] = co_await bhttp::async_write(to, serializer, as_tuple(use_awaitable));
    if (wec) co_return RelayResult{RelayResult::Side::write, wec};
  }
  co_return RelayResult{};
}

}  // namespace floodgate::http
