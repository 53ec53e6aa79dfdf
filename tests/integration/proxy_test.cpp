// The proxy against a real origin process over real sockets: pass-through, streaming,
// connection reuse, every error status, smuggling attempts and slow clients.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <thread>

#include "harness.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string base_config(const Origin& origin, const std::string& server_extra = "",
                        const std::string& response_timeout = "2s") {
  return substitute(R"(
server:
  listen: [127.0.0.1:0]
  threads: 1
  pop: itest
  max_body_bytes: 1MiB
  max_header_bytes: 4KiB
)" + server_extra + R"(
upstreams:
  origin: { url: "http://{ORIGIN}", response_timeout: )" +
                        response_timeout + R"( }
  nowhere: { url: "http://127.0.0.1:1", connect_timeout: 500ms }
routes:
  - name: dead
    match: { path_prefix: /dead }
    upstream: nowhere
  - name: api
    match: { path_prefix: /api/, methods: [GET, POST, PUT, HEAD] }
    upstream: origin
  - name: all
    match: { path_prefix: /, host: origin.test }
    upstream: origin
  - name: everything
    match: { path_prefix: /echo }
    upstream: origin
  - name: streams
    match: { path_prefix: /bytes/ }
    upstream: origin
  - name: slow
    match: { path_prefix: /slow/ }
    upstream: origin
)",
                    "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port()));
}

std::uint64_t fnv(std::string_view data) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(42);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

long peak_rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

struct ProxyTest : ::testing::Test {
  Origin origin;
};

TEST_F(ProxyTest, GetPassesThroughWithForwardingHeaders) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r = c.request(
      "GET /echo/x?y=1 HTTP/1.1\r\nHost: shop.test\r\nX-Forwarded-For: 203.0.113.9\r\n"
      "Connection: keep-alive, X-Secret\r\nX-Secret: drop me\r\nKeep-Alive: timeout=5\r\n"
      "Proxy-Authorization: Basic x\r\nX-Keep: yes\r\nVia: 1.0 cdn\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  const auto& body = r->body();
  EXPECT_NE(body.find(R"("target":"/echo/x?y=1")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"(["Host","shop.test"])"), std::string::npos) << body;
  EXPECT_NE(body.find(R"(["X-Forwarded-For","203.0.113.9, 127.0.0.1"])"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"(["X-Forwarded-Proto","http"])"), std::string::npos) << body;
  EXPECT_NE(body.find(R"(["Via","1.0 cdn, 1.1 itest"])"), std::string::npos) << body;
  EXPECT_NE(body.find(R"(["X-Keep","yes"])"), std::string::npos) << body;
  for (auto dropped : {"X-Secret", "Keep-Alive", "Proxy-Authorization", "Connection"})
    EXPECT_EQ(body.find(std::string("\"") + dropped + "\""), std::string::npos)
        << dropped << " in " << body;
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(ProxyTest, PostBodyArrivesIntact) {
  Proxy proxy(base_config(origin));
  auto data = random_bytes(900 * 1024);
  Client c(proxy.port());
  auto r =
      c.request("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(data.size()) +
                "\r\n\r\n" + data);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_NE(r->body().find("\"body_bytes\":" + std::to_string(data.size())), std::string::npos);
  EXPECT_NE(r->body().find("\"body_fnv\":\"" + std::to_string(fnv(data)) + "\""),
            std::string::npos);
}

TEST_F(ProxyTest, ChunkedUploadIsReframedNotCorrupted) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r = c.request(
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_NE(r->body().find("\"body_bytes\":12"), std::string::npos) << r->body();
  EXPECT_NE(r->body().find("\"body_fnv\":\"" + std::to_string(fnv("hello, world")) + "\""),
            std::string::npos);
}

TEST_F(ProxyTest, LargeDownloadIsStreamedNotBuffered) {
  Proxy proxy(base_config(origin));
  const std::uint64_t size = 64ull * 1024 * 1024;
  long before = peak_rss_kib();
  Client c(proxy.port());
  c.send("GET /bytes/" + std::to_string(size) + "?chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n");
  // Read through Beast with a small buffer body so the test itself does not hold 64 MiB.
  bhttp::response_parser<bhttp::buffer_body> p;
  p.body_limit(boost::none);
  beast::flat_buffer buf;
  bhttp::read_header(c.socket(), buf, p);
  EXPECT_EQ(p.get().result_int(), 200);
  std::uint64_t received = 0;
  bool pattern_ok = true;
  char chunk[65536];
  while (!p.is_done()) {
    p.get().body().data = chunk;
    p.get().body().size = sizeof chunk;
    beast::error_code ec;
    bhttp::read(c.socket(), buf, p, ec);
    if (ec && ec != bhttp::error::need_buffer) FAIL() << ec.message();
    std::size_t got = sizeof chunk - p.get().body().size;
    for (std::size_t i = 0; i < got; ++i)
      pattern_ok &= chunk[i] == static_cast<char>('a' + (received + i) % 26);
    received += got;
  }
  EXPECT_EQ(received, size);
  EXPECT_TRUE(pattern_ok);
  long growth_kib = peak_rss_kib() - before;
  EXPECT_LT(growth_kib, 16 * 1024) << "peak RSS grew by " << growth_kib << " KiB for a 64 MiB body";
}

TEST_F(ProxyTest, UpstreamConnectionsAreReused) {
  Proxy proxy(base_config(origin));
  for (int conn = 0; conn < 5; ++conn) {
    Client c(proxy.port());
    for (int i = 0; i < 10; ++i) {
      auto r = c.request("GET /api/x HTTP/1.1\r\nHost: t\r\n\r\n");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->result_int(), 200);
    }
  }
  EXPECT_EQ(origin.requests(), 50u);
  // One worker, sequential requests: one upstream connection serves all 50. Each stats
  // query opens a connection of its own: the one above and the one below.
  EXPECT_EQ(origin.connections(), 3u);
}

TEST_F(ProxyTest, UpstreamClosingAPooledConnectionIsRetriedForIdempotentRequests) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r1 = c.request("GET /close HTTP/1.1\r\nHost: origin.test\r\n\r\n");
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->body(), "bye");
  auto r2 = c.request("GET /api/after HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->result_int(), 200);
  EXPECT_EQ(origin.requests(), 2u);
}

TEST_F(ProxyTest, NoRouteIs404AndKeepsTheConnection) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r = c.request("DELETE /api/x HTTP/1.1\r\nHost: t\r\n\r\n");  // method not routed
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 404);
  EXPECT_EQ(without_request_id(r->body()), "no route for this request\n");
  auto again = c.request("GET /nothing-here HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result_int(), 404);
  auto routed = c.request("GET /anything HTTP/1.1\r\nHost: ORIGIN.test:8080\r\n\r\n");
  ASSERT_TRUE(routed);
  EXPECT_EQ(routed->result_int(), 200);
  EXPECT_EQ(origin.requests(), 1u);
}

TEST_F(ProxyTest, BodyTooLargeIs413BeforeTheOrigin) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r = c.request("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 413);
  EXPECT_TRUE(c.closed_by_peer(2s));
  EXPECT_EQ(origin.requests(), 0u);
}

TEST_F(ProxyTest, ChunkedBodyOverTheLimitIs413) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  std::string piece(64 * 1024, 'x');
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece.size());
  for (int i = 0; i < 20; ++i) {  // 1.25 MiB in total, over the 1 MiB limit
    boost::system::error_code ec;
    asio::write(c.socket(), asio::buffer(std::string(size_line) + piece + "\r\n"), ec);
    if (ec) break;
  }
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 413);
  EXPECT_EQ(origin.requests(), 0u);
}

TEST_F(ProxyTest, HeaderTooLargeIs431) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r =
      c.request("GET /echo HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 431);
  EXPECT_EQ(origin.requests(), 0u);
}

TEST_F(ProxyTest, MalformedRequestsAre400AndClosed) {
  Proxy proxy(base_config(origin));
  for (std::string raw : {
           std::string("GARBAGE\r\n\r\n"),
           std::string("GET /echo HTTP/1.1\r\n\r\n"),                        // no Host
           std::string("GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),  // two Hosts
           std::string("GET echo HTTP/1.1\r\nHost: a\r\n\r\n"),              // relative target
           std::string("GET /echo HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n"),
       }) {
    Client c(proxy.port());
    auto r = c.request(raw);
    ASSERT_TRUE(r) << raw;
    EXPECT_EQ(r->result_int(), 400) << raw;
    EXPECT_EQ(without_request_id(r->body()), "bad request\n");
    EXPECT_TRUE(c.closed_by_peer(2s)) << raw;
  }
  EXPECT_EQ(origin.requests(), 0u);
}

TEST_F(ProxyTest, SmugglingAttemptsNeverReachTheOrigin) {
  Proxy proxy(base_config(origin));
  const std::string smuggled = "GET /echo/smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
  for (std::string raw : {
           // CL.TE: both framings
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\nTransfer-Encoding: "
           "chunked\r\n\r\n0\r\n\r\n" +
               smuggled,
           // TE.CL
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: "
           "4\r\n\r\n5c\r\n" +
               smuggled + "\r\n0\r\n\r\n",
           // conflicting Content-Lengths
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: "
           "41\r\n\r\nhello" +
               smuggled,
           // a Transfer-Encoding that is not chunked
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n" + smuggled,
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, "
           "identity\r\n\r\n0\r\n\r\n" +
               smuggled,
           // Transfer-Encoding in HTTP/1.0
           "POST /echo HTTP/1.0\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
               smuggled,
       }) {
    Client c(proxy.port());
    auto r = c.request(raw);
    ASSERT_TRUE(r) << raw;
    EXPECT_EQ(r->result_int(), 400) << raw;
    EXPECT_TRUE(c.closed_by_peer(2s)) << raw;
  }
  EXPECT_EQ(origin.requests(), 0u) << origin.stats();
}

TEST_F(ProxyTest, UnreachableUpstreamIs502) {
  Proxy proxy(base_config(origin));
  auto r = get(proxy.port(), "/dead");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 502);
  EXPECT_EQ(without_request_id(r->body()), "upstream unreachable\n");
}

TEST_F(ProxyTest, SlowUpstreamIs504WithinTheResponseTimeout) {
  Proxy proxy(base_config(origin, "", "300ms"));
  auto start = std::chrono::steady_clock::now();
  auto r = get(proxy.port(), "/slow/3000");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 504);
  EXPECT_EQ(without_request_id(r->body()), "upstream timed out\n");
  EXPECT_LT(took, 2s);
  EXPECT_GE(took, 250ms);
}

TEST_F(ProxyTest, SlowHeaderClientIsCutOffWhileOthersAreServed) {
  Proxy proxy(base_config(origin, "  timeouts: { header_read: 300ms, idle: 5s }\n"));
  Client slow(proxy.port());
  slow.send("GET /echo HTTP/1.1\r\nHost: t\r\nX-Slow: ");  // never finishes its header
  auto r = get(proxy.port(), "/api/fast");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(slow.closed_by_peer(3s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

TEST_F(ProxyTest, IdleKeepAliveConnectionIsClosed) {
  Proxy proxy(base_config(origin, "  timeouts: { header_read: 5s, idle: 300ms }\n"));
  Client c(proxy.port());
  auto r = c.request("GET /api/x HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_TRUE(c.closed_by_peer(3s));
}

TEST_F(ProxyTest, Http10ClientGetsAClosedDelimitedResponse) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  c.send("GET /bytes/5000?chunked=1 HTTP/1.0\r\nHost: t\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->version(), 10u);
  EXPECT_EQ(r->body().size(), 5000u);
  EXPECT_EQ(r->find(bhttp::field::transfer_encoding), r->end());
  EXPECT_TRUE(c.closed_by_peer(2s));
}

TEST_F(ProxyTest, ExpectContinueIsAnsweredByTheProxy) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  auto interim = c.read_raw(25, 2s);
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  c.send("hello");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_NE(r->body().find("\"body_bytes\":5"), std::string::npos);
  EXPECT_EQ(r->body().find("Expect"), std::string::npos);
}

TEST_F(ProxyTest, AbsoluteFormTargetIsForwardedInOriginForm) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  auto r = c.request("GET http://origin.test/echo/abs?q=1 HTTP/1.1\r\nHost: other\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_NE(r->body().find(R"("target":"/echo/abs?q=1")"), std::string::npos) << r->body();
  EXPECT_NE(r->body().find(R"(["Host","origin.test"])"), std::string::npos) << r->body();
}

TEST_F(ProxyTest, HeadResponseHasNoBody) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  c.send("HEAD /api/x HTTP/1.1\r\nHost: t\r\n\r\n");
  auto r = c.read_response(5s, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ((*r)[bhttp::field::content_length], "2");
  auto next = c.request("GET /api/y HTTP/1.1\r\nHost: t\r\n\r\n");  // framing still in sync
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body(), "ok");
}

TEST_F(ProxyTest, PipelinedRequestsAreAnsweredInOrder) {
  Proxy proxy(base_config(origin));
  Client c(proxy.port());
  c.send("GET /echo/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /echo/2 HTTP/1.1\r\nHost: t\r\n\r\n");
  auto a = c.read_response();
  auto b = c.read_response();
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->body().find("/echo/1"), std::string::npos);
  EXPECT_NE(b->body().find("/echo/2"), std::string::npos);
}

}  // namespace
}  // namespace floodgate::testing
