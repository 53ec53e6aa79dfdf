// The Redis store through the proxy: exact limits across two floodgate processes under a
// burst, Redis's clock rather than the PoP's, and the failure policies with Redis killed,
// frozen and back.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <iostream>
#include <thread>

#include "floodgate_process.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

TEST(RedisExactness, TwoProcessesAdmitExactlyTheLimitUnderABurst) {
  RedisServer redis;
  Origin origin;
  const std::string routes = R"(
  - name: tb
    match: { path_prefix: /tb }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 200, refill_rate: 1/h, key: [route] }]
  - name: gcra
    match: { path_prefix: /gcra }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: gcra, capacity: 200, refill_rate: 1/h, key: [route] }]
  - name: log
    match: { path_prefix: /log }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: sliding_log, limit: 200, window: 1h, key: [route] }]
  - name: fw
    match: { path_prefix: /fw }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: fixed_window, limit: 200, window: 1h, key: [route] }]
  - name: up
    match: { path_prefix: /__up }
    upstream: origin
)";
  auto p1 = free_port(), p2 = free_port();
  auto c1 = write_temp_file("exact1", redis_config(p1, origin.port(), redis.port(), routes, "2s"));
  auto c2 = write_temp_file("exact2", redis_config(p2, origin.port(), redis.port(), routes, "2s"));
  ChildProcess fg1({FLOODGATE_BINARY, "--config", c1});
  ChildProcess fg2({FLOODGATE_BINARY, "--config", c2});
  wait_serving(p1);
  wait_serving(p2);
  for (std::string target : {"/tb", "/gcra", "/log", "/fw"}) {
    get(origin.port(), "/__reset");
    auto statuses = burst({p1, p2}, target, 500);
    EXPECT_EQ(statuses[200], 200) << target;
    EXPECT_EQ(statuses[429], 300) << target;
    EXPECT_EQ(origin.requests(), 200u) << target;
    std::cout << "[ exactness ] " << target << ": 500 concurrent over 2 instances -> "
              << statuses[200] << " x 200, " << statuses[429] << " x 429, origin counted "
              << origin.requests() << "\n";
  }
}

TEST(RedisClock, InstancesWithSkewedClocksShareOneWindow) {
  RedisServer redis;
  Origin origin;
  const std::string routes = R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: hour, algorithm: fixed_window, limit: 6, window: 1h, key: [route] }]
)";
  const limit::Micros year = 365LL * 24 * 3600 * limit::kMicrosPerSecond;
  limit::SystemClock real;
  limit::FakeClock ahead(real.now() + year), behind(real.now() - year);
  Proxy fast(redis_config(0, origin.port(), redis.port(), routes, "1s"), &ahead);
  Proxy slow(redis_config(0, origin.port(), redis.port(), routes, "1s"), &behind);
  int admitted = 0;
  std::int64_t reset = 0;
  for (int i = 0; i < 12; ++i) {
    auto r = get(i % 2 ? fast.port() : slow.port(), "/x");
    ASSERT_TRUE(r);
    if (r->result_int() == 200) {
      ++admitted;
      reset = std::stoll(std::string(r->base()["X-RateLimit-Reset"]));
    }
  }
  // One window, decided by Redis's clock: a per-PoP clock would give each instance its own.
  EXPECT_EQ(admitted, 6);
  auto now_s = real.now() / limit::kMicrosPerSecond;
  EXPECT_GT(reset, now_s);
  EXPECT_LE(reset, now_s + 3600);  // the end of Redis's current hour, not a year off
}

// A quota's period is Redis's, whatever the proxy's clock: each proxy sends the periods around
// its own time and Redis picks the one holding its TIME (acquire.lua's period_of). Proxies a
// day and three days ahead and behind (every branch: inside the periods sent, and beyond them
// on either side) all count one day's budget, and every one says it resets at Redis's
// midnight.
TEST(RedisClock, ProxiesDaysOffShareRedisDayOfAQuota) {
  RedisServer redis;
  Origin origin;
  const std::string routes = R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: day, algorithm: quota, period: day, timezone: UTC, limit: 8, key: [route] }]
)";
  const limit::Micros day = 24LL * 3600 * limit::kMicrosPerSecond;
  limit::SystemClock real;
  if (day - real.now() % day < 30 * limit::kMicrosPerSecond)  // UTC's day ends in the test
    std::this_thread::sleep_for(std::chrono::microseconds(day - real.now() % day) + 2s);
  const auto midnight = std::to_string((real.now() / day + 1) * day / limit::kMicrosPerSecond);
  std::vector<std::unique_ptr<limit::FakeClock>> clocks;
  std::vector<std::unique_ptr<Proxy>> proxies;
  for (int off : {-3, -1, 1, 3}) {
    clocks.push_back(std::make_unique<limit::FakeClock>(real.now() + off * day));
    proxies.push_back(std::make_unique<Proxy>(
        redis_config(0, origin.port(), redis.port(), routes, "1s"), clocks.back().get()));
  }
  int admitted = 0;
  for (int round = 0; round < 3; ++round)
    for (std::size_t p = 0; p < proxies.size(); ++p) {
      auto r = get(proxies[p]->port(), "/x");
      ASSERT_TRUE(r);
      if (r->result_int() == 200) ++admitted;
      EXPECT_EQ(std::string(r->base()["X-RateLimit-Reset"]), midnight)
          << "proxy " << p << " round " << round << ": " << r->result_int() << " "
          << r->base()["Retry-After"];
    }
  EXPECT_EQ(admitted, 8);  // one budget of 8, not four, and not one per clock's own day
  // Redis keeps the count until its own midnight.
  const auto keys = redis.cli("--scan --pattern 'rl:api:day:*'");
  ASSERT_FALSE(keys.empty());
  const auto pttl = std::stoll(redis.cli("PTTL '" + keys.substr(0, keys.find('\n')) + "'"));
  EXPECT_NEAR(static_cast<double>(pttl) * 1000, static_cast<double>(day - real.now() % day), 3e6);
}

struct Policies : ::testing::Test {
  RedisServer redis;
  Origin origin;
  std::unique_ptr<Proxy> proxy;
  void SetUp() override {
    proxy = std::make_unique<Proxy>(
        redis_config(0, origin.port(), redis.port(), kOpenAndClosedRoutes + R"(  - name: probe
    match: { path_prefix: /probe }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
  - name: local
    match: { path_prefix: /local }
    upstream: origin
    on_store_error: local
    limits: [{ name: l, algorithm: token_bucket, capacity: 6, refill_rate: 1/h, key: [route] }]
)"));
    wait_until_enforced();
  }
  // Until Redis decides again on every worker (each has its own connection): 16 decisions
  // in a row, over new connections that the kernel spreads across the workers.
  Ms wait_until_enforced(Ms limit = Ms(5000)) {
    auto start = std::chrono::steady_clock::now();
    int streak = 0;
    while (streak < 16 && std::chrono::steady_clock::now() - start < limit) {
      auto r = get(proxy->port(), "/probe");
      streak = r && r->result_int() == 200 ? streak + 1 : 0;
      if (streak == 0) std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(streak, 16) << "limits not enforced by Redis within " << limit.count() << " ms";
    redis.cli("FLUSHALL");
    return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
  }
  std::pair<int, Ms> timed(const std::string& target) {
    auto start = std::chrono::steady_clock::now();
    auto r = get(proxy->port(), target);
    return {r ? r->result_int() : -1,
            std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start)};
  }
};

void expect_policies_while_store_is_down(Policies& t, const char* what) {
  // fail_open: forwarded, within the 50 ms deadline plus a margin for this busy box.
  for (int i = 0; i < 5; ++i) {
    auto [status, took] = t.timed("/open/x");
    EXPECT_EQ(status, 200) << what;
    EXPECT_LT(took, Ms(50 + 150)) << what;
  }
  // fail_closed: 503 with Retry-After: 1.
  auto r = get(t.proxy->port(), "/closed/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 503) << what;
  EXPECT_EQ(std::string(r->base()["Retry-After"]), "1");
  // local: still limiting, each of the 2 instances granting ceil(6 / 2) = 3.
  int admitted = 0;
  for (int i = 0; i < 6; ++i) admitted += t.timed("/local/x").first == 200;
  EXPECT_EQ(admitted, 3) << what;
}

TEST_F(Policies, RedisKilledThenBack) {
  // (Neither a refusal nor the last token before the outage: a caller refused, or one whose
  // admission took the last unit, is remembered by its worker until its Retry-After, store or
  // no store, which is not what this test is about.)
  for (int i = 0; i < 2; ++i) EXPECT_EQ(timed("/closed/x").first, 200);
  redis.kill();
  expect_policies_while_store_is_down(*this, "killed");
  redis.restart();  // empty: counters start again
  auto took = wait_until_enforced();
  std::cout << "[ faults ] killed Redis back: limits enforced by Redis on every worker again after "
            << took.count() << " ms\n";
  EXPECT_LT(took, Ms(2000));
  int admitted = 0;
  for (int i = 0; i < 5; ++i) admitted += timed("/closed/z").first == 200;
  EXPECT_EQ(admitted, 3);
}

TEST_F(Policies, RedisFrozenThenThawed) {
  const auto timeouts = [&] {
    return metric(admin::render_prometheus(proxy->metrics()),
                  R"(floodgate_store_errors_total{kind="timeout"})");
  };
  redis.freeze();
  auto [status, first] = timed("/open/x");  // pays the deadline once
  EXPECT_EQ(status, 200);
  EXPECT_GE(first, Ms(45));
  EXPECT_LT(first, Ms(50 + 150));
  expect_policies_while_store_is_down(*this, "frozen");
  // Each worker has a breaker of its own, open after 3 failed decisions on that worker; the
  // kernel spreads new connections over the workers, so one may have seen fewer so far. More
  // decisions until the store's health says both are open; from then on no request waits
  // for the deadline: none is a store timeout. (Counted, not timed: under a sanitizer on a
  // loaded CI machine an answer that never waited can still take 40 ms.)
  EXPECT_TRUE(eventually(
      [&] {
        timed("/open/w");
        return proxy->server().store_health().first == 0;
      },
      Ms(3000)))
      << "a worker's breaker did not open";
  const auto timed_out = timeouts();
  Ms fast{0};
  for (int i = 0; i < 4; ++i) {
    auto [s2, took] = timed("/open/y");
    EXPECT_EQ(s2, 200);
    fast = std::max(fast, took);
  }
  EXPECT_EQ(timeouts(), timed_out) << "a request waited for the store with both breakers open";
  EXPECT_LT(fast, Ms(50 + 150));
  std::cout << "[ faults ] frozen Redis: first fail_open answer " << first.count()
            << " ms, with the breakers open at most " << fast.count()
            << " ms and no store timeout\n";
  redis.thaw();
  auto took = wait_until_enforced();
  std::cout << "[ faults ] thawed Redis: limits enforced on every worker again after "
            << took.count() << " ms\n";
  EXPECT_LT(took, Ms(2000));
  int admitted = 0;
  for (int i = 0; i < 5; ++i) admitted += timed("/closed/z").first == 200;
  EXPECT_EQ(admitted, 3);
}

TEST_F(Policies, AFlushedLibraryIsReloadedTransparently) {
  EXPECT_EQ(timed("/closed/a").first, 200);
  redis.cli("FUNCTION FLUSH");
  redis.cli("SCRIPT FLUSH");
  EXPECT_EQ(timed("/closed/b").first, 200);  // "Function not found" -> FUNCTION LOAD, FCALL
  EXPECT_EQ(timed("/closed/c").first, 200);
  EXPECT_EQ(timed("/closed/d").first, 429);
}

TEST_F(Policies, KeysExpireWhenTheirStateIsNeutral) {
  EXPECT_EQ(timed("/closed/a").first, 200);
  auto keys = redis.cli("--scan --pattern 'rl:*'");
  ASSERT_FALSE(keys.empty());
  auto ttl = std::stoll(redis.cli("PTTL " + keys.substr(0, keys.find('\n'))));
  // One token of 3 at 1/h: neutral again in one hour.
  EXPECT_GT(ttl, 3'500'000);
  EXPECT_LE(ttl, 3'600'000);
}

}  // namespace
}  // namespace floodgate::testing
