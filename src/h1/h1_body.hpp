#pragma once
// An HTTP/1.x body's two halves, as the client side and the upstream side of an exchange both
// use them: reading a parser's body a piece at a time into one fixed buffer (so a 10 MiB
// body costs one buffer of memory), and writing pieces on, framed as told (passed through, or
// re-chunked), the message's serialized head leaving with the first piece (one write, one
// segment).

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "exchange/proxy.hpp"
#include "h1_parser.hpp"
#include "net/transport.hpp"
#include "net/watchdog.hpp"

namespace floodgate::http {

// A parse error in a body (bad chunk framing and the like), as opposed to the sender closing
// or stalling.
inline bool is_malformed_body(const boost::system::error_code& ec) {
  namespace bhttp = boost::beast::http;
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_chunk).category() &&
         ec != bhttp::error::partial_message && ec != bhttp::error::end_of_stream &&
         ec != bhttp::error::need_buffer;
}

// What a body's read failed with, as BodyRead says it.
inline BodyRead body_read_failed(const boost::system::error_code& ec) {
  namespace bhttp = boost::beast::http;
  BodyRead failed;
  failed.error = ec;
  if (ec == bhttp::error::body_limit)
    failed.failure = BodyRead::Failure::too_large;
  else if (is_malformed_body(ec))
    failed.failure = BodyRead::Failure::malformed;
  else if (ec == boost::beast::error::timeout)
    failed.failure = BodyRead::Failure::timeout;
  else
    failed.failure = BodyRead::Failure::gone;
  return failed;
}

// The next piece of `parser`'s body from what `buffer` holds already, into `into`: most small
// bodies arrive with their head, and parsing them here saves a read operation and a turn of
// the event loop. Nothing when the stream must be read for it.
template <bool isRequest>
std::optional<BodyRead> buffered_body_piece(boost::beast::flat_buffer& buffer,
                                            H1Parser<isRequest>& parser, std::span<char> into) {
  namespace bhttp = boost::beast::http;
  if (parser.is_done()) return BodyRead{0, true};
  if (buffer.size() == 0) return std::nullopt;
  parser.body_into(into);
  boost::system::error_code ec;
  buffer.consume(parser.put(buffer.data(), ec));
  if (ec == bhttp::error::need_buffer || ec == bhttp::error::need_more) ec = {};
  if (ec) return body_read_failed(ec);
  const std::size_t n = into.size() - parser.body_left();
  if (n == 0 && !parser.is_done()) return std::nullopt;
  return BodyRead{n, parser.is_done()};
}

// The next piece of `parser`'s body into `into`, read from `stream` within `timeout`.
template <bool isRequest>
boost::asio::awaitable<BodyRead> read_body_piece(Transport& stream,
                                                 boost::beast::flat_buffer& buffer,
                                                 H1Parser<isRequest>& parser, Watchdog& watch,
                                                 std::chrono::milliseconds timeout,
                                                 std::span<char> into) {
  namespace bhttp = boost::beast::http;
  if (auto here = buffered_body_piece(buffer, parser, into)) co_return *here;
  parser.body_into(into);
  watch.guard(stream.socket(), timeout);
  auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser,
                                            boost::asio::as_tuple(boost::asio::use_awaitable));
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) co_return body_read_failed(watch.translate(ec));
  co_return BodyRead{into.size() - parser.body_left(), parser.is_done()};
}

// Writes a message's pieces on to `stream`: its serialized head (`head`, kept until the first
// write) with the first, the body passed through or re-chunked.
class BodyWriter {
 public:
  // `counted`: where the body bytes written are added up (null: nowhere).
  BodyWriter(Transport& stream, Watchdog& watch, std::chrono::milliseconds timeout,
             std::uint64_t* counted = nullptr)
      : stream_(stream), watch_(watch), timeout_(timeout), counted_(counted) {}

  // `head` is written with the next piece; `chunked`: pieces are re-chunked.
  void start(std::string& head, bool chunked) {
    head_ = &head;
    chunked_ = chunked;
    written_ = false;
  }
  bool chunked() const { return chunked_; }
  bool written() const { return written_; }  // the head has left
  // Why the last write failed (translated: a timeout is beast's).
  const boost::system::error_code& error() const { return error_; }

  // `piece`, then (`last`, chunked) the last chunk and `trailer_fields` ("Name: value\r\n"...).
  // False when it could not be written (error() says why).
  boost::asio::awaitable<bool> write(std::span<const char> piece, bool last,
                                     std::string_view trailer_fields = {}) {
    namespace asio = boost::asio;
    std::array<asio::const_buffer, 7> out;
    std::size_t k = 0;
    if (!written_) out[k++] = asio::buffer(*head_);
    char size_line[20];
    if (chunked_) {
      if (!piece.empty()) {
        auto [end, ec] = std::to_chars(size_line, size_line + 16, piece.size(), 16);
        *end++ = '\r';
        *end++ = '\n';
        out[k++] = asio::buffer(size_line, static_cast<std::size_t>(end - size_line));
        out[k++] = asio::buffer(piece.data(), piece.size());
        out[k++] = asio::buffer(std::string_view("\r\n"));
      }
      if (last) {
        out[k++] = asio::buffer(std::string_view("0\r\n"));
        if (!trailer_fields.empty()) out[k++] = asio::buffer(trailer_fields);
        out[k++] = asio::buffer(std::string_view("\r\n"));
      }
    } else if (!piece.empty()) {
      out[k++] = asio::buffer(piece.data(), piece.size());
    }
    if (k == 0) co_return true;
    if (auto rest = stream_.write_now(std::span(out.data(), k)); !rest.empty()) {
      watch_.guard(stream_.socket(), timeout_);
      auto [ec, n] = co_await asio::async_write(stream_, rest, asio::as_tuple(asio::use_awaitable));
      if (ec) {
        error_ = watch_.translate(ec);
        co_return false;
      }
    }
    written_ = true;
    if (counted_) *counted_ += piece.size();
    co_return true;
  }

 private:
  Transport& stream_;
  Watchdog& watch_;
  std::chrono::milliseconds timeout_;
  std::uint64_t* counted_;
  std::string* head_ = nullptr;
  bool chunked_ = false;
  bool written_ = false;
  boost::system::error_code error_;
};

}  // namespace floodgate::http
