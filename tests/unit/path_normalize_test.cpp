// The one spelling of a path and a host: every variant of a limited path must come out as
// that path, and what cannot be made safe is refused.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/uri/host.hpp"
#include "floodgate/uri/path_normalize.hpp"

using floodgate::uri::host_name;
using floodgate::uri::normalize_host;
using floodgate::uri::normalize_path;
using floodgate::uri::PathError;

namespace {

struct Case {
  const char* raw;
  const char* normal;
};

TEST(NormalizePath, VariantsOfOnePathAreThatPath) {
  const std::vector<Case> cases = {
      {"/api/checkout", "/api/checkout"},
      {"//api/checkout", "/api/checkout"},
      {"/api//checkout", "/api/checkout"},
      {"///api///checkout", "/api/checkout"},
      {"/api/./checkout", "/api/checkout"},
      {"/./api/checkout", "/api/checkout"},
      {"/x/../api/checkout", "/api/checkout"},
      {"/api/x/y/../../checkout", "/api/checkout"},
      {"/api/%63heckout", "/api/checkout"},
      {"/%61%70%69/%63%68%65%63%6b%6F%75%74", "/api/checkout"},
      {"/api/%2E/checkout", "/api/checkout"},  // an encoded dot segment is a dot segment
      {"/api/%2e%2E/api/checkout", "/api/checkout"},
      {"/api/x/%2e%2e/checkout", "/api/checkout"},
      {"/x//..//api/checkout", "/api/checkout"},  // slashes merge before ".." counts
      {"/../api/checkout", "/api/checkout"},      // clamped at the root (RFC 3986 5.2.4)
      {"/../../../api/checkout", "/api/checkout"},
  };
  for (const auto& c : cases) {
    auto n = normalize_path(c.raw);
    ASSERT_TRUE(n) << c.raw;
    EXPECT_EQ(n.path, c.normal) << c.raw;
    EXPECT_FALSE(n.encoded_separator) << c.raw;
    // A forwarded request is logged from its rewritten target: normalizing again changes
    // nothing.
    EXPECT_EQ(normalize_path(n.path).path, n.path) << c.raw;
  }
}

TEST(NormalizePath, EdgesOfTheTree) {
  const std::vector<Case> cases = {
      {"", "/"},
      {"/", "/"},
      {"//", "/"},
      {"/..", "/"},
      {"/.", "/"},
      {"/%2e%2e", "/"},
      {"/api/x/..", "/api/"},  // RFC 3986 5.2.4: what ".." leaves is a directory
      {"/api/.", "/api/"},
      {"/api/", "/api/"},  // a trailing slash is kept
      {"/api//", "/api/"},
      {"/api", "/api"},
      {"/a/b/../", "/a/"},
      {"/a/...", "/a/..."},  // not a dot segment
      {"/a/..b/.c", "/a/..b/.c"},
      {"/a/%2e%2e%2e", "/a/..."},
  };
  for (const auto& c : cases) {
    auto n = normalize_path(c.raw);
    ASSERT_TRUE(n) << c.raw;
    EXPECT_EQ(n.path, c.normal) << c.raw;
    EXPECT_EQ(normalize_path(n.path).path, n.path) << c.raw;
  }
}

TEST(NormalizePath, UnreservedAreDecodedOthersKeptWithUpperCaseHex) {
  // clang-format off
  const std::vector<Case> cases = {
      {"/%7euser", "/~user"},
      {"/a%2Db%5fc%2e", "/a-b_c."},
      {"/%41%5A%30%39", "/AZ09"},
      {"/a%20b", "/a%20b"},  // space is not unreserved: stays encoded
      {"/a%3fb", "/a%3Fb"},  // an encoded '?' must not become the query
      {"/a%3Bb", "/a%3Bb"},
      {"/caf%c3%a9", "/caf%C3%A9"},
      {"/%25", "/%25"},      // an encoded '%' stays one: decoding twice would be a new path
      {"/%252F", "/%252F"},  // ... and so is not an encoded slash
  };
  // clang-format on
  for (const auto& c : cases) {
    auto n = normalize_path(c.raw);
    ASSERT_TRUE(n) << c.raw;
    EXPECT_EQ(n.path, c.normal) << c.raw;
    EXPECT_FALSE(n.encoded_separator) << c.raw;
    EXPECT_EQ(normalize_path(n.path).path, n.path) << c.raw;  // "%25" is not decoded twice
  }
}

TEST(NormalizePath, EncodedSeparatorsAreRefusedUnlessAllowed) {
  const std::vector<Case> cases = {
      {"/api%2Fcheckout", "/api%2Fcheckout"},
      {"/api%2fcheckout", "/api%2Fcheckout"},
      {"/a/%2e%2e%2fb", "/a/..%2Fb"},  // not a dot segment: the %2F is no separator
      {"/a%5Cb", "/a%5Cb"},
      {"/a%5cb", "/a%5Cb"},
      {"/a%00b", "/a%00b"},
      {"/x/../a%2F", "/a%2F"},
  };
  for (const auto& c : cases) {
    auto refused = normalize_path(c.raw);
    EXPECT_FALSE(refused) << c.raw;
    EXPECT_EQ(refused.error, PathError::encoded_separator) << c.raw;
    EXPECT_TRUE(refused.path.empty()) << c.raw;

    auto allowed = normalize_path(c.raw, {.allow_encoded_separators = true});
    ASSERT_TRUE(allowed) << c.raw;
    EXPECT_EQ(allowed.path, c.normal) << c.raw;  // kept encoded, never decoded
    EXPECT_TRUE(allowed.encoded_separator) << c.raw;
  }
}

TEST(NormalizePath, BrokenEscapesAreRefused) {
  for (const char* raw : {"/a%", "/a%4", "/a%zz", "/a%4g", "/%%41", "/a%2"}) {
    auto n = normalize_path(raw, {.allow_encoded_separators = true});
    EXPECT_FALSE(n) << raw;
    EXPECT_EQ(n.error, PathError::bad_escape) << raw;
  }
}

// A servlet container drops ";..." from a segment before it resolves dot segments, so
// "/public/..;/api/checkout" is "/api/checkout" to a Java origin but "/public/..;/api/checkout"
// to the router: refused rather than limited as one path and served as another.
TEST(NormalizePath, DotSegmentsWithPathParametersAreRefused) {
  for (const char* raw : {"/public/..;/api/checkout", "/public/..;x=1/api", "/.;/api", "/a/.;b",
                          "/public/%2e%2e;/api", "/public/.%2E;/api"}) {
    auto n = normalize_path(raw, {.allow_encoded_separators = true});
    EXPECT_FALSE(n) << raw;
    EXPECT_EQ(n.error, PathError::dot_segment_parameter) << raw;
  }
  for (const char* raw : {"/api/checkout;jsessionid=1", "/a/...;b", "/a/x..;b", "/a;b/.."})
    EXPECT_TRUE(normalize_path(raw)) << raw;
}

TEST(NormalizeHost, LowerCaseWithoutPortOrTrailingDot) {
  const std::vector<Case> cases = {
      {"shop.example", "shop.example"},
      {"Shop.Example", "shop.example"},
      {"shop.example.", "shop.example"},
      {"shop.example..", "shop.example"},
      {"Shop.Example.:8080", "shop.example"},
      {"shop.example:443", "shop.example"},
      {"[::1]:80", "[::1]"},
      {"[::1]", "[::1]"},
      {"[2001:DB8::1]:8443", "[2001:db8::1]"},
      {"127.0.0.1:9000", "127.0.0.1"},
      {"", ""},
      {".", "."},
  };
  for (const auto& c : cases) EXPECT_EQ(normalize_host(c.raw), c.normal) << c.raw;
  EXPECT_EQ(host_name("Shop.Example.:8080"), "Shop.Example");  // case left to the caller
}

}  // namespace
