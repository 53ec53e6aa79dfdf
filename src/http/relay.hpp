#pragma once
// Streams a message from a parser to a socket through one fixed buffer, so a 10 MiB body
// costs one buffer of memory, not 10 MiB. The serialized head leaves together with the first
// piece of the body (one write, one segment); the body is framed as told: passed through
// as it is (Content-Length, or delimited by the connection's end) or re-chunked.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <span>
#include <string_view>

#include "transport.hpp"
#include "watchdog.hpp"

namespace floodgate::http {

struct RelayResult {
  enum class Side { none, read, write };
  Side failed = Side::none;
  boost::system::error_code error;
  bool head_written = false;     // false: the receiver has seen nothing of this message yet
  std::uint64_t body_bytes = 0;  // of the body, read and written on
  explicit operator bool() const { return failed == Side::none; }
};

enum class BodyFraming { raw, chunked };

struct RelayLeg {
  Transport& stream;
  std::chrono::milliseconds timeout;
};

template <bool isRequest>
boost::asio::awaitable<RelayResult> relay_message(
    RelayLeg from, boost::beast::flat_buffer& from_buffer,
    boost::beast::http::parser<isRequest, boost::beast::http::buffer_body>& parser, RelayLeg to,
    std::string_view head, BodyFraming framing, std::span<char> chunk, Watchdog& watch) {
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  using asio::as_tuple;
  using asio::use_awaitable;
  RelayResult result;
  auto& body = parser.get().body();
  for (;;) {
    std::size_t n = 0;
    if (!parser.is_done()) {
      body.data = chunk.data();
      body.size = chunk.size();
      watch.guard(from.stream.socket(), from.timeout);
      auto [rec, rn] =
          co_await bhttp::async_read(from.stream, from_buffer, parser, as_tuple(use_awaitable));
      if (rec == bhttp::error::need_buffer) rec = {};
      if (rec) {
        result.failed = RelayResult::Side::read;
        result.error = watch.translate(rec);
        co_return result;
      }
      n = chunk.size() - body.size;
    }
    const bool done = parser.is_done();
    std::array<asio::const_buffer, 4> out;
    std::size_t k = 0;
    if (!result.head_written) out[k++] = asio::buffer(head);
    char size_line[20];
    if (framing == BodyFraming::chunked) {
      if (n > 0) {
        auto [end, ec] = std::to_chars(size_line, size_line + 16, n, 16);
        *end++ = '\r';
        *end++ = '\n';
        out[k++] = asio::buffer(size_line, static_cast<std::size_t>(end - size_line));
        out[k++] = asio::buffer(chunk.data(), n);
        out[k++] =
            asio::buffer(done ? std::string_view("\r\n0\r\n\r\n") : std::string_view("\r\n"));
      } else if (done) {
        out[k++] = asio::buffer(std::string_view("0\r\n\r\n"));
      }
    } else if (n > 0) {
      out[k++] = asio::buffer(chunk.data(), n);
    }
    if (k > 0) {
      watch.guard(to.stream.socket(), to.timeout);
      auto [wec, wn] =
          co_await asio::async_write(to.stream, std::span(out.data(), k), as_tuple(use_awaitable));
      if (wec) {
        result.failed = RelayResult::Side::write;
        result.error = watch.translate(wec);
        co_return result;
      }
      result.head_written = true;
      result.body_bytes += n;
    }
    if (done) co_return result;
  }
}

}  // namespace floodgate::http
