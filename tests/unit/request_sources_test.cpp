// A request's headers as the key builder reads them (http/request_sources.hpp): cookies from
// every Cookie field of an HTTP/1.1 request, as if joined with "; " like HTTP/2's crumbs
// (issue 34 item 6: a session cookie in a second header was "missing").
#include <gtest/gtest.h>

#include <boost/beast/http.hpp>

#include <optional>
#include <string_view>

#include "exchange/request_sources.hpp"

namespace {

namespace bhttp = boost::beast::http;
using floodgate::http::FieldHeaders;

TEST(FieldHeaders, CookiesAreReadFromEveryCookieFieldInOrder) {
  bhttp::fields f;
  f.insert(bhttp::field::cookie, "theme=dark; lang=de");
  f.insert("X-Other", "session=not-a-cookie");
  f.insert(bhttp::field::cookie, "session=abc123; lang=fr");
  f.insert("cookie", "session=later; extra=1");
  const FieldHeaders h(f);
  EXPECT_EQ(h.cookie("theme"), std::optional<std::string_view>("dark"));
  EXPECT_EQ(h.cookie("session"), std::optional<std::string_view>("abc123")) << "the second field";
  EXPECT_EQ(h.cookie("lang"), std::optional<std::string_view>("de")) << "the first of two";
  EXPECT_EQ(h.cookie("extra"), std::optional<std::string_view>("1"));
  EXPECT_EQ(h.cookie("absent"), std::nullopt);
  EXPECT_EQ(h.header("cookie"), std::optional<std::string_view>("theme=dark; lang=de"));
}

TEST(FieldHeaders, NoCookieFieldMeansNoCookie) {
  bhttp::fields f;
  f.insert("X-Cookie", "session=abc");
  EXPECT_EQ(FieldHeaders(f).cookie("session"), std::nullopt);
}

}  // namespace
