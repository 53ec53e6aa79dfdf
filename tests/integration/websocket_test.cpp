// WebSocket tunnelling: an upgrade request is routed and limited like any request, and once
// the origin answers 101 the proxy relays bytes both ways until either side ends, or until
// the tunnel has been idle for server.timeouts.idle. A concurrency lease lasts as long as the
// tunnel.
#include <gtest/gtest.h>

#include <boost/beast/websocket/error.hpp>

#include <random>
#include <thread>

#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"
#include "ws_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
namespace websocket = boost::beast::websocket;

std::string ws_random_bytes(std::size_t n) {
  std::mt19937_64 rng(11);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Three text messages and a 64 KiB binary one come back intact; then the origin closes the
// WebSocket on request and its close frame reaches the client through the tunnel.
void expect_echo_session(WsClient& ws) {
  ASSERT_TRUE(ws.open()) << ws.error() << " (status " << ws.status() << ")";
  EXPECT_EQ(ws.status(), 101);
  for (std::string m : {"first", "second", "third"}) {
    ASSERT_TRUE(ws.send_text(m)) << ws.last_error().message();
    EXPECT_EQ(ws.read(), m) << ws.last_error().message();
    EXPECT_TRUE(ws.last_was_text());
  }
  auto blob = ws_random_bytes(64 * 1024);
  ASSERT_TRUE(ws.send_binary(blob)) << ws.last_error().message();
  auto echoed = ws.read();
  ASSERT_TRUE(echoed) << ws.last_error().message();
  EXPECT_EQ(echoed->size(), blob.size());
  EXPECT_TRUE(*echoed == blob) << "binary message corrupted";
  EXPECT_FALSE(ws.last_was_text());

  ASSERT_TRUE(ws.send_text("close"));
  EXPECT_FALSE(ws.read());
  EXPECT_EQ(ws.last_error(), websocket::error::closed) << ws.last_error().message();
  EXPECT_EQ(ws.close_reason().code, websocket::close_code::normal);
}

struct WebSocketProxy : ::testing::Test {
  Origin origin;

  std::string config(const std::string& route_extra = "", const std::string& server_extra = "") {
    return ProxyYaml{
        .upstream_url = http_url(origin), .server_extra = server_extra, .route_extra = route_extra}
        .text();
  }
};

TEST_F(WebSocketProxy, EchoThroughAPlainListener) {
  Proxy proxy(config());
  WsClient ws(proxy.port());
  expect_echo_session(ws);
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(WebSocketProxy, SecureListenerToAPlainOrigin) {
  TestPki pki;
  auto front = pki.issue("shop.test", {"shop.test"});
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin), .listen = tls_listen({front})}.text());
  WsClient ws(proxy.port(),
              {.host = "shop.test", .tls = true, .sni = "shop.test", .ca_file = pki.ca_file()});
  expect_echo_session(ws);
  EXPECT_EQ(origin.requests(), 1u);
}

TEST(WebSocketProxyTls, SecureListenerToAnHttpsOrigin) {
  TestPki pki;
  auto front = pki.issue("shop.test", {"shop.test"});
  auto back = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  Origin origin(back.cert, back.key);
  Proxy proxy(ProxyYaml{.upstream_url = https_url(origin),
                        .listen = tls_listen({front}),
                        .upstream_extra = ca_file_key(pki.ca_file())}
                  .text());
  WsClient ws(proxy.port(),
              {.host = "shop.test", .tls = true, .sni = "shop.test", .ca_file = pki.ca_file()});
  expect_echo_session(ws);
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(WebSocketProxy, RateLimitRefusesTheThirdUpgrade) {
  // Mid-window on a fake clock: no window boundary can pass during the test.
  limit::FakeClock clock(1'800'000'030 * limit::kMicrosPerSecond);
  Proxy proxy(config(R"(    limits:
      - { name: upgrades, algorithm: fixed_window, limit: 2, window: 1m, key: [ip] }
)"),
              &clock);
  WsClient first(proxy.port());
  WsClient second(proxy.port());
  ASSERT_TRUE(first.open()) << first.error();
  ASSERT_TRUE(second.open()) << second.error();
  WsClient third(proxy.port());
  EXPECT_FALSE(third.open());
  EXPECT_EQ(third.status(), 429);
  EXPECT_FALSE(third.response()[boost::beast::http::field::retry_after].empty());
  EXPECT_EQ(origin.requests(), 2u);
  // The refusal did not disturb the admitted tunnels.
  ASSERT_TRUE(first.send_text("still here"));
  EXPECT_EQ(first.read(), "still here");
  ASSERT_TRUE(second.send_text("me too"));
  EXPECT_EQ(second.read(), "me too");
}

// The lease is released when the tunnel ends, however it ends; a refused upgrade never
// reaches the origin.
TEST_F(WebSocketProxy, ConcurrencyLimitHoldsForTheLifeOfTheTunnel) {
  Proxy proxy(config(R"(    limits:
      - { name: tunnels, algorithm: concurrency, limit: 1, key: [ip] }
)"));
  auto first = std::make_unique<WsClient>(proxy.port());
  ASSERT_TRUE(first->open()) << first->error();
  ASSERT_TRUE(first->send_text("hold"));
  EXPECT_EQ(first->read(), "hold");

  WsClient second(proxy.port());
  EXPECT_FALSE(second.open());
  EXPECT_EQ(second.status(), 429);

  // The lease goes back just after the tunnel ends, which the client can beat by a hair.
  auto open_when_released = [&] {
    for (int i = 0; i < 40; ++i) {
      auto ws = std::make_unique<WsClient>(proxy.port());
      if (ws->open()) return ws;
      EXPECT_EQ(ws->status(), 429);
      std::this_thread::sleep_for(50ms);
    }
    return std::unique_ptr<WsClient>();
  };
  EXPECT_TRUE(first->close());  // a clean close handshake
  auto third = open_when_released();
  ASSERT_TRUE(third) << "the lease was not released after a close";
  third.reset();  // the client vanishes without a close frame
  auto fourth = open_when_released();
  ASSERT_TRUE(fourth) << "the lease was not released after a dropped connection";
  ASSERT_TRUE(fourth->send_text("close"));  // and the origin ending it
  EXPECT_FALSE(fourth->read());
  EXPECT_TRUE(open_when_released()) << "the lease was not released after the origin closed";
  EXPECT_EQ(origin.requests(), 4u);
}

TEST_F(WebSocketProxy, IdleTunnelIsClosedByTheProxy) {
  Proxy proxy(config("", "  timeouts: { idle: 300ms }\n"));
  WsClient ws(proxy.port());
  ASSERT_TRUE(ws.open()) << ws.error();
  ASSERT_TRUE(ws.send_text("ping"));
  EXPECT_EQ(ws.read(), "ping");
  auto quiet_since = std::chrono::steady_clock::now();
  EXPECT_TRUE(ws.ended_within(3s)) << ws.last_error().message();
  auto after = std::chrono::steady_clock::now() - quiet_since;
  EXPECT_GE(after, 250ms);
  EXPECT_LE(after, 1500ms);
}

TEST_F(WebSocketProxy, TrafficKeepsATunnelOpenPastTheIdleTimeout) {
  Proxy proxy(config("", "  timeouts: { idle: 300ms }\n"));
  WsClient ws(proxy.port());
  ASSERT_TRUE(ws.open()) << ws.error();
  for (int i = 0; i < 10; ++i) {  // ~1 s in all, never 300 ms quiet
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(ws.send_text("tick " + std::to_string(i))) << ws.last_error().message();
    ASSERT_EQ(ws.read(), "tick " + std::to_string(i)) << ws.last_error().message();
  }
}

TEST_F(WebSocketProxy, OrdinaryRequestsOnTheSameRouteStillWork) {
  Proxy proxy(config());
  {
    WsClient ws(proxy.port());
    ASSERT_TRUE(ws.open()) << ws.error();
    ASSERT_TRUE(ws.send_text("x"));
    EXPECT_EQ(ws.read(), "x");
    EXPECT_TRUE(ws.close());
  }
  Client c(proxy.port());
  auto plain = c.request("GET /ws HTTP/1.1\r\nHost: test\r\n\r\n");  // no upgrade headers
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->result_int(), 200);
  EXPECT_EQ(plain->body(), "ok");
  auto echo = c.request("GET /echo HTTP/1.1\r\nHost: test\r\n\r\n");  // same connection
  ASSERT_TRUE(echo);
  EXPECT_EQ(echo->result_int(), 200);
  EXPECT_EQ(origin.requests(), 3u);
}

}  // namespace
}  // namespace floodgate::testing
