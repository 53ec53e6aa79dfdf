// One table of cases, two stores: the embedded store (C++ algorithms) and the Redis store
// (lua/acquire.lua on a real redis-server) must give the same decisions, step by step. Both
// read the same fake clock here: the Redis store passes it to the tests' function library
// (test_library.hpp), whose clock honours it; the shipped library reads Redis's TIME whatever
// it is sent (RedisClock.TheShippedLibraryDecidesAtRedisTimeWhateverItIsSent, below).
#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <iostream>
#include <random>

#include "floodgate/limit/utc_time.hpp"
#include "floodgate/store/memory_store.hpp"
#include "floodgate/store/redis_store.hpp"
#include "redis_server.hpp"
#include "test_library.hpp"

namespace floodgate::testing {
namespace {

using config::Algorithm;
using limit::kMicrosPerSecond;
using limit::Micros;

limit::Params params(Algorithm a, std::int64_t capacity, double rate, Micros window) {
  limit::Params p;
  p.algorithm = a;
  p.capacity = capacity;
  p.per_second = rate;
  p.window = window;
  return p;
}

// Drives a LimitStore from a test thread: runs the io_context until the completion arrives.
class Driver {
 public:
  // `injected`: the tests' library, deciding at `clock`'s time; else the shipped one, which is
  // sent that time too and must ignore it.
  Driver(RedisServer& redis, const limit::Clock& clock, bool injected = true)
      : log_(std::make_shared<spdlog::logger>("diff",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>())) {
    log_->set_level(spdlog::level::warn);
    store::RedisStoreOptions o;
    o.port = redis.port();
    o.timeout = std::chrono::milliseconds(2000);
    o.test_time = {&clock, injected ? test_library_body() : std::string_view()};
    o.instance_id = "diff";
    redis_ = store::make_redis_store(ioc_, o, *log_);
  }

  store::AcquireResult acquire(std::vector<store::Item> items) {
    std::optional<store::AcquireResult> result;
    redis_->acquire(std::move(items), [&](store::AcquireResult r) { result = std::move(r); });
    ioc_.restart();
    while (!result && ioc_.run_one_for(std::chrono::seconds(5))) {
    }
    if (!result) return store::StoreError::timeout;
    return *result;
  }

  // The connection comes up asynchronously: retry until the first decision succeeds.
  bool wait_connected() {
    for (int i = 0; i < 100; ++i) {
      ioc_.restart();
      ioc_.run_for(std::chrono::milliseconds(20));
      auto r = acquire(
          {{"diff:probe", params(Algorithm::fixed_window, 1000, 0, kMicrosPerSecond), 0, true}});
      if (std::holds_alternative<store::Outcome>(r)) return true;
    }
    return false;
  }

  store::LimitStore& store() { return *redis_; }
  void run_for(std::chrono::milliseconds d) {
    ioc_.restart();
    ioc_.run_for(d);
  }

 private:
  asio::io_context ioc_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<store::LimitStore> redis_;
};

void expect_same(const store::Outcome& mem, const store::Outcome& red, const std::string& where) {
  ASSERT_EQ(mem.admitted, red.admitted) << where;
  ASSERT_EQ(mem.decisions.size(), red.decisions.size()) << where;
  EXPECT_EQ(mem.now, red.now) << where;
  for (std::size_t i = 0; i < mem.decisions.size(); ++i) {
    const auto& a = mem.decisions[i];
    const auto& b = red.decisions[i];
    EXPECT_EQ(a.admitted, b.admitted) << where << " item " << i;
    EXPECT_EQ(a.limit, b.limit) << where << " item " << i;
    EXPECT_EQ(a.remaining, b.remaining) << where << " item " << i;
    EXPECT_EQ(a.reset_after, b.reset_after) << where << " item " << i;
    EXPECT_EQ(a.retry_after, b.retry_after) << where << " item " << i;
    EXPECT_EQ(a.granted, b.granted) << where << " item " << i;
    EXPECT_EQ(a.delay, b.delay) << where << " item " << i;
  }
}

// on_exceed: delay: `allowance` units beyond the burst (max_delay's worth), admitted with a
// delay.
limit::Params delayed(limit::Params p, std::int64_t allowance) {
  p.max_delay =
      static_cast<Micros>(static_cast<double>(allowance) / p.per_second * kMicrosPerSecond);
  return p;
}

// The library the binary loads takes no time from its caller: sent a time twenty-six years
// back (as the tests' library is), it decides at Redis's TIME all the same, and a fixed
// window's state expires at the end of Redis's window, not that one's. The tests' library,
// sent the same, decides then.
TEST(RedisClock, TheShippedLibraryDecidesAtRedisTimeWhateverItIsSent) {
  RedisServer redis;
  const Micros back_then = 946'684'800 * kMicrosPerSecond;  // 2000-01-01T00:00:00Z
  limit::FakeClock clock(back_then);
  const auto fixed = params(Algorithm::fixed_window, 5, 0, 3600 * kMicrosPerSecond);
  for (const bool injected : {false, true}) {
    Driver driver(redis, clock, injected);
    ASSERT_TRUE(driver.wait_connected());
    const std::string key = injected ? "clock:injected" : "clock:shipped";
    const Micros before = limit::SystemClock().now();
    auto r = driver.acquire({{key, fixed, 1, true}});
    const Micros after = limit::SystemClock().now();
    ASSERT_TRUE(std::holds_alternative<store::Outcome>(r)) << injected;
    const auto& o = std::get<store::Outcome>(r);
    ASSERT_TRUE(o.admitted);
    ASSERT_EQ(o.decisions.size(), 1u);
    if (injected) {
      EXPECT_EQ(o.now, back_then);
      EXPECT_EQ(o.decisions[0].reset_after, 3600 * kMicrosPerSecond);  // a whole hour from :00
    } else {
      // Redis's clock and this process's are the same machine's: within the call's span.
      EXPECT_GE(o.now, before - 1000);
      EXPECT_LE(o.now, after + 1000);
      const Micros hour = 3600 * kMicrosPerSecond;
      EXPECT_EQ(o.decisions[0].reset_after, hour - o.now % hour);  // the end of Redis's hour
    }
    std::cout << "[ clock ] " << (injected ? "tests' library" : "shipped library")
              << " sent 2000-01-01T00:00:00Z decided at " << o.now
              << " us (this process: " << before << ")\n";
  }
}

struct Case {
  const char* name;
  limit::Params p;
};

class Differential : public ::testing::TestWithParam<Case> {};

TEST_P(Differential, RandomTrafficGetsTheSameDecisions) {
  RedisServer redis;
  limit::FakeClock clock(1'800'000'000 * kMicrosPerSecond + 123'456);
  store::MemoryState memory(clock, 100'000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  const auto p = GetParam().p;
  std::mt19937_64 rng(7 + static_cast<unsigned>(p.algorithm));
  const Micros step =
      p.window > 0 ? p.window / 7 : static_cast<Micros>(kMicrosPerSecond / p.per_second * 0.8);
  int admitted = 0, refused = 0, delayed = 0;
  for (int i = 0; i < 300; ++i) {
    // Mostly small steps (bursts and refusals), sometimes long gaps (refill, expiry).
    Micros dt = rng() % 10 == 0 ? step * static_cast<Micros>(rng() % 20)
                                : static_cast<Micros>(rng() % std::max<Micros>(step, 2));
    clock.advance(dt);
    std::string key = "diff:" + std::string(GetParam().name) + ":" + std::to_string(rng() % 3);
    std::int64_t cost = p.algorithm == Algorithm::concurrency
                            ? 1
                            : static_cast<std::int64_t>(rng() % (p.capacity / 2 + 1));
    std::vector<store::Item> items{{key, p, cost, true, "lease" + std::to_string(i)}};
    if (rng() % 4 == 0)  // a second limit on the same request: all-or-nothing across both
      items.push_back({key + ":b", params(Algorithm::fixed_window, 6, 0, 2 * kMicrosPerSecond), 1,
                       rng() % 2 == 0, "lease" + std::to_string(i)});
    auto m = memory.acquire(items);
    auto r = driver.acquire(items);
    ASSERT_TRUE(std::holds_alternative<store::Outcome>(r)) << "step " << i;
    expect_same(m, std::get<store::Outcome>(r),
                std::string(GetParam().name) + " step " + std::to_string(i));
    (m.admitted ? admitted : refused)++;
    if (m.admitted && m.decisions.front().delay > 0) ++delayed;
    if (::testing::Test::HasFailure()) return;
  }
  // The table exercised both answers (and a delay allowance, where there is one).
  EXPECT_GT(admitted, 20);
  EXPECT_GT(refused, 20);
  if (p.max_delay > 0) {
    EXPECT_GT(delayed, 20);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, Differential,
    ::testing::Values(
        Case{"token_bucket", params(Algorithm::token_bucket, 10, 5, 0)},
        Case{"token_bucket_fractional", params(Algorithm::token_bucket, 7, 0.5, 0)},
        Case{"gcra", params(Algorithm::gcra, 10, 5, 0)},
        Case{"sliding_window", params(Algorithm::sliding_window, 20, 0, 10 * kMicrosPerSecond)},
        Case{"sliding_log", params(Algorithm::sliding_log, 12, 0, 10 * kMicrosPerSecond)},
        Case{"fixed_window", params(Algorithm::fixed_window, 15, 0, 5 * kMicrosPerSecond)},
        Case{"token_bucket_delay", delayed(params(Algorithm::token_bucket, 10, 5, 0), 5)},
        Case{"gcra_delay", delayed(params(Algorithm::gcra, 10, 5, 0), 2)}),
    [](const auto& info) { return std::string(info.param.name); });

std::shared_ptr<const calendar::Period> period(calendar::PeriodUnit unit, int anchor,
                                               const char* zone) {
  auto z = calendar::TimeZone::load(zone, calendar::TimeZone::default_dir());
  EXPECT_TRUE(std::holds_alternative<calendar::TimeZone>(z)) << zone;
  calendar::Period p{unit, anchor, nullptr};
  if (auto* tz = std::get_if<calendar::TimeZone>(&z))
    p.zone = std::make_shared<const calendar::TimeZone>(std::move(*tz));
  return std::make_shared<const calendar::Period>(std::move(p));
}

limit::Params quota(std::int64_t limit, std::shared_ptr<const calendar::Period> period) {
  auto p = params(Algorithm::quota, limit, 0, 0);
  p.period = std::move(period);
  return p;
}

// Quotas: the script is sent the periods around the proxy's clock and finds Redis's in them
// (the same clock here), so both stores must agree across Berlin's spring-forward day and
// March's end, with settlements mixed in.
TEST(DifferentialQuota, CalendarPeriodsGiveTheSameDecisions) {
  RedisServer redis;
  limit::FakeClock clock(limit::micros_of(2026, 3, 26, 12, 0, 0) + 123'456);
  store::MemoryState memory(clock, 100'000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  std::mt19937_64 rng(11);
  const limit::Params quotas[] = {
      quota(8, period(calendar::PeriodUnit::day, 1, "Europe/Berlin")),
      quota(40, period(calendar::PeriodUnit::month, 1, "Europe/Berlin")),
      quota(30, period(calendar::PeriodUnit::week, 7, "America/Santiago"))};
  int admitted = 0, refused = 0;
  for (int i = 0; i < 400; ++i) {
    clock.advance(static_cast<Micros>(rng() % (2 * 3600)) * kMicrosPerSecond);  // 12 days
    const auto& p = quotas[i % 3];
    std::string key = "diff:quota:" + std::to_string(i % 3) + ":" + std::to_string(rng() % 2);
    std::vector<store::Item> items{{key, p, static_cast<std::int64_t>(rng() % 4), true, ""}};
    auto m = memory.acquire(items);
    auto r = driver.acquire(items);
    ASSERT_TRUE(std::holds_alternative<store::Outcome>(r)) << "step " << i;
    expect_same(m, std::get<store::Outcome>(r), "quota step " + std::to_string(i));
    (m.admitted ? admitted : refused)++;
    if (m.admitted && rng() % 3 == 0) {  // a settlement: the true cost differed
      const auto delta = static_cast<std::int64_t>(rng() % 5) - 2;
      memory.adjust(items[0], delta);
      driver.store().adjust(items[0], delta);
      driver.run_for(std::chrono::milliseconds(20));
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(admitted, 50);
  EXPECT_GT(refused, 50);
}

TEST(DifferentialSettle, AdjustGivesTheSameStateInBothStores) {
  RedisServer redis;
  limit::FakeClock clock(1'800'000'000 * kMicrosPerSecond);
  store::MemoryState memory(clock, 1000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  for (auto p : {params(Algorithm::token_bucket, 100, 10, 0), params(Algorithm::gcra, 100, 10, 0),
                 params(Algorithm::sliding_window, 100, 0, 60 * kMicrosPerSecond),
                 params(Algorithm::fixed_window, 100, 0, 60 * kMicrosPerSecond)}) {
    std::string key = std::string("settle:") + config::to_string(p.algorithm);
    std::vector<store::Item> items{{key, p, 10, true, ""}};
    memory.acquire(items);
    driver.acquire(items);
    memory.adjust(items[0], 150);  // far past the capacity: debt is bounded
    driver.store().adjust(items[0], 150);
    driver.run_for(std::chrono::milliseconds(100));
    clock.advance(kMicrosPerSecond);
    auto m = memory.acquire(items);
    auto r = driver.acquire(items);
    ASSERT_TRUE(std::holds_alternative<store::Outcome>(r));
    expect_same(m, std::get<store::Outcome>(r), key);
    memory.adjust(items[0], -40);  // refund
    driver.store().adjust(items[0], -40);
    driver.run_for(std::chrono::milliseconds(100));
    auto m2 = memory.acquire(items);
    auto r2 = driver.acquire(items);
    expect_same(m2, std::get<store::Outcome>(r2), key + " after refund");
  }
}

TEST(DifferentialConcurrency, LeasesAcquireAndReleaseAlike) {
  RedisServer redis;
  limit::FakeClock clock(1'800'000'000 * kMicrosPerSecond);
  store::MemoryState memory(clock, 1000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  auto p = params(Algorithm::concurrency, 2, 0, 0);
  std::vector<std::vector<store::Item>> held;
  for (int i = 0; i < 3; ++i) {
    std::vector<store::Item> items{{"conc", p, 1, true, "lease-" + std::to_string(i)}};
    auto m = memory.acquire(items);
    auto r = driver.acquire(items);
    expect_same(m, std::get<store::Outcome>(r), "acquire " + std::to_string(i));
    if (m.admitted) held.push_back(items);
  }
  ASSERT_EQ(held.size(), 2u);
  memory.release(held[0][0]);
  driver.store().release(held[0][0]);
  driver.run_for(std::chrono::milliseconds(100));
  std::vector<store::Item> again{{"conc", p, 1, true, "lease-again"}};
  auto m = memory.acquire(again);
  auto r = driver.acquire(again);
  EXPECT_TRUE(m.admitted);
  expect_same(m, std::get<store::Outcome>(r), "after release");
}

// An instance that dies holding a lease never returns it: both stores forget it exactly when
// the lease time (an hour) has passed, not a microsecond sooner.
TEST(DifferentialConcurrency, ALeaseNeverReturnedExpiresAfterTheLeaseTimeInBoth) {
  RedisServer redis;
  limit::FakeClock clock(1'800'000'000 * kMicrosPerSecond);
  store::MemoryState memory(clock, 1000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  auto p = params(Algorithm::concurrency, 1, 0, 0);
  auto request = [&](const std::string& lease) {
    std::vector<store::Item> items{{"conc:dead", p, 1, true, lease}};
    auto m = memory.acquire(items);
    auto r = driver.acquire(items);
    EXPECT_TRUE(std::holds_alternative<store::Outcome>(r));
    if (auto* o = std::get_if<store::Outcome>(&r)) expect_same(m, *o, lease);
    return m.admitted;
  };
  ASSERT_TRUE(request("held-by-the-dead"));
  clock.advance(3600 * kMicrosPerSecond - 1);
  EXPECT_FALSE(request("just-before-the-lease-time"));
  clock.advance(1);
  EXPECT_TRUE(request("at-the-lease-time"));
}

// Leases (SPEC "Leased decisions"): three holders take units (partial grants), report them
// spent, give them back and let them expire, on buckets where what is held cannot refill and
// on windows. The embedded store keeps the same record of who holds what as the library
// (lua/prelude.lua), so that `floodgate replay --lease` decides as Redis would.
class DifferentialLease : public ::testing::TestWithParam<Case> {};

TEST_P(DifferentialLease, HoldersTakeSpendAndReturnAlike) {
  RedisServer redis;
  limit::FakeClock clock(1'800'000'000 * kMicrosPerSecond + 654'321);
  store::MemoryState memory(clock, 100'000);
  Driver driver(redis, clock);
  ASSERT_TRUE(driver.wait_connected());
  const auto p = GetParam().p;
  std::mt19937_64 rng(31 + static_cast<unsigned>(p.algorithm));
  const Micros ttl = 2 * kMicrosPerSecond;
  const std::string key = std::string("difflease:") + GetParam().name;
  const char* holders[] = {"holder-a", "holder-b", "holder-c"};
  std::int64_t granted[3] = {0, 0, 0};  // per holder: taken, not yet reported or returned
  int leases = 0, partial = 0, refused = 0, returns = 0;
  auto item_for = [&](int h) {
    store::Item item{key, p, 1, true, ""};
    item.leased.size = 8;
    item.leased.ttl = ttl;
    item.leased.holder = holders[h];
    return item;
  };
  for (int i = 0; i < 400; ++i) {
    clock.advance(rng() % 8 == 0 ? static_cast<Micros>(rng() % (3 * ttl))
                                 : static_cast<Micros>(rng() % 150'000));
    const int h = static_cast<int>(rng() % 3);
    const std::string where = std::string(GetParam().name) + " step " + std::to_string(i);
    auto item = item_for(h);
    const auto op = rng() % 10;
    if (op < 7) {  // a grant: for a request (cost) and the hand (take_up_to), reporting spent
      item.cost = static_cast<std::int64_t>(rng() % 3);
      item.take_up_to = rng() % 4 == 0 ? 0 : item.cost + static_cast<std::int64_t>(rng() % 8);
      item.leased.settled = std::min<std::int64_t>(granted[h], rng() % 6);
      granted[h] -= item.leased.settled;
      auto m = memory.acquire(std::span(&item, 1));
      auto r = driver.acquire({item});
      ASSERT_TRUE(std::holds_alternative<store::Outcome>(r)) << where;
      expect_same(m, std::get<store::Outcome>(r), where);
      if (m.admitted) {
        ++leases;
        granted[h] += m.decisions[0].granted;
        if (item.take_up_to > 0 && m.decisions[0].granted < item.take_up_to) ++partial;
      } else {
        ++refused;
      }
    } else {  // units back (unused), or a settlement on the key, with a report
      const auto units = std::min<std::int64_t>(granted[h], 1 + rng() % 4);
      item.leased.settled = std::min<std::int64_t>(granted[h] - units, rng() % 3);
      granted[h] -= units + item.leased.settled;
      item.leased.returning = op < 9;
      const std::int64_t delta =
          item.leased.returning ? -units : static_cast<std::int64_t>(rng() % 5) - 2;
      if (item.leased.returning) ++returns;
      // (Sent at once on the connection the next decision takes: Redis runs it first.)
      memory.adjust(item, delta);
      driver.store().adjust(item, delta);
    }
    if (::testing::Test::HasFailure()) return;
    // What a request of nothing would find now, from a holder that takes nothing.
    store::Item probe = item_for(0);
    probe.leased.holder = "holder-probe";
    probe.cost = 0;
    auto m = memory.acquire(std::span(&probe, 1));
    auto r = driver.acquire({probe});
    ASSERT_TRUE(std::holds_alternative<store::Outcome>(r)) << where;
    expect_same(m, std::get<store::Outcome>(r), where + " (probe)");
    if (::testing::Test::HasFailure()) return;
  }
  // The table exercised grants, partial grants, refusals and returns.
  EXPECT_GT(leases, 50);
  EXPECT_GT(partial, 10);
  EXPECT_GT(refused, 10);
  EXPECT_GT(returns, 10);
}

INSTANTIATE_TEST_SUITE_P(
    LeasedAlgorithms, DifferentialLease,
    ::testing::Values(
        Case{"token_bucket", params(Algorithm::token_bucket, 20, 10, 0)},
        Case{"gcra", params(Algorithm::gcra, 20, 10, 0)},
        Case{"fixed_window", params(Algorithm::fixed_window, 20, 0, 3 * kMicrosPerSecond)},
        Case{"sliding_window", params(Algorithm::sliding_window, 20, 0, 3 * kMicrosPerSecond)}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace floodgate::testing
