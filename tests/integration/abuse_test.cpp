// Resource abuse against the default configuration: a thousand clients that start a request
// header and stall, a thousand idle keep-alive connections (fewer on a developer's machine
// whose descriptor limit is lower; CI requires the thousand), and a normal client that must still
// be served promptly while the proxy's memory stays bounded.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <list>
#include <thread>

#include "cannot_run.hpp"
#include "harness.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using asio::as_tuple;
using asio::use_awaitable;

constexpr int kWanted = 1000;  // stalled connections, and as many idle ones
constexpr int kWave = 100;     // idle connections opened at a time
constexpr int kFewest = 100;   // a developer's run below this many of each proves little: skipped

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// How many connections of each kind (stalled, idle) fit in this process's descriptors, after
// raising the soft limit to the hard one: both ends of every connection are in this process,
// plus the proxy's upstream sockets (up to a wave of them) and the fixtures' own. 4,000+ at
// full size; a container with nofile=1024 gets about 190 of each.
int connections_per_kind() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) getrlimit(RLIMIT_NOFILE, &r);
  }
  const long limit = r.rlim_cur == RLIM_INFINITY ? 1L << 20 : static_cast<long>(r.rlim_cur);
  const long margin = kWave + 150;
  return static_cast<int>(std::clamp<long>((limit - margin) / 4, 0, kWanted));
}

// Only what the test needs from the config: everything else (timeouts, limits, threads)
// is the default, which is what this test is about.

// Connects and sends `bytes`, then leaves the connection as it is; counts successes.
// (`bytes` by value: a coroutine outlives the full-expression that created its arguments.)
asio::awaitable<void> open_and_send(tcp::socket& s, tcp::endpoint ep, std::string bytes, int& ok) {
  auto [cec] = co_await s.async_connect(ep, as_tuple(use_awaitable));
  if (cec) co_return;
  auto [wec, n] = co_await asio::async_write(s, asio::buffer(bytes), as_tuple(use_awaitable));
  if (!wec) ++ok;
}

// One keep-alive request on a connected socket; counts 200s that keep the connection.
asio::awaitable<void> request_once(tcp::socket& s, int& ok) {
  static const std::string request = "GET /idle HTTP/1.1\r\nHost: t\r\n\r\n";
  auto [wec, n] = co_await asio::async_write(s, asio::buffer(request), as_tuple(use_awaitable));
  if (wec) co_return;
  beast::flat_buffer buffer;
  Response res;
  auto [rec, rn] = co_await bhttp::async_read(s, buffer, res, as_tuple(use_awaitable));
  if (!rec && res.result_int() == 200 && res.keep_alive()) ++ok;
}

// Connects, completes one keep-alive request and keeps the connection.
asio::awaitable<void> open_and_request(tcp::socket& s, tcp::endpoint ep, int& ok) {
  auto [cec] = co_await s.async_connect(ep, as_tuple(use_awaitable));
  if (!cec) co_await request_once(s, ok);
}

// Runs `ioc` until its work is done, at most `limit`.
void run(asio::io_context& ioc, std::chrono::seconds limit) {
  ioc.restart();
  ioc.run_for(limit);
}

// Waits (bounded) until the proxy's open-connection gauge satisfies `pred`: the gauge is the
// only view of "the proxy has accepted them all", there is no read to block on.
template <typename Pred>
bool gauge_reaches(Proxy& proxy, Pred pred, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred(proxy.metrics().active_connections.load())) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(Abuse, StalledAndIdleConnectionsDoNotStarveANormalClientOrGrowMemory) {
  const int n_stalled = connections_per_kind();
  const int n_idle = n_stalled;
  // CI proves the number the docs state (a thousand of each), not whatever fits: a shrunken
  // run there is a failure. A developer's machine with a low limit still runs what fits.
  const int needed = in_ci() ? kWanted : kFewest;
  if (n_stalled < needed)
    FLOODGATE_CANNOT_RUN("the descriptor limit (RLIMIT_NOFILE) allows only "
                         << n_stalled << " connections of each kind; " << needed
                         << " are needed (raise it with ulimit -n)");
  Origin origin;
  Proxy proxy(one_route_config(origin));
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), proxy.port());

  // Warm up the request path (upstream connection, allocator arenas of both workers) so
  // that the baseline is the proxy at work, not the proxy before its first request.
  for (int i = 0; i < 20; ++i) {
    auto r = get(proxy.port(), "/warm");
    ASSERT_TRUE(r && r->result_int() == 200);
  }
  const long rss_before = rss_kib();

  asio::io_context ioc;
  std::list<tcp::socket> stalled, idle;  // list: the coroutines hold references
  int stalled_ok = 0, idle_ok = 0;
  const auto opening = std::chrono::steady_clock::now();
  // A header that is started and never finished: each holds a session in header_read.
  for (int i = 0; i < n_stalled; ++i)
    asio::co_spawn(ioc,
                   open_and_send(stalled.emplace_back(ioc), ep,
                                 "GET /stall HTTP/1.1\r\nHost: t\r\nX-Stall: ", stalled_ok),
                   asio::detached);
  run(ioc, 20s);
  ASSERT_EQ(stalled_ok, n_stalled);
  ASSERT_TRUE(gauge_reaches(
      proxy, [&](auto n) { return n >= n_stalled; }, 5s));
  const long rss_stalled = rss_kib();
  // Idle keep-alive connections after one request each, opened a hundred at a time like
  // clients arriving, not as one synchronized burst through the origin.
  for (int opened = 0; opened < n_idle; opened += kWave) {
    for (int i = opened; i < std::min(n_idle, opened + kWave); ++i)
      asio::co_spawn(ioc, open_and_request(idle.emplace_back(ioc), ep, idle_ok), asio::detached);
    run(ioc, 20s);
  }
  const auto opened_in = std::chrono::steady_clock::now() - opening;
  ASSERT_EQ(idle_ok, n_idle);
  ASSERT_TRUE(gauge_reaches(
      proxy, [&](auto n) { return n >= n_stalled + n_idle; }, 5s))
      << proxy.metrics().active_connections.load() << " connections open at the proxy";

  // The normal client, on a fresh connection each time: accepted and answered promptly.
  std::chrono::steady_clock::duration slowest{};
  for (int i = 0; i < 50; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = get(proxy.port(), "/normal/" + std::to_string(i));
    auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(r) << "request " << i;
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_LT(took, 1s) << "request " << i;
    slowest = std::max(slowest, took);
  }
  const long rss_after = rss_kib();
  const long growth_kib = rss_after - rss_before;
  // Nothing was cut off early (default timeouts: header_read 10 s, idle 60 s); the normal
  // client's last connection is let go of asynchronously, hence the wait...
  EXPECT_TRUE(gauge_reaches(
      proxy, [&](auto n) { return n == n_stalled + n_idle; }, 5s))
      << proxy.metrics().active_connections.load() << " connections open at the proxy";
  // ...and the idle connections are still good keep-alive connections.
  int reused = 0;
  auto it = idle.begin();
  for (int i = 0; i < 10; ++i, ++it) asio::co_spawn(ioc, request_once(*it, reused), asio::detached);
  run(ioc, 5s);
  EXPECT_EQ(reused, 10);

  auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count() / 1000.0;
  };
  std::cout << "[ abuse ] " << n_stalled << " stalled + " << n_idle
            << " idle connections opened in " << ms(opened_in) << " ms; RSS " << rss_before
            << " KiB -> " << rss_after << " KiB: +" << growth_kib << " KiB ("
            << rss_stalled - rss_before << " KiB for the stalled, " << rss_after - rss_stalled
            << " KiB for the idle; " << growth_kib * 1024 / (n_stalled + n_idle)
            << " B/connection, the test's own ends included)\n"
            << "[ abuse ] normal client meanwhile: 50 requests on fresh connections, slowest "
            << ms(slowest) << " ms\n";
  // Measured: +21.5 MiB (about 11 KiB per connection, both ends and the test's coroutine
  // frames included; the proxy's per-connection body buffer is 16 KiB, mostly untouched
  // while a connection waits). The bound is twice that: what it catches is per-connection
  // memory that grows with what a client sends or how long it waits, not allocator noise.
  // Fewer connections (a low descriptor limit) scale it down, to no less than 8 MiB.
  // (Not under a sanitizer: its shadow memory multiplies every allocation.)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_LT(growth_kib, std::max(8L * 1024, 44L * 1024 * (n_stalled + n_idle) / (2 * kWanted)));
#endif

  // Cleanup: every socket closed, and the proxy lets go of every session.
  for (auto& s : stalled) s.close();
  for (auto& s : idle) s.close();
  EXPECT_TRUE(gauge_reaches(
      proxy, [](auto n) { return n == 0; }, 5s))
      << proxy.metrics().active_connections.load() << " sessions left after every client closed";
}

}  // namespace
}  // namespace floodgate::testing
