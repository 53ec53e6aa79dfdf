// Upstream pools (issue 20, item 1) with real origins: requests spread by weight, a server that
// dies is retried around at once (connect refused: nothing was sent), taken out by its health
// checks, and back when it serves again; a request that reached a server which then failed is
// answered 502 and never sent to a second one; consecutive failures eject a server for its
// cool-down; an h2 upstream's servers are checked over HTTP/2.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "cannot_run.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string url(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

std::string pool_config(const std::string& upstream, int threads = 1) {
  return "server:\n  listen: [127.0.0.1:0]\n  threads: " + std::to_string(threads) +
         "\nupstreams:\n  pool:\n" + upstream +
         "routes:\n  - { name: all, match: { path_prefix: / }, upstream: pool }\n";
}

std::string series(const char* name, std::uint16_t port) {
  return std::string(name) + "{upstream=\"pool\",server=\"" + url(port) + "\"}";
}

// Waits until `ok` holds, for up to `limit`.
template <typename F>
bool pool_eventually(F ok, std::chrono::milliseconds limit) {
  for (const auto until = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms))
    if (ok()) return true;
  return ok();
}

// `n` GETs; counts the statuses.
std::map<int, int> send(std::uint16_t port, int n, const std::string& target = "/x") {
  std::map<int, int> statuses;
  for (int i = 0; i < n; ++i) {
    auto r = get(port, target);
    ++statuses[r ? r->result_int() : -1];
  }
  return statuses;
}

TEST(UpstreamPool, RequestsSpreadByWeight) {
  Origin a, b, c;
  Proxy proxy(pool_config("    servers:\n      - { url: \"" + url(a.port()) + "\" }\n" +
                          "      - { url: \"" + url(b.port()) + "\", weight: 2 }\n" +
                          "      - { url: \"" + url(c.port()) + "\" }\n"));
  EXPECT_EQ(send(proxy.port(), 40), (std::map<int, int>{{200, 40}}));
  EXPECT_EQ(a.requests(), 10u);
  EXPECT_EQ(b.requests(), 20u);
  EXPECT_EQ(c.requests(), 10u);
  const auto m = admin::render_prometheus(proxy.metrics());
  EXPECT_EQ(metric(m, series("floodgate_upstream_server_requests_total", b.port())), 20u);
  EXPECT_EQ(metric(m, series("floodgate_upstream_server_up", a.port())), 1u);
}

TEST(UpstreamPool, AServerLostIsRetriedAroundTakenOutAndBackWhenItServesAgain) {
  Origin a, c;
  std::optional<Origin> b(std::in_place);
  const auto b_port = b->port();
  // The checks ask /__stats, which the test origin does not count as a request.
  Proxy proxy(pool_config("    servers:\n      - { url: \"" + url(a.port()) + "\" }\n" +
                              "      - { url: \"" + url(b_port) + "\" }\n" + "      - { url: \"" +
                              url(c.port()) + "\" }\n" +
                              "    health_check: { path: /__stats, interval: 250ms, timeout: "
                              "200ms, healthy: 2, unhealthy: 2 }\n"
                              "    ejection: { consecutive_failures: 0 }\n",
                          2));
  auto counts = [&](std::uint64_t& na, std::uint64_t& nb, std::uint64_t& nc) {
    na = a.requests();
    nb = b ? b->requests() : 0;
    nc = c.requests();
  };
  auto m = [&](const char* name, std::uint16_t port) {
    return metric(admin::render_prometheus(proxy.metrics()), series(name, port));
  };
  std::uint64_t a0, b0, c0;

  // All three serve.
  EXPECT_EQ(send(proxy.port(), 60), (std::map<int, int>{{200, 60}}));
  counts(a0, b0, c0);
  std::printf("[ pool     ] all up: a %llu, b %llu, c %llu\n", (unsigned long long)a0,
              (unsigned long long)b0, (unsigned long long)c0);
  EXPECT_EQ(a0 + b0 + c0, 60u);
  EXPECT_GE(b0, 10u);

  // b dies: its turns are refused connections, each retried on another server at once.
  b.reset();
  EXPECT_EQ(send(proxy.port(), 60), (std::map<int, int>{{200, 60}}));
  std::uint64_t a1, b1, c1;
  counts(a1, b1, c1);
  std::printf("[ pool     ] b down, before its checks fail: a +%llu, c +%llu, retries %llu\n",
              (unsigned long long)(a1 - a0), (unsigned long long)(c1 - c0),
              (unsigned long long)metric(admin::render_prometheus(proxy.metrics()),
                                         "floodgate_upstream_retries_total{upstream=\"pool\"}"));
  EXPECT_EQ(a1 - a0 + c1 - c0, 60u);

  // Two failed checks take it out; then no request goes its way (no retries either).
  ASSERT_TRUE(pool_eventually([&] { return m("floodgate_upstream_server_up", b_port) == 0; }, 3s));
  const auto retries = metric(admin::render_prometheus(proxy.metrics()),
                              "floodgate_upstream_retries_total{upstream=\"pool\"}");
  const auto b_requests = m("floodgate_upstream_server_requests_total", b_port);
  EXPECT_EQ(send(proxy.port(), 60), (std::map<int, int>{{200, 60}}));
  EXPECT_EQ(metric(admin::render_prometheus(proxy.metrics()),
                   "floodgate_upstream_retries_total{upstream=\"pool\"}"),
            retries);
  EXPECT_EQ(m("floodgate_upstream_server_requests_total", b_port), b_requests);
  EXPECT_GE(m("floodgate_upstream_server_checks_failed_total", b_port), 2u);
  std::uint64_t a2, b2, c2;
  counts(a2, b2, c2);
  std::printf("[ pool     ] b out of service: a +%llu, c +%llu\n", (unsigned long long)(a2 - a1),
              (unsigned long long)(c2 - c1));

  // b serves again on its port: two passed checks bring it back, and it gets its share.
  b.emplace(b_port);
  ASSERT_TRUE(pool_eventually([&] { return m("floodgate_upstream_server_up", b_port) == 1; }, 3s));
  EXPECT_EQ(send(proxy.port(), 60), (std::map<int, int>{{200, 60}}));
  std::uint64_t a3, b3, c3;
  counts(a3, b3, c3);
  std::printf("[ pool     ] b back: a +%llu, b %llu, c +%llu\n", (unsigned long long)(a3 - a2),
              (unsigned long long)b3, (unsigned long long)(c3 - c2));
  EXPECT_GE(b3, 10u);
  EXPECT_EQ(a3 - a2 + b3 + c3 - c2, 60u);
}

// A server that reads a request and closes without answering: the origin may have acted on it.
class Swallower {
 public:
  Swallower() : acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      for (;;) {
        boost::asio::ip::tcp::socket s(ioc_);
        boost::system::error_code ec;
        acceptor_.accept(s, ec);
        if (ec || stop_) return;
        char buf[4096];
        s.read_some(boost::asio::buffer(buf), ec);  // the request's head, then gone
        if (!ec) ++requests_;
      }
    });
  }
  ~Swallower() {
    stop_ = true;
    // Closing the acceptor would not wake a blocking accept: a connection does.
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket wake(ioc);
    boost::system::error_code ec;
    wake.connect({boost::asio::ip::make_address("127.0.0.1"), port()}, ec);
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int requests() const { return requests_; }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(UpstreamPool, ARequestThatReachedAServerIsNeverSentToAnother) {
  Swallower swallower;
  Origin origin;
  const auto dead = free_port();
  Proxy proxy(pool_config("    servers:\n      - { url: \"" + url(swallower.port()) + "\" }\n" +
                          "      - { url: \"" + url(origin.port()) + "\" }\n" +
                          "      - { url: \"" + url(dead) + "\" }\n" +
                          "    ejection: { consecutive_failures: 0 }\n"));
  // Round robin: the swallower, the origin, the dead port (retried: on the swallower or the
  // origin), ... Each request reaches exactly one server that could have acted on it.
  std::map<int, int> statuses;
  for (int i = 0; i < 12; ++i) {
    Client c(proxy.port());
    auto r = c.request(i % 2 ? "GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
                             : "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    ++statuses[r ? r->result_int() : -1];
  }
  ASSERT_TRUE(pool_eventually([&] { return swallower.requests() == statuses[502]; }, 2s));
  EXPECT_EQ(statuses[200] + statuses[502], 12);
  EXPECT_EQ(origin.requests(), static_cast<std::uint64_t>(statuses[200]));
  EXPECT_EQ(metric(admin::render_prometheus(proxy.metrics()),
                   "floodgate_upstream_retries_total{upstream=\"pool\"}"),
            4u);  // the dead port's four turns, each sent on once
  EXPECT_GE(statuses[502], 4);
}

TEST(UpstreamPool, ConsecutiveFailuresEjectAServerForItsCoolDown) {
  Origin origin;
  const auto dead = free_port();
  LogCapture log;
  Proxy proxy(pool_config("    servers:\n      - { url: \"" + url(dead) + "\" }\n" +
                          "      - { url: \"" + url(origin.port()) + "\" }\n" +
                          "    ejection: { consecutive_failures: 2, cool_down: 1s }\n"),
              nullptr, nullptr, log.logger());
  EXPECT_EQ(send(proxy.port(), 10), (std::map<int, int>{{200, 10}}));
  auto m = [&](const char* name) {
    return metric(admin::render_prometheus(proxy.metrics()), series(name, dead));
  };
  // Two refused connections (each retried on the origin) eject it: then it gets none.
  EXPECT_EQ(m("floodgate_upstream_server_requests_total"), 2u);
  EXPECT_EQ(m("floodgate_upstream_server_ejections_total"), 1u);
  EXPECT_EQ(m("floodgate_upstream_server_up"), 0u);
  EXPECT_EQ(origin.requests(), 10u);
  bool logged = false;
  for (const auto& l : log.lines())
    logged |= l.find("server " + url(dead) + " ejected for 1s after 2 failures in a row") !=
              std::string::npos;
  EXPECT_TRUE(logged);
  // After the cool-down it is tried again (and ejected again after two more).
  ASSERT_TRUE(pool_eventually([&] { return m("floodgate_upstream_server_up") == 1; }, 3s));
  EXPECT_EQ(send(proxy.port(), 10), (std::map<int, int>{{200, 10}}));
  EXPECT_EQ(m("floodgate_upstream_server_requests_total"), 4u);
  EXPECT_EQ(m("floodgate_upstream_server_ejections_total"), 2u);
}

TEST(UpstreamPool, AnH2UpstreamsServersAreCheckedOverHttp2) {
  FLOODGATE_REQUIRE_TOOL("nghttpd", "nghttp2-server");
  auto dir = std::filesystem::temp_directory_path() / ("fg-pool-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "health") << "ok\n";
  const auto port = free_port();
  ChildProcess nghttpd(
      {find_tool("nghttpd"), "--no-tls", "-d", dir.string(), std::to_string(port)});
  wait_listening(port);
  const auto dead = free_port();
  Proxy proxy(pool_config("    servers:\n      - { url: \"" + url(port) + "\" }\n" +
                          "      - { url: \"" + url(dead) + "\" }\n" +
                          "    protocol: h2\n"
                          "    health_check: { path: /health, interval: 300ms, timeout: 300ms, "
                          "healthy: 1, unhealthy: 2 }\n"));
  auto m = [&](const char* name, std::uint16_t p) {
    return metric(admin::render_prometheus(proxy.metrics()), series(name, p));
  };
  ASSERT_TRUE(pool_eventually([&] { return m("floodgate_upstream_server_up", dead) == 0; }, 3s));
  EXPECT_EQ(m("floodgate_upstream_server_up", port), 1u);
  EXPECT_LT(m("floodgate_upstream_server_checks_failed_total", port), 2u);  // sanitizers are slow
  // Every request goes to the server that passes.
  EXPECT_EQ(send(proxy.port(), 10, "/health"), (std::map<int, int>{{200, 10}}));
  EXPECT_EQ(m("floodgate_upstream_server_requests_total", port), 10u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace floodgate::testing
