// Key parts that outlast an address (issue 21 item 4), through the proxy with real clients:
// a cookie (curl over HTTP/1.1, nghttp over HTTP/2 with the cookie split into crumbs), a route's
// path template, and the TLS ClientHello's JA4/JA3, which stays one caller's across source
// addresses and changes with the client's TLS stack.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string limits_yaml(const std::string& limit) {
  return "    limits:\n      - " + limit + "\n";
}

int http_status(std::uint16_t port, const std::string& target, const std::string& headers = "") {
  auto r = get(port, target, headers);
  return r ? r->result_int() : -1;
}

TEST(KeyParts, ACookieKeysTheCallerOverHttp1AndHttp2) {
  Origin origin;
  Proxy proxy(ProxyYaml{
      .upstream_url = http_url(origin),
      .listen = "  listen: [{ address: \"127.0.0.1:0\", protocols: [http1, h2c] }]\n",
      .route_extra =
          limits_yaml("{ name: per-session, algorithm: fixed_window, limit: 2, window: 1h, "
                      "key: [\"cookie:session\"] }")}
                  .text());
  const auto port = std::to_string(proxy.port());
  // HTTP/1.1: the cookie among others, in one header.
  auto curl = [&](const std::string& cookie) {
    return command_output("curl -s -o /dev/null -w '%{http_code}' -H 'Cookie: " + cookie +
                              "' http://127.0.0.1:" + port + "/x",
                          10);
  };
  EXPECT_EQ(curl("theme=dark; session=abc123"), "200");
  EXPECT_EQ(curl("session=abc123; lang=de"), "200");
  EXPECT_EQ(curl("lang=fr;session=abc123"), "429");  // the third of one session
  EXPECT_EQ(curl("session=\"def456\""), "200");      // another session (quotes dropped)
  EXPECT_EQ(curl("session=def456"), "200");
  // HTTP/2: nghttp sends each cookie as its own field (crumbs, RFC 9113 8.2.3); floodgate
  // joins them before it looks.
  auto nghttp = [&](const std::string& a, const std::string& b) {
    auto out =
        command_output("nghttp -v -H 'cookie: " + a + "' -H 'cookie: " + b +
                           "' http://127.0.0.1:" + port + "/x 2>&1 | grep -o ':status: [0-9]*'",
                       10);
    return out.substr(out.find_last_of(' ') + 1);
  };
  EXPECT_EQ(nghttp("theme=dark", "session=h2-session"), "200");
  EXPECT_EQ(nghttp("session=h2-session", "lang=de"), "200");
  EXPECT_EQ(nghttp("lang=de", "session=h2-session"), "429");
  EXPECT_EQ(nghttp("session=def456", "x=1"), "429");  // the HTTP/1.1 caller's third
  // No cookie: the limit's on_missing_key (reject: 401).
  EXPECT_EQ(http_status(proxy.port(), "/x"), 401);
  EXPECT_EQ(origin.requests(), 6u);
}

// Issue 34 item 6, on the real binary: an HTTP/1.1 client that sends its cookies in two
// Cookie headers (both reach the origin) is keyed by the session cookie in the second, as if
// the headers were joined with "; " like HTTP/2 crumbs: limited, not refused for a missing
// cookie (401) nor let past a limit that skips callers without one.
TEST(KeyParts, TheRealBinaryReadsACookieFromAnyOfTheCookieHeaders) {
  Origin origin;
  const auto port = free_port();
  auto route = [](const std::string& name, const std::string& on_missing) {
    return "  - name: " + name + "\n    match: { path_prefix: /" + name +
           " }\n    upstream: origin\n    limits: [{ name: per-session, algorithm: fixed_window, "
           "limit: 2, window: 1h, key: [\"cookie:session\"], on_missing_key: " +
           on_missing + " }]\n";
  };
  const auto yaml =
      write_temp_file("cookie-headers.yaml",
                      "server: { listen: [127.0.0.1:" + std::to_string(port) +
                          "], threads: 1 }\nupstreams: { origin: { url: \"" + http_url(origin) +
                          "\" } }\nroutes:\n" + route("reject", "reject") + route("skip", "skip"));
  ChildProcess fg({FLOODGATE_BINARY, "--config", yaml});
  wait_serving(port);
  auto curl = [&](const std::string& path, const std::string& first, const std::string& second) {
    return command_output("curl -s -o /dev/null -w '%{http_code}' -H 'Cookie: " + first +
                              "' -H 'Cookie: " + second +
                              "' http://127.0.0.1:" + std::to_string(port) + path,
                          10);
  };
  for (const auto* path : {"/reject", "/skip"}) {
    EXPECT_EQ(curl(path, "theme=dark", "session=abc123"), "200") << path;
    EXPECT_EQ(curl(path, "lang=de; theme=dark", "x=1; session=abc123"), "200") << path;
    EXPECT_EQ(curl(path, "theme=dark", "session=abc123"), "429") << path << ": the third";
    EXPECT_EQ(curl(path, "theme=dark", "session=other"), "200") << path << ": another session";
    // The first of two with one name, across the headers as within one.
    EXPECT_EQ(curl(path, "session=abc123", "session=other"), "429") << path;
  }
  EXPECT_EQ(origin.requests(), 6u);
}

TEST(KeyParts, APathTemplateKeysEveryIdOfARouteAsOne) {
  Origin origin;
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin),
                        .route_extra = "    path_template: [\"/users/{id}/orders\", "
                                       "\"/users/{id}/orders/{order}\"]\n" +
                                       limits_yaml("{ name: per-endpoint, algorithm: fixed_window, "
                                                   "limit: 3, window: 1h, key: [path] }")}
                  .text());
  const auto port = proxy.port();
  EXPECT_EQ(http_status(port, "/users/1/orders"), 200);
  EXPECT_EQ(http_status(port, "/users/2/orders?page=2"), 200);
  EXPECT_EQ(http_status(port, "/users/3/orders"), 200);
  EXPECT_EQ(http_status(port, "/users/4/orders"), 429);  // one key for every id
  // Another template, and a path no template matches, are keys of their own.
  EXPECT_EQ(http_status(port, "/users/1/orders/77"), 200);
  EXPECT_EQ(http_status(port, "/users/1/profile"), 200);
  EXPECT_EQ(http_status(port, "/users/1/profile"), 200);
  EXPECT_EQ(http_status(port, "/users/1/profile"), 200);
  EXPECT_EQ(http_status(port, "/users/1/profile"), 429);
  EXPECT_EQ(http_status(port, "/users/2/profile"), 200);  // untemplated: the path itself
  // Matched after normalization, like routes.
  EXPECT_EQ(http_status(port, "/users/9//orders"), 429);
}

// Issue 34 item 5: once an endpoint's template is refused, no other spelling an origin would
// serve as that endpoint (trailing slash, ;parameters, an encoded separator, another case)
// gets a bucket of its own; a path of another shape still does.
TEST(KeyParts, NoSpellingOfATemplatedPathGetsABucketOfItsOwn) {
  Origin origin;
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin),
                        .route_extra = "    allow_encoded_slashes: true\n"
                                       "    path_template: \"/api/users/{id}/orders\"\n" +
                                       limits_yaml("{ name: per-endpoint, algorithm: fixed_window, "
                                                   "limit: 2, window: 1h, key: [path] }")}
                  .text());
  const auto port = proxy.port();
  EXPECT_EQ(http_status(port, "/api/users/1/orders"), 200);
  EXPECT_EQ(http_status(port, "/api/users/2/orders"), 200);
  EXPECT_EQ(http_status(port, "/api/users/4/orders"), 429);
  for (const auto* spelling :
       {"/api/users/5/orders/", "/api/users/5/orders%2F", "/api/users/5/orders%2f",
        "/api/users/5/orders%5C", "/api/users/5%2Forders", "/api/users/5/orders;x=1",
        "/api/users/5;v=2/orders", "/api/users/5/orders;x=1/", "/api/users/5/ORDERS",
        "/api/Users/5/Orders", "/api/users/5//orders/", "/api/users/5/orders/?page=2"})
    EXPECT_EQ(http_status(port, spelling), 429) << spelling;
  // Another shape is another endpoint, keyed as its path.
  EXPECT_EQ(http_status(port, "/api/users/5/orders/7"), 200);
  EXPECT_EQ(http_status(port, "/api/users/5/profile"), 200);
  EXPECT_EQ(origin.requests(), 4u);
}

struct TlsFingerprint : ::testing::Test {
  TestPki pki;
  TestPki::Files shop = pki.issue("shop.test", {"shop.test"});
  Origin origin;

  // curl from `source` (a loopback address) to the TLS listener, verified against the
  // test CA; `extra` changes what its ClientHello offers.
  std::string curl(std::uint16_t port, const std::string& source, const std::string& extra = "") {
    const auto p = std::to_string(port);
    return command_output("curl -s -o /dev/null -w '%{http_code}' --interface " + source +
                              " --cacert '" + pki.ca_file() + "' --resolve shop.test:" + p +
                              ":127.0.0.1 " + extra + " https://shop.test:" + p + "/x",
                          10);
  }
};

TEST_F(TlsFingerprint, AClientsJa4StaysTheSameAcrossSourceAddresses) {
  LogCapture access;
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin),
                        .listen = tls_listen({shop}),
                        .server_extra = "log: { access_log: true, replay_fields: [ip, \"tls:ja4\", "
                                        "\"tls:ja3\"] }\n",
                        .route_extra = limits_yaml(
                            "{ name: per-client-stack, algorithm: fixed_window, limit: 3, "
                            "window: 1h, key: [\"tls:ja4\"] }")}
                  .text(),
              nullptr, access.logger());
  const auto port = proxy.port();
  // Four addresses, one TLS stack: one caller.
  EXPECT_EQ(curl(port, "127.0.0.1"), "200");
  EXPECT_EQ(curl(port, "127.0.0.2"), "200");
  EXPECT_EQ(curl(port, "127.0.0.3"), "200");
  EXPECT_EQ(curl(port, "127.0.0.4"), "429");
  // The same curl offering only TLS 1.2, and no ALPN: another ClientHello, another caller.
  EXPECT_EQ(curl(port, "127.0.0.4", "--tls-max 1.2 --no-alpn"), "200");
  ASSERT_TRUE(access.wait_for(5, 5s));
  std::set<std::string> addresses, ja4s, ja3s;
  const std::regex field(R"re("ip":"([^"]+)","tls:ja4":"([^"]+)","tls:ja3":"([^"]+)")re");
  const auto lines = access.lines();
  for (std::size_t i = 0; i < 4; ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(lines[i], m, field)) << lines[i];
    addresses.insert(m[1]);
    ja4s.insert(m[2]);
    ja3s.insert(m[3]);
    EXPECT_TRUE(
        std::regex_match(std::string(m[2]), std::regex("t13d[0-9]{4}h2_[0-9a-f]{12}_[0-9a-f]{12}")))
        << m[2];
    EXPECT_TRUE(std::regex_match(std::string(m[3]), std::regex("[0-9a-f]{32}"))) << m[3];
  }
  EXPECT_EQ(addresses.size(), 4u);
  EXPECT_EQ(ja4s.size(), 1u) << *ja4s.begin();
  EXPECT_EQ(ja3s.size(), 1u);  // curl's extensions come in one order every time
  std::smatch m;
  ASSERT_TRUE(std::regex_search(lines[4], m, field)) << lines[4];
  EXPECT_TRUE(
      std::regex_match(std::string(m[2]), std::regex("t12d[0-9]{4}00_[0-9a-f]{12}_[0-9a-f]{12}")))
      << m[2];
}

// A plain-text listener has no ClientHello: the part is missing, and on_missing_key decides.
TEST_F(TlsFingerprint, IsMissingOnPlainConnections) {
  Proxy proxy(ProxyYaml{
      .upstream_url = http_url(origin),
      .route_extra = limits_yaml("{ name: per-client-stack, algorithm: fixed_window, limit: 3, "
                                 "window: 1h, key: [\"tls:ja4\"], on_missing_key: skip }")}
                  .text());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(http_status(proxy.port(), "/x"), 200);
}

}  // namespace
}  // namespace floodgate::testing
