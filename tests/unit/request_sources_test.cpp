// A request's headers as the key builder reads them (http/request_sources.hpp): cookies from
// every Cookie field of an HTTP/1.1 request, as if joined with "; " like HTTP/2's crumbs
// (issue 34 item 6: a session cookie in a second header was "missing").
#include <gtest/gtest.h>

#include <optional>
#include <string_view>

#include "exchange/request_sources.hpp"

namespace {

using floodgate::http::FieldHeaders;
using floodgate::http::Fields;

TEST(FieldHeaders, CookiesAreReadFromEveryCookieFieldInOrder) {
  Fields f;
  f.add("Cookie", "theme=dark; lang=de");
  f.add("X-Other", "session=not-a-cookie");
  f.add("Cookie", "session=abc123; lang=fr");
  f.add("cookie", "session=later; extra=1");
  const FieldHeaders h(f);
  EXPECT_EQ(h.cookie("theme"), std::optional<std::string_view>("dark"));
  EXPECT_EQ(h.cookie("session"), std::optional<std::string_view>("abc123")) << "the second field";
  EXPECT_EQ(h.cookie("lang"), std::optional<std::string_view>("de")) << "the first of two";
  EXPECT_EQ(h.cookie("extra"), std::optional<std::string_view>("1"));
  EXPECT_EQ(h.cookie("absent"), std::nullopt);
  EXPECT_EQ(h.header("cookie"), std::optional<std::string_view>("theme=dark; lang=de"));
}

TEST(FieldHeaders, NoCookieFieldMeansNoCookie) {
  Fields f;
  f.add("X-Cookie", "session=abc");
  EXPECT_EQ(FieldHeaders(f).cookie("session"), std::nullopt);
}

}  // namespace
