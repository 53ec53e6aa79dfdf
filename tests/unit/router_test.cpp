// Route selection: first match wins over host (port and case ignored), method and path.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "floodgate/decide/router.hpp"
#include "floodgate/uri/host.hpp"

using floodgate::config::Config;
using floodgate::config::Route;
using floodgate::config::RouteMatch;
using floodgate::decide::match_route;
using floodgate::uri::host_name;

namespace {

Route make_route(std::string name, RouteMatch m) {
  Route r;
  r.name = std::move(name);
  r.match = std::move(m);
  return r;
}

RouteMatch prefix(std::string p) {
  RouteMatch m;
  m.path_prefix = std::move(p);
  return m;
}

RouteMatch exact(std::string p) {
  RouteMatch m;
  m.path = std::move(p);
  return m;
}

// The name of the route chosen, or "" when none.
std::string chosen(const Config& c, std::string_view method, std::string_view host,
                   std::string_view path) {
  const Route* r = match_route(c, method, host, path);
  return r ? r->name : std::string();
}

TEST(MatchRoute, FirstMatchWins) {
  Config c;
  c.routes.push_back(make_route("api", prefix("/api/")));
  c.routes.push_back(make_route("default", prefix("/")));
  EXPECT_EQ(chosen(c, "GET", "h", "/api/users"), "api");
  EXPECT_EQ(chosen(c, "GET", "h", "/other"), "default");
  EXPECT_EQ(chosen(c, "GET", "h", "/"), "default");

  // The same routes in the other order: the catch-all shadows everything after it.
  Config reversed;
  reversed.routes.push_back(make_route("default", prefix("/")));
  reversed.routes.push_back(make_route("api", prefix("/api/")));
  EXPECT_EQ(chosen(reversed, "GET", "h", "/api/users"), "default");
}

TEST(MatchRoute, ReturnsAPointerIntoTheConfig) {
  Config c;
  c.routes.push_back(make_route("a", prefix("/a")));
  c.routes.push_back(make_route("b", prefix("/b")));
  EXPECT_EQ(match_route(c, "GET", "h", "/b"), &c.routes[1]);
  EXPECT_EQ(match_route(c, "GET", "h", "/a"), &c.routes[0]);
}

TEST(MatchRoute, NoMatchIsNull) {
  Config empty;
  EXPECT_EQ(match_route(empty, "GET", "h", "/"), nullptr);

  Config c;
  c.routes.push_back(make_route("api", prefix("/api/")));
  c.routes.push_back(make_route("health", exact("/healthz")));
  EXPECT_EQ(match_route(c, "GET", "h", "/"), nullptr);
  EXPECT_EQ(match_route(c, "GET", "h", "/ap"), nullptr);
  EXPECT_EQ(match_route(c, "GET", "h", "/healthz/x"), nullptr);
}

TEST(MatchRoute, EmptyMatchMatchesEverything) {
  Config c;
  c.routes.push_back(make_route("all", RouteMatch{}));
  EXPECT_EQ(chosen(c, "DELETE", "any.example:1", "/x/y"), "all");
  EXPECT_EQ(chosen(c, "GET", "", "/"), "all");
}

TEST(MatchRoute, ExactPathVersusPrefix) {
  Config c;
  c.routes.push_back(make_route("health", exact("/healthz")));
  c.routes.push_back(make_route("api", prefix("/api/")));
  EXPECT_EQ(chosen(c, "GET", "h", "/healthz"), "health");
  EXPECT_EQ(chosen(c, "GET", "h", "/healthz/"), "");
  EXPECT_EQ(chosen(c, "GET", "h", "/healthz2"), "");
  EXPECT_EQ(chosen(c, "GET", "h", "/Healthz"), "");  // paths are case-sensitive
  EXPECT_EQ(chosen(c, "GET", "h", "/api/"), "api");
  EXPECT_EQ(chosen(c, "GET", "h", "/api/v1/x"), "api");
  EXPECT_EQ(chosen(c, "GET", "h", "/api"), "");  // shorter than the prefix
  EXPECT_EQ(chosen(c, "GET", "h", "/API/x"), "");
}

TEST(MatchRoute, PrefixIsAPlainStringPrefix) {
  // Like nginx's "location /api": a prefix without a trailing slash also covers "/apix".
  Config c;
  c.routes.push_back(make_route("api", prefix("/api")));
  EXPECT_EQ(chosen(c, "GET", "h", "/api"), "api");
  EXPECT_EQ(chosen(c, "GET", "h", "/apix"), "api");
  EXPECT_EQ(chosen(c, "GET", "h", "/ap"), "");
}

TEST(MatchRoute, HostIgnoresPortAndCase) {
  Config c;
  RouteMatch m = prefix("/");
  m.host = "shop.example";  // the loader lower-cases it
  c.routes.push_back(make_route("shop", m));
  EXPECT_EQ(chosen(c, "GET", "shop.example", "/"), "shop");
  EXPECT_EQ(chosen(c, "GET", "shop.example:8080", "/"), "shop");
  EXPECT_EQ(chosen(c, "GET", "SHOP.Example", "/"), "shop");
  EXPECT_EQ(chosen(c, "GET", "Shop.EXAMPLE:443", "/"), "shop");
  EXPECT_EQ(chosen(c, "GET", "api.example", "/"), "");
  EXPECT_EQ(chosen(c, "GET", "shop.example.evil", "/"), "");
  EXPECT_EQ(chosen(c, "GET", "evil-shop.example", "/"), "");
  EXPECT_EQ(chosen(c, "GET", "", "/"), "");  // no Host at all
}

// "shop.example." is the same name, fully qualified (RFC 1034 section 3.1): missing the host
// route with it would walk around the route's limits.
TEST(MatchRoute, HostWithTrailingDotMatchesTheHostRoute) {
  Config c;
  RouteMatch m = exact("/api/checkout");
  m.host = "shop.example";
  c.routes.push_back(make_route("shop", m));
  c.routes.push_back(make_route("default", prefix("/")));
  EXPECT_EQ(chosen(c, "POST", "shop.example.", "/api/checkout"), "shop");
  EXPECT_EQ(chosen(c, "POST", "Shop.Example.:8080", "/api/checkout"), "shop");
  EXPECT_EQ(chosen(c, "POST", "shop.example", "/api/checkout"), "shop");
  // Not a valid name, but an origin that forgives it would serve the shop: limited as one.
  EXPECT_EQ(chosen(c, "POST", "shop.example..", "/api/checkout"), "shop");
  EXPECT_EQ(chosen(c, "POST", "shop.example.evil.", "/api/checkout"), "default");
}

TEST(MatchRoute, Ipv6HostLiteral) {
  Config c;
  RouteMatch m = prefix("/");
  m.host = "[::1]";
  c.routes.push_back(make_route("v6", m));
  EXPECT_EQ(chosen(c, "GET", "[::1]:8080", "/"), "v6");
  EXPECT_EQ(chosen(c, "GET", "[::1]", "/"), "v6");
  EXPECT_EQ(chosen(c, "GET", "[::2]:8080", "/"), "");
}

TEST(MatchRoute, Methods) {
  Config c;
  RouteMatch m = prefix("/");
  m.methods = {"GET", "POST"};
  c.routes.push_back(make_route("rw", m));
  c.routes.push_back(make_route("rest", prefix("/")));
  EXPECT_EQ(chosen(c, "GET", "h", "/"), "rw");
  EXPECT_EQ(chosen(c, "POST", "h", "/"), "rw");
  EXPECT_EQ(chosen(c, "PUT", "h", "/"), "rest");
  EXPECT_EQ(chosen(c, "HEAD", "h", "/"), "rest");
  // Methods are case-sensitive on the wire (RFC 9110 section 9.1): "get" is another method.
  EXPECT_EQ(chosen(c, "get", "h", "/"), "rest");
}

TEST(MatchRoute, AllConditionsMustHold) {
  Config c;
  RouteMatch m = prefix("/api/checkout");
  m.methods = {"POST"};
  m.host = "shop.example";
  c.routes.push_back(make_route("checkout", m));
  EXPECT_EQ(chosen(c, "POST", "shop.example", "/api/checkout/pay"), "checkout");
  EXPECT_EQ(chosen(c, "GET", "shop.example", "/api/checkout/pay"), "");
  EXPECT_EQ(chosen(c, "POST", "other.example", "/api/checkout/pay"), "");
  EXPECT_EQ(chosen(c, "POST", "shop.example", "/api/cart"), "");
}

TEST(MatchRoute, WithRoutesFromTheLoader) {
  // The loader upper-cases methods and lower-cases the host, so a config written in any case
  // routes requests in any case.
  auto r = floodgate::config::load_config_text(R"yaml(
server:
  listen: 0.0.0.0:8080
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - name: checkout
    match: { path_prefix: /api/checkout, methods: [post], host: Shop.Example }
    upstream: origin
  - name: default
    match: { path_prefix: / }
    upstream: origin
)yaml",
                                               "router.yaml",
                                               [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(r.errors.empty()) << r.errors.front().to_string();
  ASSERT_NE(r.config, nullptr);
  EXPECT_EQ(chosen(*r.config, "POST", "SHOP.example:8443", "/api/checkout"), "checkout");
  EXPECT_EQ(chosen(*r.config, "GET", "shop.example", "/api/checkout"), "default");
}

// The one spelling the proxy's keys and the replay share (the replay once kept a trailing dot
// the proxy dropped, so the two could key one caller differently).
TEST(HostName, StripsThePortAndATrailingDotAndKeepsTheCase) {
  EXPECT_EQ(host_name("shop.example.:8080"), "shop.example");
  EXPECT_EQ(host_name("shop.example."), "shop.example");
  EXPECT_EQ(host_name("shop.example:8080"), "shop.example");
  EXPECT_EQ(host_name("shop.example"), "shop.example");
  EXPECT_EQ(host_name("Shop.Example:1"), "Shop.Example");  // case is left alone
  EXPECT_EQ(host_name("10.0.0.1:80"), "10.0.0.1");
  EXPECT_EQ(host_name("[::1]:80"), "[::1]");
  EXPECT_EQ(host_name("[2001:db8::1]"), "[2001:db8::1]");
  EXPECT_EQ(host_name("[::1"), "[::1");  // malformed: unchanged
  EXPECT_EQ(host_name("host:"), "host");
  EXPECT_EQ(host_name(""), "");
}

// An RLS domain is a route of the snapshot (its limits, metrics, keys), never an HTTP
// request's: a request no route matches is still a 404 when the config has domains.
TEST(MatchRoute, AnRlsDomainsRouteNeverMatchesARequest) {
  auto r = floodgate::config::load_config_text(
      "server: { listen: [\"127.0.0.1:0\"] }\nupstreams: { o: { url: \"http://127.0.0.1:9\" } "
      "}\nroutes:\n  - { name: api, match: { path_prefix: /api/ }, upstream: o }\nrls:\n  "
      "listen: [\"127.0.0.1:0\"]\n  domains:\n    - domain: edge\n      descriptors:\n        - "
      "match: [ { key: k } ]\n          limits: [ { name: l, algorithm: fixed_window, limit: 1, "
      "window: 1s } ]\n",
      "both.yaml", floodgate::config::process_env());
  ASSERT_TRUE(r.config);
  ASSERT_EQ(r.config->routes.size(), 2u);  // api, rls:edge
  EXPECT_EQ(chosen(*r.config, "GET", "h", "/api/x"), "api");
  EXPECT_EQ(chosen(*r.config, "GET", "h", "/other"), "");
  EXPECT_EQ(chosen(*r.config, "POST", "h",
                   "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"),
            "");
}

}  // namespace
