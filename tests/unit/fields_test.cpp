// The exchange's protocol-neutral header fields (exchange/fields.hpp) and the HTTP/1.1 parser
// that fills them (h1/h1_parser.hpp): order and case kept, lookup in any case, and views that
// stay valid through the rewrite of a head for the upstream.

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "exchange/fields.hpp"
#include "h1/h1_parser.hpp"

namespace {

using floodgate::http::Fields;
using floodgate::http::H1Parser;

std::vector<std::string> field_names(const Fields& f) {
  std::vector<std::string> out;
  for (const auto& field : f) out.emplace_back(field.name);
  return out;
}

TEST(Fields, KeepOrderAndCaseAndFindInAnyCase) {
  Fields f;
  f.add("Host", "shop.example");
  f.add("X-Api-Key", "k1");
  f.add("cookie", "a=1");
  f.add("Cookie", "b=2");
  EXPECT_EQ(field_names(f), (std::vector<std::string>{"Host", "X-Api-Key", "cookie", "Cookie"}));
  EXPECT_EQ(f.get("HOST"), "shop.example");
  EXPECT_EQ(f.find("x-api-key"), std::optional<std::string_view>("k1"));
  EXPECT_EQ(f.find("X-Absent"), std::nullopt);
  EXPECT_EQ(f.get("X-Absent"), "");
  EXPECT_EQ(f.count("COOKIE"), 2u);
  std::vector<std::string> cookies;
  f.each("cookie", [&](std::string_view v) { cookies.emplace_back(v); });
  EXPECT_EQ(cookies, (std::vector<std::string>{"a=1", "b=2"}));
}

TEST(Fields, SetReplacesEveryFieldOfTheNameWithOneAtTheEnd) {
  Fields f;
  f.add("Via", "1.1 a");
  f.add("Accept", "*/*");
  f.add("via", "1.1 b");
  f.set("Via", "1.1 a, 1.1 b, 1.1 edge");
  EXPECT_EQ(field_names(f), (std::vector<std::string>{"Accept", "Via"}));
  EXPECT_EQ(f.get("via"), "1.1 a, 1.1 b, 1.1 edge");
  EXPECT_EQ(f.erase("VIA"), 1u);
  EXPECT_EQ(f.erase("Via"), 0u);
  EXPECT_EQ(f.size(), 1u);
}

// The exchange's facts are views into its request's fields: they must survive every later
// change of the head (fields set and erased, the text growing past its first block) and a
// move of the Fields itself.
TEST(Fields, ViewsStayValidThroughChangesGrowthAndMoves) {
  Fields f;
  f.add("Host", "shop.example:8443");
  const std::string_view host = f.get("host");
  const std::string_view target = f.keep("/cart/./a/../b?q=1");
  f.set("Host", "other.example");
  f.erase("host");
  const std::string big(5000, 'x');  // past the first block
  for (int i = 0; i < 8; ++i) f.add("X-Big-" + std::to_string(i), big);
  Fields moved = std::move(f);
  moved.add("X-After", "move");
  EXPECT_EQ(host, "shop.example:8443");
  EXPECT_EQ(target, "/cart/./a/../b?q=1");
  EXPECT_EQ(moved.get("x-big-7"), big);
  EXPECT_EQ(moved.size(), 9u);
  moved.clear();
  EXPECT_TRUE(moved.empty());
  moved.add("Reused", "yes");
  EXPECT_EQ(moved.get("reused"), "yes");
}

// A connection keeps one head between messages: after a message of thousands of fields, what
// it keeps is a usual head's memory, not that message's.
TEST(Fields, ClearingAfterAHugeHeadKeepsLittle) {
  Fields f;
  for (int i = 0; i < 4000; ++i) f.add("a", "");
  f.add("X-Big", std::string(20000, 'v'));
  EXPECT_GT(f.held(), 100'000u);
  f.clear();
  EXPECT_TRUE(f.empty());
  EXPECT_LE(f.held(), 4096u + 64 * sizeof(floodgate::http::Field));
  EXPECT_EQ(f.begin(), f.end());
  f.add("Host", "shop.example");  // usable again
  EXPECT_EQ(f.get("host"), "shop.example");
}

// Parses `bytes` in one go into a parser whose body goes through a buffer of `piece` bytes;
// returns the body read.
template <bool isRequest>
std::string parse_all(H1Parser<isRequest>& p, std::string_view bytes, std::size_t piece) {
  std::string body;
  std::vector<char> buffer(piece);
  p.eager(true);
  while (!p.is_done()) {
    p.body_into(buffer);
    boost::beast::error_code ec;
    const auto used = p.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    body.append(buffer.data(), piece - p.body_left());
    if (ec == boost::beast::http::error::need_buffer) continue;
    if (ec || (used == 0 && !p.is_done())) {
      ADD_FAILURE() << ec.message();
      break;
    }
  }
  return body;
}

TEST(H1Parser, ARequestHeadGoesIntoFieldsAndItsChunkedBodyIntoSmallPieces) {
  floodgate::http::RequestHead head;
  H1Parser<true> p(head);
  const auto body = parse_all(p,
                              "POST /upload?x=1 HTTP/1.1\r\n"
                              "Host: shop.example\r\n"
                              "X-Api-Key: k1\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "\r\n"
                              "a\r\n0123456789\r\n"
                              "6\r\nabcdef\r\n"
                              "0\r\nX-Checksum: 42\r\n\r\n",
                              4);
  EXPECT_EQ(&head, &p.get());
  EXPECT_EQ(head.method, "POST");
  EXPECT_EQ(head.target, "/upload?x=1");
  EXPECT_EQ(head.version, 11u);
  EXPECT_TRUE(p.chunked());
  EXPECT_EQ(body, "0123456789abcdef");
  // A trailer is not a field of the head that already went on.
  EXPECT_EQ(field_names(head.fields),
            (std::vector<std::string>{"Host", "X-Api-Key", "Transfer-Encoding"}));
}

// A keep-alive connection reads every request into one head: a request refused before its
// request line was read must not show the one before it (whose text is given back).
TEST(H1Parser, ANewMessageStartsFromAnEmptyHead) {
  floodgate::http::RequestHead head;
  {
    H1Parser<true> first(head);
    parse_all(first,
              "GET /first HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(3000, 'x') + "\r\n\r\n",
              16);
    EXPECT_EQ(head.target, "/first");
  }
  H1Parser<true> second(head);
  boost::beast::error_code ec;
  const std::string_view bad = "\x01\x02 garbage\r\n\r\n";
  second.put(boost::asio::buffer(bad.data(), bad.size()), ec);
  EXPECT_TRUE(ec);
  EXPECT_EQ(head.method, "");
  EXPECT_EQ(head.target, "");
  EXPECT_TRUE(head.fields.empty());
}

TEST(H1Parser, AResponseHeadKeepsStatusReasonAndFields) {
  floodgate::http::ResponseHead head;
  H1Parser<false> p(head);
  const auto body = parse_all(p,
                              "HTTP/1.1 404 Not Here\r\n"
                              "Content-Length: 5\r\n"
                              "X-Used: 3\r\n"
                              "\r\n"
                              "gone.",
                              64);
  EXPECT_EQ(head.status, 404);
  EXPECT_EQ(head.reason, "Not Here");
  EXPECT_EQ(head.fields.get("x-used"), "3");
  EXPECT_EQ(body, "gone.");
  EXPECT_TRUE(p.keep_alive());
}

}  // namespace
