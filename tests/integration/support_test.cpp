// The test support itself, without floodgate in the way: certificates made by TestPki, the
// origin's HTTPS and WebSocket echo, the TLS and WebSocket clients, and the DelayProxy that
// makes a store far. When a proxy test fails, these say whether the fault can be on the test
// side.
#include <gtest/gtest.h>

#include <boost/beast/websocket/error.hpp>

#include <array>
#include <random>

#include "delay_proxy.hpp"
#include "harness.hpp"
#include "test_pki.hpp"
#include "tls_client.hpp"
#include "ws_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(7);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TlsOptions verified(const TestPki& pki, const std::string& host) {
  TlsOptions o;
  o.sni = host;
  o.ca_file = pki.ca_file();
  return o;
}

struct TlsOrigin : ::testing::Test {
  TestPki pki;
  TestPki::Files leaf = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  Origin origin{leaf.cert, leaf.key};
};

TEST_F(TlsOrigin, ServesHttpsWithAVerifiableCertificate) {
  TlsClient c(origin.port(), verified(pki, "localhost"));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.version(), "TLSv1.3");
  EXPECT_EQ(c.peer_name(), "localhost");
  for (int i = 0; i < 3; ++i) {  // one keep-alive connection
    auto r = c.request("GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_EQ(r->body(), "ok");
  }
  auto stats = origin.stats();
  EXPECT_NE(stats.find("\"requests\":3,\"connections\":2,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"server_names\":[\"localhost\",\"\"]"), std::string::npos) << stats;
}

TEST_F(TlsOrigin, ChainFileWorksToo) {
  Origin chained(leaf.chain, leaf.key);
  TlsClient c(chained.port(), verified(pki, "localhost"));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.request("GET /x HTTP/1.1\r\nHost: t\r\n\r\n")->result_int(), 200);
}

TEST_F(TlsOrigin, IpSanIsVerified) {
  TlsOptions o;
  o.ca_file = pki.ca_file();
  o.verify_host = "127.0.0.1";
  TlsClient good(origin.port(), o);
  EXPECT_TRUE(good.ok()) << good.error();
  o.verify_host = "127.0.0.2";
  TlsClient bad(origin.port(), o);
  EXPECT_FALSE(bad.ok());
}

TEST_F(TlsOrigin, VersionLimitsAreHonouredOnBothSides) {
  TlsOptions v12;
  v12.max_version = "1.2";
  TlsClient c12(origin.port(), v12);
  ASSERT_TRUE(c12.ok()) << c12.error();
  EXPECT_EQ(c12.version(), "TLSv1.2");
  EXPECT_EQ(c12.request("GET /x HTTP/1.1\r\nHost: t\r\n\r\n")->result_int(), 200);

  // The client really offers 1.1 (the server's alert says so), it is not refused locally.
  TlsOptions v11;
  v11.min_version = v11.max_version = "1.1";
  TlsClient c11(origin.port(), v11);
  EXPECT_FALSE(c11.ok());
  EXPECT_NE(c11.error().find("protocol version"), std::string::npos) << c11.error();
}

TEST_F(TlsOrigin, AlpnIsOnlyReportedWhenNegotiated) {
  TlsOptions o;
  o.alpn = {"h2", "http/1.1"};
  TlsClient c(origin.port(), o);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.alpn(), "");  // the origin does no ALPN
}

TEST(TlsOriginCertificates, BadCertificatesFailVerificationForTheRightReason) {
  TestPki pki;
  TestPki other;
  struct Case {
    TestPki::Files files;
    std::string reason;
  };
  std::vector<Case> cases = {
      {pki.issue("localhost", {"localhost"}, {}, -240h, -24h), "expired"},
      {pki.issue("other.test", {"other.test"}), "mismatch"},
      {other.issue("localhost", {"localhost"}), "local issuer"},
      {pki.self_signed("localhost", {"localhost"}), "self-signed"},
  };
  for (const auto& c : cases) {
    Origin origin(c.files.cert, c.files.key);
    TlsClient client(origin.port(), verified(pki, "localhost"));
    EXPECT_FALSE(client.ok()) << c.reason;
    EXPECT_NE(client.error().find(c.reason), std::string::npos) << client.error();
    TlsClient unverified(origin.port());  // the same server is fine when nobody checks
    EXPECT_TRUE(unverified.ok()) << unverified.error();
    EXPECT_EQ(origin.requests(), 0u);
  }
}

TEST(WebSocketOrigin, EchoesTextAndBinaryThenClosesOnRequest) {
  Origin origin;
  WsClient ws(origin.port());
  ASSERT_TRUE(ws.open()) << ws.error();
  EXPECT_EQ(ws.status(), 101);
  for (std::string m : {"one", "two", "three"}) {
    ASSERT_TRUE(ws.send_text(m));
    EXPECT_EQ(ws.read(), m);
    EXPECT_TRUE(ws.last_was_text());
  }
  auto blob = random_bytes(64 * 1024);
  ASSERT_TRUE(ws.send_binary(blob));
  auto echoed = ws.read();
  ASSERT_TRUE(echoed) << ws.last_error().message();
  EXPECT_TRUE(*echoed == blob);
  EXPECT_FALSE(ws.last_was_text());

  ASSERT_TRUE(ws.send_text("close"));
  EXPECT_FALSE(ws.read());
  EXPECT_EQ(ws.last_error(), boost::beast::websocket::error::closed);
  EXPECT_EQ(ws.close_reason().code, boost::beast::websocket::close_code::normal);
  auto stats = origin.stats();
  EXPECT_NE(stats.find("\"requests\":1,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("\"targets\":[\"GET /ws\"]"), std::string::npos) << stats;
}

TEST(WebSocketOrigin, ClientCloseAndPlainRequestsToTheSamePath) {
  Origin origin;
  WsClient ws(origin.port(), {.target = "/ws/room"});
  ASSERT_TRUE(ws.open()) << ws.error();
  EXPECT_TRUE(ws.close());
  auto r = get(origin.port(), "/ws");  // no upgrade headers: an ordinary request
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(r->body(), "ok");
  EXPECT_EQ(origin.requests(), 2u);
}

TEST(WebSocketOrigin, IdleClientSeesNoEndWithinTheDeadline) {
  Origin origin;
  WsClient ws(origin.port());
  ASSERT_TRUE(ws.open()) << ws.error();
  EXPECT_FALSE(ws.ended_within(300ms));  // the origin never closes an idle WebSocket
  EXPECT_EQ(ws.last_error(), boost::asio::error::timed_out);
}

TEST(WebSocketOrigin, SecureEchoOnATlsOrigin) {
  TestPki pki;
  auto leaf = pki.issue("localhost", {"localhost"});
  Origin origin(leaf.cert, leaf.key);
  WsClient ws(origin.port(),
              {.host = "localhost", .tls = true, .sni = "localhost", .ca_file = pki.ca_file()});
  ASSERT_TRUE(ws.open()) << ws.error();
  ASSERT_TRUE(ws.send_text("over tls"));
  EXPECT_EQ(ws.read(), "over tls");
  EXPECT_TRUE(ws.close());
  EXPECT_EQ(origin.requests(), 1u);
}

TEST(WebSocketOrigin, RefusedUpgradeReportsTheStatus) {
  Origin origin;
  // The origin answers a non-/ws upgrade as a plain request: 200, not 101.
  WsClient ws(origin.port(), {.target = "/other"});
  EXPECT_FALSE(ws.open());
  EXPECT_EQ(ws.status(), 200);
  EXPECT_EQ(ws.response().body(), "ok");
}

// A TCP echo on loopback: what the DelayProxy is put in front of, so that every byte read back
// has crossed it twice.
class EchoServer {
 public:
  EchoServer() {
    port_ = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~EchoServer() {
    io_.stop();
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  struct Peer {
    explicit Peer(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::array<char, 4096> buffer{};
  };
  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      echo(std::make_shared<Peer>(std::move(s)));
      accept();
    });
  }
  void echo(const std::shared_ptr<Peer>& p) {
    p->socket.async_read_some(
        asio::buffer(p->buffer), [this, p](boost::system::error_code ec, std::size_t n) {
          if (ec) return;
          asio::async_write(p->socket, asio::buffer(p->buffer.data(), n),
                            [this, p](boost::system::error_code e, std::size_t) {
                              if (!e) echo(p);
                            });
        });
  }
  asio::io_context io_;
  tcp::acceptor acceptor_{io_, {asio::ip::make_address("127.0.0.1"), 0}};
  std::uint16_t port_ = 0;
  std::thread thread_;
};

struct DelayedEcho : ::testing::Test {
  EchoServer echo;
  DelayProxy proxy{echo.port(), 20ms};
};

TEST_F(DelayedEcho, RoundTripCostsTheDelayBothWays) {
  Client c(proxy.port());
  auto start = std::chrono::steady_clock::now();
  c.send("ping");
  EXPECT_EQ(c.read_raw(4, 2s), "ping");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 40ms);
  EXPECT_LT(took, 400ms);
  EXPECT_EQ(proxy.connections(), 1u);
}

TEST_F(DelayedEcho, ChunksInQuickSuccessionComeBackInOrder) {
  Client c(proxy.port());
  c.send("one,");
  c.send("two,");
  c.send("three");
  EXPECT_EQ(c.read_raw(13, 2s), "one,two,three");
}

TEST_F(DelayedEcho, CutClosesOpenConnectionsAndRefusesNewOnesUntilLifted) {
  Client c(proxy.port());
  c.send("ping");
  ASSERT_EQ(c.read_raw(4, 2s), "ping");

  proxy.cut(true);
  EXPECT_TRUE(c.closed_by_peer(1s));
  // The kernel still completes the handshake (the listener stays open); the proxy then closes
  // the connection at once, with nothing sent: a store that is gone, not one that hangs.
  Client refused(proxy.port());
  EXPECT_TRUE(refused.closed_by_peer(1s));
  EXPECT_EQ(proxy.connections(), 2u);

  proxy.cut(false);
  Client again(proxy.port());
  again.send("back");
  EXPECT_EQ(again.read_raw(4, 2s), "back");
  EXPECT_EQ(proxy.connections(), 3u);
}

}  // namespace
}  // namespace floodgate::testing
