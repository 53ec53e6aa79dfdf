// Calendar quotas (`algorithm: quota`) through the proxy on a real redis-server: a daily
// token budget of an LLM tenant on Redis's own clock (what production runs: admission,
// refusal, settlement, and the reset at the next local midnight of the zone), then a monthly
// one across the month's end at local midnight in Berlin, where the date is the point: that
// one runs on the tests' function library (test_library.hpp), handed an injected clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "floodgate/limit/utc_time.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

std::string header_or_empty(const Response& r, const char* name) {
  auto it = r.base().find(name);
  return it == r.base().end() ? std::string() : std::string(it->value());
}

std::int64_t unix_seconds(int y, int mo, int d, int h, int mi, int s) {
  return limit::micros_of(y, mo, d, h, mi, s) / limit::kMicrosPerSecond;
}

// A proxy's config: tenants' token budgets of `limit` per `period` in `zone`, estimated up
// front (300) and settled from what the origin reports.
std::string budget_config(std::uint16_t origin, std::uint16_t redis, const std::string& period,
                          const std::string& zone) {
  std::string yaml = R"(
server:
  listen: [127.0.0.1:0]
  threads: 1
upstreams:
  origin: { url: "http://127.0.0.1:{ORIGIN}" }
store:
  backend: redis
  redis: { address: "127.0.0.1:{REDIS}" }
  key_secret: integration-test-secret-0123456789
routes:
  - name: llm
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: {PERIOD}-tokens
        algorithm: quota
        period: {PERIOD}
        timezone: {ZONE}
        limit: 1000
        key: [header:x-tenant]
        cost: { from: header:X-Estimated-Tokens, default: 300, max: 1000 }
        settle: response_header:X-Tokens-Used
)";
  for (auto [from, to] : {std::pair<std::string, std::string>{"{ORIGIN}", std::to_string(origin)},
                          {"{REDIS}", std::to_string(redis)},
                          {"{PERIOD}", period},
                          {"{ZONE}", zone}})
    yaml = substitute(yaml, from, to);
  return yaml;
}

// A tenant's call through `c`: estimated at 300 tokens, `used` reported by the origin.
Response spend(Client& c, const char* tenant, int used) {
  auto r = c.request("GET /respond?X-Tokens-Used=" + std::to_string(used) +
                     " HTTP/1.1\r\nHost: t\r\nX-Tenant: " + tenant +
                     "\r\nX-Estimated-Tokens: 300\r\n\r\n");
  EXPECT_TRUE(r);
  return r ? *r : Response{};
}

// Production's clock: no time is sent, Redis's TIME decides. A day's budget in Kolkata
// (UTC+05:30, no DST: a half-hour offset that UTC's midnight would get wrong).
TEST(Quota, ADailyBudgetOnRedisTimeIsSettledAndResetsAtTheNextLocalMidnight) {
  RedisServer redis;
  Origin origin;
  const std::string zone = "Asia/Kolkata";
  const auto midnight = next_local_midnight(zone);
  const auto now_s = [] { return limit::SystemClock().now() / limit::kMicrosPerSecond; };
  Proxy proxy(budget_config(origin.port(), redis.port(), "day", zone));
  Client c(proxy.port());
  const auto reset = std::to_string(midnight);
  for (int i = 0; i < 3; ++i) {
    auto r = spend(c, "acme", 50);
    ASSERT_EQ(r.result_int(), 200) << i;
    EXPECT_EQ(header_or_empty(r, "X-RateLimit-Remaining"), std::to_string(700 - 50 * i)) << i;
    EXPECT_EQ(header_or_empty(r, "X-RateLimit-Reset"), reset) << i;
    EXPECT_EQ(header_or_empty(r, "RateLimit-Policy"), "\"day-tokens\";q=1000;w=86400");
  }
  EXPECT_EQ(header_or_empty(spend(c, "acme", 300), "X-RateLimit-Remaining"), "550");
  EXPECT_EQ(header_or_empty(spend(c, "acme", 300), "X-RateLimit-Remaining"), "250");
  auto refused = spend(c, "acme", 300);
  ASSERT_EQ(refused.result_int(), 429);
  EXPECT_EQ(header_or_empty(refused, "X-RateLimit-Reset"), reset);
  const auto retry = std::stoll(header_or_empty(refused, "Retry-After"));
  EXPECT_NEAR(static_cast<double>(retry), static_cast<double>(midnight - now_s()), 2.0);
  EXPECT_EQ(spend(c, "globex", 300).result_int(), 200);  // another tenant has its own budget
  EXPECT_EQ(origin.requests(), 6u);                      // the refused call never reached it
  // Redis keeps acme's count until the day ends there, not a day from now.
  const auto keys = redis.cli("--scan --pattern 'rl:llm:day-tokens:*'");
  ASSERT_FALSE(keys.empty());
  const auto first = keys.substr(0, keys.find('\n'));
  const auto pttl = std::stoll(redis.cli("PTTL '" + first + "'"));
  EXPECT_NEAR(static_cast<double>(pttl) / 1000, static_cast<double>(midnight - now_s()), 3.0);
  std::cout << "[ quota ] on Redis's TIME: 1000 a day in " << zone << ", refused with Retry-After "
            << retry << " s, reset " << reset << " (date(1): next local midnight)\n";
}

TEST(Quota, AMonthlyBudgetIsSettledAndStartsAgainAtLocalMidnightOfTheFirst) {
  RedisServer redis;
  Origin origin;
  // 2027-01-31 22:30 UTC is 23:30 in Berlin: half an hour of January left there.
  limit::FakeClock clock(limit::micros_of(2027, 1, 31, 22, 30, 0));
  Proxy proxy(budget_config(origin.port(), redis.port(), "month", "Europe/Berlin"), &clock, nullptr,
              nullptr, /*clock_drives_redis=*/true);
  Client c(proxy.port());
  auto ask = [&](const char* tenant, int used) { return spend(c, tenant, used); };

  const auto february = std::to_string(unix_seconds(2027, 1, 31, 23, 0, 0));  // 00:00 +01:00

  // Each call is charged its estimate (300) up front and settled to what it used (50).
  for (int i = 0; i < 3; ++i) {
    auto r = ask("acme", 50);
    ASSERT_EQ(r.result_int(), 200) << i;
    EXPECT_EQ(header_or_empty(r, "X-RateLimit-Remaining"), std::to_string(700 - 50 * i)) << i;
    EXPECT_EQ(header_or_empty(r, "X-RateLimit-Reset"), february);
    EXPECT_EQ(header_or_empty(r, "RateLimit-Policy"),
              "\"month-tokens\";q=1000;w=2678400");  // 31 days
  }
  // 850 left: two calls that use all 300 fit, the third does not.
  EXPECT_EQ(header_or_empty(ask("acme", 300), "X-RateLimit-Remaining"), "550");
  EXPECT_EQ(header_or_empty(ask("acme", 300), "X-RateLimit-Remaining"), "250");
  auto refused = ask("acme", 300);
  ASSERT_EQ(refused.result_int(), 429);
  EXPECT_EQ(header_or_empty(refused, "Retry-After"), "1800");  // local midnight, not UTC's
  EXPECT_EQ(header_or_empty(refused, "X-RateLimit-Reset"), february);
  EXPECT_EQ(ask("globex", 300).result_int(), 200);  // another tenant has its own budget

  clock.set(limit::micros_of(2027, 1, 31, 22, 59, 59));  // 23:59:59 in Berlin
  refused = ask("acme", 300);
  EXPECT_EQ(refused.result_int(), 429);
  EXPECT_EQ(header_or_empty(refused, "Retry-After"), "1");

  clock.set(limit::micros_of(2027, 1, 31, 23, 0, 0));  // February in Berlin, still January in UTC
  auto fresh = ask("acme", 300);
  ASSERT_EQ(fresh.result_int(), 200);
  EXPECT_EQ(header_or_empty(fresh, "X-RateLimit-Remaining"), "700");
  EXPECT_EQ(header_or_empty(fresh, "X-RateLimit-Reset"),
            std::to_string(unix_seconds(2027, 2, 28, 23, 0, 0)));  // March 1st, 00:00 +01:00
  EXPECT_EQ(header_or_empty(fresh, "RateLimit-Policy"),
            "\"month-tokens\";q=1000;w=2419200");  // 28 days
  EXPECT_EQ(origin.requests(), 7u);                // the refused calls never reached it

  // Redis forgets a count when its period ends: acme's February count expires at March 1st,
  // globex's January one at Berlin's midnight. (PTTL counts from Redis's own clock, the expiry
  // was set from the injected one: what is left of each period, not an instant.)
  std::vector<long long> ttls;
  const auto keys = redis.cli("--scan --pattern 'rl:llm:month-tokens:*'");
  for (std::size_t at = 0; at < keys.size();) {
    auto end = keys.find('\n', at);
    if (end == std::string::npos) end = keys.size();
    ttls.push_back(std::stoll(redis.cli("PTTL '" + keys.substr(at, end - at) + "'")));
    at = end + 1;
  }
  std::sort(ttls.begin(), ttls.end());
  ASSERT_EQ(ttls.size(), 2u);
  EXPECT_NEAR(static_cast<double>(ttls[0]), 1800e3, 5e3);        // 30 minutes
  EXPECT_NEAR(static_cast<double>(ttls[1]), 28 * 86400e3, 5e3);  // 28 days
}

}  // namespace
}  // namespace floodgate::testing
