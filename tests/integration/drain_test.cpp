// A drain (SIGTERM) closes idle keep-alive connections at once, plain and TLS (with a
// close_notify), lets in-flight requests finish within server.timeouts.drain, closes whatever
// outlasts it, and returns only after every session has ended on its own terms: a request cut
// off at the deadline still gets its access log line, because its coroutine runs to its end
// instead of being destroyed with the event loop.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"
#include "tls_client.hpp"
#include "ws_client.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t);
}

// A keep-alive connection that has served one request and waits for the next.
void make_idle(Client& c) {
  auto r = c.request("GET /first HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->result_int(), 200);
  ASSERT_TRUE(r->keep_alive());
}

TEST(Drain, IdleKeepAliveConnectionsCloseAtOnceWhileARequestFinishes) {
  Origin origin;
  Proxy proxy(one_route_config(origin, "  threads: 2\n"));
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<Client>(proxy.port()));
    make_idle(*idle.back());
  }
  auto slow = std::async(std::launch::async, [&] { return get(proxy.port(), "/slow/1500"); });
  // The slow request is in flight: the origin has it (and answers 1.5 s later).
  ASSERT_TRUE(eventually([&] { return origin.requests() == 5; }, 3s)) << origin.stats();

  const auto started = Clock::now();
  auto drained = std::async(std::launch::async, [&] { proxy.drain(10s); });
  for (auto& c : idle) EXPECT_TRUE(c->closed_by_peer(500ms)) << "an idle connection stayed open";
  // The in-flight request ends about 1.5 s after the drain began: idle connections closed
  // well before it did not wait for it (a budget with room for a loaded sanitizer run).
  EXPECT_LT(since(started), 1000ms) << "idle connections waited for the in-flight request";

  auto done = slow.get();
  ASSERT_TRUE(done) << "the in-flight request was cut short";
  EXPECT_EQ(done->result_int(), 200);
  EXPECT_EQ(done->body(), "slow ok");
  ASSERT_EQ(drained.wait_for(3s), std::future_status::ready) << "the drain did not end";
  EXPECT_LT(since(started), 3s) << "the drain waited for more than the in-flight request";
}

TEST(Drain, IdleTlsConnectionGetsCloseNotifyAndDoesNotHoldTheDrain) {
  TestPki pki;
  auto shop = pki.issue("shop.test", {"shop.test"});
  Origin origin;
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin), .listen = tls_listen({shop})}.text());
  TlsClient tls(proxy.port());
  ASSERT_TRUE(tls.ok()) << tls.error();
  auto r = tls.request("GET /first HTTP/1.1\r\nHost: shop.test\r\n\r\n");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->result_int(), 200);

  const auto started = Clock::now();
  auto drained = std::async(std::launch::async, [&] { proxy.drain(10s); });
  // Not a silent TCP close: the client can tell a deliberate end from a truncation.
  EXPECT_EQ(tls.end_of_connection(2s), "close_notify");
  // The client never answers with its own close_notify: the drain does not wait for it.
  ASSERT_EQ(drained.wait_for(2s), std::future_status::ready) << "the drain did not end";
  EXPECT_LT(since(started), 1s);
}

TEST(Drain, WhatOutlastsTheGraceIsClosedAndEveryRequestStillEndsAndIsLogged) {
  Origin origin;
  LogCapture access;
  Proxy proxy(one_route_config(origin, "  threads: 1\n") + "log: { access_log: true }\n", nullptr,
              access.logger());
  Client idle(proxy.port());
  make_idle(idle);
  ASSERT_TRUE(access.wait_for(1, 2s));
  Client stalled(proxy.port());
  stalled.send("GET /never-finished HTTP/1.1\r\nHost: t\r\n");
  auto slow = std::async(std::launch::async, [&] { return get(proxy.port(), "/slow/20000"); });
  WsClient ws(proxy.port());
  ASSERT_TRUE(ws.open()) << ws.error();
  // The slow request is waiting for its response: the origin has it.
  ASSERT_TRUE(
      eventually([&] { return origin.stats().find("GET /slow/20000") != std::string::npos; }, 3s))
      << origin.stats();

  const auto started = Clock::now();
  auto drained = std::async(std::launch::async, [&] { proxy.drain(300ms); });
  EXPECT_TRUE(idle.closed_by_peer(200ms));
  ASSERT_EQ(drained.wait_for(3s), std::future_status::ready) << "the drain did not end";
  EXPECT_GE(since(started), 250ms) << "in-flight requests were not given the grace";
  EXPECT_LT(since(started), 1500ms) << "the drain waited for the upstream past its grace";
  EXPECT_FALSE(slow.get()) << "a response came after the drain's deadline";
  EXPECT_TRUE(stalled.closed_by_peer(200ms));
  EXPECT_TRUE(ws.ended_within(200ms));
  // The cut-off request and the tunnel ran to their ends: both were logged.
  EXPECT_TRUE(access.wait_for(3, 100ms)) << access.lines().size() << " access log lines";
  EXPECT_EQ(proxy.metrics().active_connections.load(), 0);
}

}  // namespace
}  // namespace floodgate::testing
