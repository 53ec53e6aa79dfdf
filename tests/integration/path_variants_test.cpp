// No spelling of a path or host walks around a limit: requests are routed, keyed and forwarded
// by their normalized path and host, and paths an origin could read as another path (%2F,
// %5C, %00) are refused unless their route allows them.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace floodgate::testing {
namespace {

std::string config_for(const Origin& origin) {
  return substitute(R"(
server:
  listen: [127.0.0.1:0]
  threads: 1
upstreams:
  origin: { url: "http://{ORIGIN}" }
store: { key_secret: integration-test-secret-0123456789 }
routes:
  - name: checkout
    match: { path: /api/checkout }
    upstream: origin
    limits:
      - { name: checkout, algorithm: fixed_window, limit: 1, window: 1h, key: [route, path] }
  - name: shop
    match: { host: shop.example, path: /cart }
    upstream: origin
    limits:
      - { name: cart, algorithm: fixed_window, limit: 1, window: 1h, key: [host] }
  - name: objects
    match: { path_prefix: /objects/ }
    allow_encoded_slashes: true
    upstream: origin
  - name: rest
    match: { path_prefix: / }
    upstream: origin
)",
                    "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port()));
}

std::optional<Response> get_with_host(std::uint16_t port, const std::string& target,
                                      const std::string& host) {
  Client c(port);
  return c.request("GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
}

// The last targets the origin saw, as "METHOD target" in its /__stats JSON.
bool origin_saw(Origin& origin, const std::string& method_and_target) {
  return origin.stats().find('"' + method_and_target + '"') != std::string::npos;
}

TEST(PathVariants, EveryVariantOfARefusedPathIsRefusedToo) {
  Origin origin;
  Proxy proxy(config_for(origin));
  // Admitted: a variant, forwarded as the path it was limited as, query untouched.
  auto first = get(proxy.port(), "//api/./x/../%63heckout?q=%2F..//&b=%7e");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->result_int(), 200);
  EXPECT_TRUE(origin_saw(origin, "GET /api/checkout?q=%2F..//&b=%7e")) << origin.stats();
  ASSERT_EQ(origin.requests(), 1u);

  for (const char* variant :
       {"/api/checkout", "//api/checkout", "/api/./checkout", "/x/../api/checkout",
        "/api//checkout", "/api/%63heckout", "/api/%2e/checkout", "/api/x/%2E%2e/checkout",
        "/../api/checkout", "/API/../api/checkout?x=1"}) {
    auto r = get(proxy.port(), variant);
    ASSERT_TRUE(r) << variant;
    EXPECT_EQ(r->result_int(), 429) << variant;
  }
  EXPECT_EQ(origin.requests(), 1u);

  // "/api/checkout/." is the directory "/api/checkout/": another path, not this route, and
  // the origin is asked for exactly that.
  auto other = get(proxy.port(), "/api/checkout/.");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->result_int(), 200);
  EXPECT_TRUE(origin_saw(origin, "GET /api/checkout/")) << origin.stats();
}

TEST(PathVariants, HostWithTrailingDotOrCaseOrPortSharesTheHostRoutesLimit) {
  Origin origin;
  Proxy proxy(config_for(origin));
  auto first = get_with_host(proxy.port(), "/cart", "shop.example");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->result_int(), 200);
  for (const char* host : {"shop.example", "shop.example.", "Shop.Example.:8080", "SHOP.EXAMPLE"}) {
    auto r = get_with_host(proxy.port(), "//cart", host);
    ASSERT_TRUE(r) << host;
    EXPECT_EQ(r->result_int(), 429) << host;
  }
  EXPECT_EQ(origin.requests(), 1u);
}

TEST(PathVariants, OriginServesTheNormalizedPath) {
  Origin origin;
  Proxy proxy(config_for(origin));
  auto r = get(proxy.port(), "/echo//%7euser/./a/../b%2c?x=%2e%2E/..");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->result_int(), 200);
  EXPECT_NE(r->body().find(R"("target":"/echo/~user/b%2C?x=%2e%2E/..")"), std::string::npos)
      << r->body();
}

TEST(PathVariants, EncodedSeparatorsAre400UnlessTheRouteAllowsThem) {
  Origin origin;
  Proxy proxy(config_for(origin));
  for (const char* target : {"/api%2Fcheckout", "/api/%2e%2e%2fcheckout", "/a%5Cb", "/a%5cb",
                             "/a%00b", "/api/checkout%2F", "/bad%zz", "/bad%4",
                             "/public/..;/api/checkout", "/x/.;/api/checkout"}) {
    Client c(proxy.port());
    auto r = c.request(std::string("GET ") + target + " HTTP/1.1\r\nHost: test\r\n\r\n");
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->result_int(), 400) << target;
    EXPECT_EQ(without_request_id(r->body()), "bad request\n") << target;
    // The request was well framed: the connection carries the next one.
    auto next = c.request("GET /fine HTTP/1.1\r\nHost: test\r\n\r\n");
    ASSERT_TRUE(next) << target;
    EXPECT_EQ(next->result_int(), 200) << target;
  }
  EXPECT_EQ(origin.requests(), 10u);  // only the /fine ones

  // A route that opts in gets them as they came, encoded (hex upper-cased), never decoded.
  auto r = get(proxy.port(), "/objects/a%2fb/./c%5C%00?k=%2F");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_TRUE(origin_saw(origin, "GET /objects/a%2Fb/c%5C%00?k=%2F")) << origin.stats();
}

}  // namespace
}  // namespace floodgate::testing
