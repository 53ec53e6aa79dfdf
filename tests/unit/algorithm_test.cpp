// The pure rate-limit algorithms: evaluate / adjust / release / time_to_neutral over explicit
// (params, state, now, cost). No clock and no store: `now` is passed in, at the magnitude of
// real Unix time in microseconds (so floating-point effects at that scale are exercised).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "floodgate/limit/algorithm.hpp"

using floodgate::config::Algorithm;
using floodgate::limit::adjust;
using floodgate::limit::BucketState;
using floodgate::limit::ConcurrencyState;
using floodgate::limit::Decision;
using floodgate::limit::evaluate;
using floodgate::limit::GcraState;
using floodgate::limit::kMicrosPerSecond;
using floodgate::limit::LogState;
using floodgate::limit::Micros;
using floodgate::limit::Params;
using floodgate::limit::release;
using floodgate::limit::State;
using floodgate::limit::time_to_neutral;
using floodgate::limit::WindowState;

namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr Micros kMs = 1000;
// A real Unix time, a multiple of 60 s and of 3600 s: windows of 1 s, 10 s, 60 s and 1 h start
// here.
constexpr Micros T0 = 1'699'999'200LL * kSec;
static_assert(T0 % (3600 * kSec) == 0);

Params bucket(Algorithm a, std::int64_t capacity, double per_second) {
  Params p;
  p.algorithm = a;
  p.capacity = capacity;
  p.per_second = per_second;
  return p;
}
Params token_bucket(std::int64_t capacity, double per_second) {
  return bucket(Algorithm::token_bucket, capacity, per_second);
}
Params gcra(std::int64_t capacity, double per_second) {
  return bucket(Algorithm::gcra, capacity, per_second);
}
Params windowed(Algorithm a, std::int64_t limit, Micros window) {
  Params p;
  p.algorithm = a;
  p.capacity = limit;
  p.window = window;
  return p;
}
Params sliding_window(std::int64_t limit, Micros window) {
  return windowed(Algorithm::sliding_window, limit, window);
}
Params sliding_log(std::int64_t limit, Micros window) {
  return windowed(Algorithm::sliding_log, limit, window);
}
Params fixed_window(std::int64_t limit, Micros window) {
  return windowed(Algorithm::fixed_window, limit, window);
}
// A daily quota in UTC: a fixed window of a calendar day.
Params quota_day(std::int64_t limit) {
  Params p;
  p.algorithm = Algorithm::quota;
  p.capacity = limit;
  p.period = std::make_shared<const floodgate::calendar::Period>(
      floodgate::calendar::Period{floodgate::calendar::PeriodUnit::day, 1, nullptr});
  return p;
}
Params concurrency(std::int64_t limit) {
  Params p;
  p.algorithm = Algorithm::concurrency;
  p.capacity = limit;
  return p;
}

std::string describe(const Params& p) {
  std::ostringstream o;
  o << floodgate::config::to_string(p.algorithm) << "{capacity=" << p.capacity;
  if (p.per_second > 0) o << " rate=" << p.per_second << "/s";
  if (p.window > 0) o << " window=" << p.window << "us";
  o << "}";
  return o.str();
}

std::string describe(const State& s) {
  std::ostringstream o;
  o.precision(17);
  if (std::holds_alternative<std::monostate>(s)) o << "neutral";
  if (auto* b = std::get_if<BucketState>(&s))
    o << "bucket{tokens=" << b->tokens << " updated=" << b->updated << "}";
  if (auto* g = std::get_if<GcraState>(&s))
    o << "gcra{debt=" << g->debt << ",updated=" << g->updated << "}";
  if (auto* w = std::get_if<WindowState>(&s))
    o << "window{start=" << w->start << " current=" << w->current << " previous=" << w->previous
      << "}";
  if (auto* l = std::get_if<LogState>(&s)) {
    o << "log{";
    for (auto& e : l->entries) o << e.at << "x" << e.cost << " ";
    o << "}";
  }
  if (auto* c = std::get_if<ConcurrencyState>(&s)) o << "concurrency{" << c->in_flight << "}";
  return o.str();
}

std::string describe(const Decision& d) {
  std::ostringstream o;
  o << (d.admitted ? "admitted" : "refused") << "{limit=" << d.limit << " remaining=" << d.remaining
    << " reset_after=" << d.reset_after << " retry_after=" << d.retry_after << "}";
  return o.str();
}

::testing::AssertionResult same_decision(const Decision& a, const Decision& b) {
  if (a.admitted == b.admitted && a.limit == b.limit && a.remaining == b.remaining &&
      a.reset_after == b.reset_after && a.retry_after == b.retry_after)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << describe(a) << " != " << describe(b);
}

// One caller's state, committed only when admitted (as the store does).
struct Caller {
  Params p;
  State s;

  Decision hit(Micros now, std::int64_t cost = 1) {
    auto e = evaluate(p, s, now, cost);
    if (e.decision.admitted) s = std::move(e.next);
    return e.decision;
  }
  Decision peek(Micros now, std::int64_t cost = 1) const {
    return evaluate(p, s, now, cost).decision;
  }
  // Admitted requests of `cost` at one instant until the first refusal.
  int burst(Micros now, std::int64_t cost = 1, int max = 100000) {
    int n = 0;
    while (n < max && hit(now, cost).admitted) ++n;
    return n;
  }
};

// ====================================================================== token bucket

TEST(TokenBucket, StartsFullBurstThenRefill) {
  Caller c{token_bucket(10, 5)};  // 10 burst, one token per 200 ms
  for (int i = 1; i <= 10; ++i) {
    auto d = c.hit(T0);
    ASSERT_TRUE(d.admitted) << i;
    EXPECT_EQ(d.limit, 10);
    EXPECT_EQ(d.remaining, 10 - i);
    EXPECT_EQ(d.retry_after, 0);
    EXPECT_EQ(d.reset_after, i * 200 * kMs) << "until the bucket is full again";
  }
  auto refused = c.hit(T0);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, 10);
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_EQ(refused.retry_after, 200 * kMs);
  EXPECT_EQ(refused.reset_after, 2 * kSec);

  EXPECT_FALSE(c.hit(T0 + 200 * kMs - 1).admitted);
  auto one = c.hit(T0 + 200 * kMs);
  EXPECT_TRUE(one.admitted);
  EXPECT_EQ(one.remaining, 0);
  EXPECT_FALSE(c.hit(T0 + 200 * kMs).admitted) << "one token per 200 ms, not more";

  // Half a second later: 2.5 tokens, two whole requests.
  EXPECT_EQ(c.burst(T0 + 700 * kMs), 2);
  // Long after: full again, and never more than capacity.
  EXPECT_EQ(c.burst(T0 + 3600 * kSec), 10);
}

TEST(TokenBucket, FractionalRate) {
  Caller c{token_bucket(3, 0.5)};  // one token every 2 s
  EXPECT_EQ(c.burst(T0), 3);
  auto refused = c.peek(T0);
  EXPECT_EQ(refused.retry_after, 2 * kSec);
  EXPECT_EQ(refused.reset_after, 6 * kSec);
  EXPECT_FALSE(c.hit(T0 + 2 * kSec - 1).admitted);
  EXPECT_TRUE(c.hit(T0 + 2 * kSec).admitted);
  EXPECT_FALSE(c.hit(T0 + 3 * kSec).admitted) << "1 s of refill at 0.5/s is half a token";
  auto d = c.peek(T0 + 3 * kSec);
  EXPECT_EQ(d.retry_after, 1 * kSec);
  EXPECT_TRUE(c.hit(T0 + 4 * kSec).admitted);
  // 0.5/s over 10 s: 5 tokens, capped at capacity 3.
  EXPECT_EQ(c.burst(T0 + 14 * kSec), 3);
}

TEST(TokenBucket, CostLargerThanRemaining) {
  Caller c{token_bucket(10, 1)};
  EXPECT_TRUE(c.hit(T0, 7).admitted);
  auto d = c.hit(T0, 4);  // 3 left
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 1 * kSec) << "one more token is missing";
  auto ok = c.hit(T0, 3);
  EXPECT_TRUE(ok.admitted) << "the refused larger request consumed nothing";
  EXPECT_EQ(ok.remaining, 0);
  EXPECT_EQ(c.peek(T0, 10).retry_after, 10 * kSec);
}

// ====================================================================== GCRA

TEST(Gcra, CapacityIsTheBurstExactlyNotNPlusOne) {
  // redis-cell admits max_burst + 1; capacity here is the number admitted in one burst.
  Caller c{gcra(5, 1)};
  for (int i = 1; i <= 5; ++i) {
    auto d = c.hit(T0);
    ASSERT_TRUE(d.admitted) << i;
    EXPECT_EQ(d.limit, 5);
    EXPECT_EQ(d.remaining, 5 - i);
    EXPECT_EQ(d.reset_after, i * kSec);
  }
  auto refused = c.hit(T0);
  EXPECT_FALSE(refused.admitted) << "capacity + 1 must be refused";
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_EQ(refused.retry_after, 1 * kSec);
  EXPECT_EQ(refused.reset_after, 5 * kSec);
}

// The same over many capacities and rates, at the magnitude of real Unix time in microseconds
// (where a double resolves only 0.25 us, so a TAT built by repeated addition drifts).
TEST(Gcra, BurstIsExactForAnyRate) {
  struct Case {
    std::int64_t capacity;
    double rate;
  };
  for (auto [capacity, rate] : std::vector<Case>{{1, 1},
                                                 {10, 5},
                                                 {20, 10},
                                                 {3, 3},
                                                 {7, 100.0 / 60},
                                                 {100, 0.5},
                                                 {60, 1},
                                                 {1000, 3},
                                                 {250, 7},
                                                 {10000, 70},
                                                 {1000, 0.7},
                                                 {200000, 2000},
                                                 {100000, 3000},
                                                 {100000, 7000}}) {
    SCOPED_TRACE(describe(gcra(capacity, rate)));
    Caller c{gcra(capacity, rate)};
    std::int64_t admitted = 0, wrong_remaining = 0, first_wrong = -1;
    while (admitted < 2 * capacity) {
      auto d = c.hit(T0);
      if (!d.admitted) break;
      ++admitted;
      if (d.remaining != std::max<std::int64_t>(0, capacity - admitted) && wrong_remaining++ == 0)
        first_wrong = admitted;
    }
    EXPECT_EQ(admitted, capacity) << "one burst at one instant admits exactly capacity";
    EXPECT_EQ(wrong_remaining, 0) << "X-RateLimit-Remaining wrong from request " << first_wrong;
    if (admitted == capacity) {
      const double interval = kSec / rate;
      EXPECT_NEAR(static_cast<double>(c.peek(T0).retry_after), interval, 1.0)
          << "the next one is one emission interval away";
    }
  }
}

TEST(Gcra, OnePerEmissionIntervalAfterTheBurst) {
  Caller c{gcra(5, 4)};  // 250 ms emission interval
  ASSERT_EQ(c.burst(T0), 5);
  for (int k = 1; k <= 6; ++k) {
    Micros at = T0 + k * 250 * kMs;
    EXPECT_FALSE(c.hit(at - 1).admitted) << k;
    auto d = c.hit(at);
    EXPECT_TRUE(d.admitted) << k;
    EXPECT_EQ(d.remaining, 0);
    auto next = c.hit(at);
    EXPECT_FALSE(next.admitted) << "only one per interval, " << k;
    EXPECT_EQ(next.retry_after, 250 * kMs);
  }
  // Idle for a whole burst's worth of intervals: the full burst again, not more.
  EXPECT_EQ(c.burst(T0 + 6 * 250 * kMs + 5 * 250 * kMs), 5);
}

TEST(Gcra, CostLargerThanRemaining) {
  Caller c{gcra(10, 1)};
  EXPECT_TRUE(c.hit(T0, 7).admitted);
  auto d = c.hit(T0, 4);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1 * kSec);
  auto ok = c.hit(T0, 3);
  EXPECT_TRUE(ok.admitted);
  EXPECT_EQ(ok.remaining, 0);
  EXPECT_EQ(ok.reset_after, 10 * kSec);
}

// ====================================================================== sliding window

TEST(SlidingWindow, BoundaryBurstIsNotDoubled) {
  // 100 per 60 s. 100 at second 59 of a window; at second 61 (1 s into the next window) the
  // estimate is 100 * 59/60 = 98.3, so only 1 more fits — a fixed window would allow 100.
  Caller c{sliding_window(100, 60 * kSec)};
  for (int i = 1; i <= 100; ++i) {
    auto d = c.hit(T0 + 59 * kSec);
    ASSERT_TRUE(d.admitted) << i;
    ASSERT_EQ(d.remaining, 100 - i);
    ASSERT_EQ(d.limit, 100);
  }
  EXPECT_FALSE(c.hit(T0 + 59 * kSec).admitted);

  auto one = c.hit(T0 + 61 * kSec);
  EXPECT_TRUE(one.admitted);
  EXPECT_EQ(one.remaining, 0);
  EXPECT_EQ(one.reset_after, 119 * kSec) << "whole again when this window's count has aged out";
  auto refused = c.hit(T0 + 61 * kSec);
  EXPECT_FALSE(refused.admitted) << "only 1 more at second 61, not 100";
  // 100 * (1 - e/60) + 1 + 1 <= 100  <=>  e >= 1.2 s into the window.
  EXPECT_EQ(refused.retry_after, 200 * kMs);
  EXPECT_FALSE(c.hit(T0 + 61200 * kMs - 1).admitted);
  EXPECT_TRUE(c.hit(T0 + 61200 * kMs).admitted);

  // Half way through the window: the previous 100 weigh 50, 2 are current: 48 more fit.
  EXPECT_EQ(c.burst(T0 + 90 * kSec), 48);
}

TEST(SlidingWindow, WeightedRetryInTheNextWindow) {
  Caller c{sliding_window(10, 10 * kSec)};
  EXPECT_EQ(c.burst(T0 + 1 * kSec), 10);
  auto d = c.peek(T0 + 5 * kSec);
  EXPECT_FALSE(d.admitted);
  // Next window starts at T0+10s with previous 10: 10 * (1 - e/10) + 1 <= 10 <=> e >= 1 s.
  EXPECT_EQ(d.retry_after, 6 * kSec);
  EXPECT_EQ(d.reset_after, 15 * kSec);
  EXPECT_FALSE(c.hit(T0 + 11 * kSec - 1).admitted);
  EXPECT_TRUE(c.hit(T0 + 11 * kSec).admitted);
}

TEST(SlidingWindow, CostLargerThanRemaining) {
  Caller c{sliding_window(10, 10 * kSec)};
  EXPECT_TRUE(c.hit(T0, 7).admitted);
  auto d = c.hit(T0, 4);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  // Next window: 7 * (1 - e/10) + 4 <= 10 <=> e >= 10/7 s.
  EXPECT_EQ(d.retry_after, 10 * kSec + static_cast<Micros>(std::ceil(10.0 * kSec / 7)));
  auto ok = c.hit(T0, 3);
  EXPECT_TRUE(ok.admitted);
  EXPECT_EQ(ok.remaining, 0);
}

// ====================================================================== sliding log

TEST(SlidingLog, CountsExactlyTheTrailingWindow) {
  Caller c{sliding_log(3, 10 * kSec)};
  EXPECT_TRUE(c.hit(T0 + 0 * kSec).admitted);
  EXPECT_TRUE(c.hit(T0 + 3 * kSec).admitted);
  auto third = c.hit(T0 + 6 * kSec);
  EXPECT_TRUE(third.admitted);
  EXPECT_EQ(third.remaining, 0);
  EXPECT_EQ(third.reset_after, 10 * kSec) << "whole when the newest entry leaves";

  auto d = c.hit(T0 + 9 * kSec);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1 * kSec) << "when the oldest entry (T0) leaves";
  EXPECT_FALSE(c.hit(T0 + 10 * kSec - 1).admitted) << "T0's entry is still inside the window";
  EXPECT_TRUE(c.hit(T0 + 10 * kSec).admitted) << "an entry at t leaves at exactly t + window";
  EXPECT_FALSE(c.hit(T0 + 10 * kSec).admitted);
  EXPECT_EQ(c.peek(T0 + 10 * kSec).retry_after, 3 * kSec);
  EXPECT_TRUE(c.hit(T0 + 13 * kSec).admitted);
}

TEST(SlidingLog, WeightedEntriesLeaveOldestFirst) {
  Caller c{sliding_log(10, 10 * kSec)};
  EXPECT_TRUE(c.hit(T0 + 1 * kSec, 4).admitted);
  EXPECT_TRUE(c.hit(T0 + 2 * kSec, 3).admitted);
  EXPECT_TRUE(c.hit(T0 + 3 * kSec, 3).admitted);
  auto d = c.peek(T0 + 5 * kSec, 6);  // 10 + 6 - 10 = 6 must leave: T0+1 (4) and T0+2 (3)
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 7 * kSec);
  EXPECT_EQ(d.reset_after, 8 * kSec);
  EXPECT_EQ(c.peek(T0 + 5 * kSec, 4).retry_after, 6 * kSec) << "only the oldest must leave";
  EXPECT_FALSE(c.hit(T0 + 12 * kSec - 1, 6).admitted);
  auto ok = c.hit(T0 + 12 * kSec, 6);
  EXPECT_TRUE(ok.admitted);
  EXPECT_EQ(ok.remaining, 1);
}

// ====================================================================== fixed window

TEST(FixedWindow, WindowsAlignToTheUnixEpoch) {
  Caller c{fixed_window(5, 60 * kSec)};
  // First request 30 s into an epoch-aligned minute: the window still ends at the minute.
  auto first = c.hit(T0 + 30 * kSec);
  EXPECT_TRUE(first.admitted);
  EXPECT_EQ(first.remaining, 4);
  EXPECT_EQ(first.reset_after, 30 * kSec);
  EXPECT_EQ(c.burst(T0 + 59 * kSec), 4);
  auto d = c.hit(T0 + 59 * kSec);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 1 * kSec);
  EXPECT_EQ(d.reset_after, 1 * kSec);
  EXPECT_FALSE(c.hit(T0 + 60 * kSec - 1).admitted);
  EXPECT_EQ(c.burst(T0 + 60 * kSec), 5) << "a new window at the multiple of 60 s";

  // A 7 s window: starts at multiples of 7 s since the epoch, wherever the first request is.
  Caller odd{fixed_window(1, 7 * kSec)};
  const Micros t = T0 + 123'456'789;
  const Micros window_end = (t / (7 * kSec) + 1) * (7 * kSec);
  EXPECT_TRUE(odd.hit(t).admitted);
  auto r = odd.peek(t);
  EXPECT_EQ(r.retry_after, window_end - t);
  EXPECT_FALSE(odd.hit(window_end - 1).admitted);
  EXPECT_TRUE(odd.hit(window_end).admitted);
}

TEST(FixedWindow, CostLargerThanRemaining) {
  Caller c{fixed_window(10, 10 * kSec)};
  EXPECT_TRUE(c.hit(T0 + 2 * kSec, 7).admitted);
  auto d = c.hit(T0 + 2 * kSec, 4);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 8 * kSec);
  auto ok = c.hit(T0 + 2 * kSec, 3);
  EXPECT_TRUE(ok.admitted);
  EXPECT_EQ(ok.remaining, 0);
}

// ====================================================================== concurrency

TEST(Concurrency, LimitThenRelease) {
  Caller c{concurrency(2)};
  auto a = c.hit(T0);
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.remaining, 1);
  EXPECT_EQ(a.limit, 2);
  EXPECT_TRUE(c.hit(T0).admitted);
  auto d = c.hit(T0 + 1 * kSec);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after, 1 * kSec);
  EXPECT_FALSE(c.hit(T0 + 3600 * kSec - 1).admitted) << "time alone does not return a lease";

  c.s = release(c.p, c.s);
  ASSERT_TRUE(std::holds_alternative<ConcurrencyState>(c.s));
  EXPECT_EQ(std::get<ConcurrencyState>(c.s).in_flight, 1);
  auto again = c.hit(T0 + 2 * kSec);
  EXPECT_TRUE(again.admitted);
  EXPECT_EQ(again.remaining, 0);

  c.s = release(c.p, c.s);
  c.s = release(c.p, c.s);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(c.s)) << "the last lease back: neutral";
  EXPECT_EQ(time_to_neutral(c.p, c.s, T0), 0);
  c.s = release(c.p, c.s);  // an extra release never goes negative
  EXPECT_TRUE(std::holds_alternative<std::monostate>(c.s));
  EXPECT_EQ(c.burst(T0), 2);
}

TEST(Concurrency, HoldsALeaseForAnHourAndIgnoresCost) {
  Caller c{concurrency(3)};
  EXPECT_TRUE(c.hit(T0, 50).admitted);
  EXPECT_EQ(std::get<ConcurrencyState>(c.s).in_flight, 1) << "each request holds one lease";
  EXPECT_EQ(time_to_neutral(c.p, c.s, T0), 3600 * kSec);
}

// ====================================================================== all algorithms

struct Named {
  const char* name;
  Params params;
};

std::vector<Named> every_algorithm() {
  return {{"token_bucket", token_bucket(10, 2)},
          {"gcra", gcra(10, 2)},
          {"sliding_window", sliding_window(10, 5 * kSec)},
          {"sliding_log", sliding_log(10, 5 * kSec)},
          {"fixed_window", fixed_window(10, 5 * kSec)},
          {"concurrency", concurrency(10)},
          {"quota", quota_day(10)}};
}

void PrintTo(const Named& n, std::ostream* os) {
  *os << describe(n.params);
}

class EveryAlgorithm : public ::testing::TestWithParam<Named> {};

INSTANTIATE_TEST_SUITE_P(Algorithms, EveryAlgorithm, ::testing::ValuesIn(every_algorithm()),
                         [](const auto& info) { return std::string(info.param.name); });

// The algorithms whose requests have a cost: all but concurrency, where a request holds one
// lease until it ends and a refusal ends with a release, not at a time.
std::vector<Named> costed_algorithms() {
  auto all = every_algorithm();
  std::erase_if(all, [](const Named& n) { return n.params.algorithm == Algorithm::concurrency; });
  return all;
}

class CostedAlgorithm : public ::testing::TestWithParam<Named> {};

INSTANTIATE_TEST_SUITE_P(Algorithms, CostedAlgorithm, ::testing::ValuesIn(costed_algorithms()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_P(EveryAlgorithm, NewCallerHasTheWholeQuota) {
  const auto& p = GetParam().params;
  auto e = evaluate(p, State{}, T0, 1);
  EXPECT_TRUE(e.decision.admitted);
  EXPECT_EQ(e.decision.limit, 10) << "X-RateLimit-Limit is capacity / limit";
  EXPECT_EQ(e.decision.remaining, 9);
  EXPECT_EQ(e.decision.retry_after, 0);
  EXPECT_GT(time_to_neutral(p, e.next, T0), 0) << "a charged state is not neutral";
  EXPECT_EQ(time_to_neutral(p, State{}, T0), 0);
}

TEST_P(EveryAlgorithm, BurstIsCappedAtTheQuota) {
  Caller c{GetParam().params};
  EXPECT_EQ(c.burst(T0), 10);
  auto d = c.peek(T0);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.limit, 10);
  EXPECT_GE(d.retry_after, 1);
}

TEST_P(EveryAlgorithm, RefusedRequestsConsumeNothing) {
  const auto& p = GetParam().params;
  Caller c{p};
  ASSERT_EQ(c.burst(T0), 10);
  const State before = c.s;
  const auto first = c.peek(T0 + 1);
  ASSERT_FALSE(first.admitted);
  // A flood of refusals: each answered the same, none charged.
  for (int i = 0; i < 1000; ++i) {
    auto d = c.hit(T0 + 1);
    ASSERT_TRUE(same_decision(d, first));
  }
  EXPECT_EQ(describe(c.s), describe(before));
  // And the `next` of a refusal carries no charge either: committing it changes no later answer.
  auto refused = evaluate(p, before, T0 + 1, 3);
  ASSERT_FALSE(refused.decision.admitted);
  for (Micros later : {T0 + 1, T0 + 1 * kSec, T0 + 2500 * kMs, T0 + 5 * kSec, T0 + 11 * kSec}) {
    for (std::int64_t cost : {1, 3, 10}) {
      EXPECT_TRUE(same_decision(evaluate(p, refused.next, later, cost).decision,
                                evaluate(p, before, later, cost).decision))
          << "at +" << later - T0 << "us cost " << cost;
    }
  }
}

TEST_P(CostedAlgorithm, CostZeroIsAdmittedAndChargesNothing) {
  const auto& p = GetParam().params;
  auto fresh = evaluate(p, State{}, T0, 0);
  EXPECT_TRUE(fresh.decision.admitted);
  EXPECT_EQ(fresh.decision.remaining, 10);
  EXPECT_EQ(fresh.decision.reset_after, 0);
  EXPECT_EQ(time_to_neutral(p, fresh.next, T0), 0) << "nothing charged: may be forgotten";

  Caller c{p};
  ASSERT_TRUE(c.hit(T0, 4).admitted);
  const State before = c.s;
  auto d = c.hit(T0, 0);
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(d.remaining, 6);
  EXPECT_TRUE(same_decision(c.peek(T0, 6), evaluate(p, before, T0, 6).decision));
  EXPECT_TRUE(same_decision(c.peek(T0, 7), evaluate(p, before, T0, 7).decision));
  // Exhausted: a cost of 0 still fits.
  ASSERT_TRUE(c.hit(T0, 6).admitted);
  EXPECT_TRUE(c.hit(T0, 0).admitted);
  EXPECT_FALSE(c.hit(T0, 1).admitted);
}

// The config keeps costs within capacity, but the `local` fallback divides capacity and not the
// cost: such a request must still be a well-formed refusal (Retry-After >= 1, nothing charged).
TEST_P(CostedAlgorithm, CostAboveCapacityIsAWellFormedRefusal) {
  const auto& p = GetParam().params;
  for (const State& s : {State{}, evaluate(p, State{}, T0, 3).next}) {
    auto e = evaluate(p, s, T0 + 1, p.capacity + 1);
    EXPECT_FALSE(e.decision.admitted);
    EXPECT_EQ(e.decision.remaining, 0);
    EXPECT_GE(e.decision.retry_after, 1) << describe(s);
    EXPECT_TRUE(
        same_decision(evaluate(p, e.next, T0 + 2, 1).decision, evaluate(p, s, T0 + 2, 1).decision));
  }
}

TEST_P(EveryAlgorithm, LongIdleGapReturnsToNeutral) {
  const auto& p = GetParam().params;
  Caller c{p};
  ASSERT_EQ(c.burst(T0 + 1 * kSec), 10);
  if (p.algorithm == Algorithm::concurrency) {
    for (int i = 0; i < 10; ++i) c.s = release(p, c.s);
  }
  Micros now = T0 + 1 * kSec;
  Micros ttn = time_to_neutral(p, c.s, now);
  if (p.algorithm != Algorithm::concurrency) {
    EXPECT_GT(ttn, 0);
    EXPECT_GT(time_to_neutral(p, c.s, now + ttn - 1), 0);
  }
  EXPECT_EQ(time_to_neutral(p, c.s, now + ttn), 0);
  for (Micros at : {now + ttn, now + ttn + 1, now + 86400 * kSec, now + 365 * 86400 * kSec}) {
    EXPECT_EQ(time_to_neutral(p, c.s, at), 0);
    for (std::int64_t cost : {1, 5, 10})
      EXPECT_TRUE(same_decision(c.peek(at, cost), evaluate(p, State{}, at, cost).decision))
          << "+" << at - now << "us cost " << cost;
  }
  EXPECT_EQ(c.burst(now + 86400 * kSec), 10);
}

TEST_P(CostedAlgorithm, RetryAfterIsExactlyWhenItPasses) {
  const auto& p = GetParam().params;
  Caller c{p};
  ASSERT_TRUE(c.hit(T0 + 1234, 6).admitted);
  for (std::int64_t cost : {1, 4, 5, 10}) {
    auto d = c.peek(T0 + 2 * kSec + 77, cost);
    if (d.admitted) continue;
    EXPECT_FALSE(c.peek(T0 + 2 * kSec + 77 + d.retry_after - 1, cost).admitted) << cost;
    EXPECT_TRUE(c.peek(T0 + 2 * kSec + 77 + d.retry_after, cost).admitted) << cost;
  }
}

// ---------------------------------------------------------------- settlement (adjust)

TEST(Adjust, TokenBucketChargesRefundsAndDebt) {
  auto p = token_bucket(10, 1);
  Caller c{p};
  ASSERT_TRUE(c.hit(T0, 1).admitted);  // 9 left
  c.s = adjust(p, c.s, T0, 5);         // the true cost was 6
  EXPECT_EQ(c.peek(T0, 4).remaining, 0);
  EXPECT_FALSE(c.peek(T0, 5).admitted);
  c.s = adjust(p, c.s, T0, -2);  // refund
  EXPECT_TRUE(c.peek(T0, 6).admitted);
  EXPECT_FALSE(c.peek(T0, 7).admitted);
  c.s = adjust(p, c.s, T0, -100);  // refunds never exceed a full bucket
  EXPECT_EQ(time_to_neutral(p, c.s, T0), 0);
  EXPECT_EQ(c.burst(T0), 10);

  // Debt: at most one capacity below empty, however much is charged.
  c.s = adjust(p, c.s, T0, 1000);
  c.s = adjust(p, c.s, T0, 1000);
  ASSERT_TRUE(std::holds_alternative<BucketState>(c.s));
  EXPECT_DOUBLE_EQ(std::get<BucketState>(c.s).tokens, -10);
  EXPECT_EQ(time_to_neutral(p, c.s, T0), 20 * kSec);
  auto d = c.peek(T0, 1);
  EXPECT_FALSE(d.admitted) << "a bucket in debt refuses until refilled";
  EXPECT_EQ(d.retry_after, 11 * kSec);
  EXPECT_FALSE(c.peek(T0 + 10 * kSec, 1).admitted) << "back to 0 tokens: still nothing";
  EXPECT_FALSE(c.hit(T0 + 11 * kSec - 1, 1).admitted);
  EXPECT_TRUE(c.hit(T0 + 11 * kSec, 1).admitted);
}

TEST(Adjust, GcraChargesRefundsAndDebt) {
  auto p = gcra(10, 1);
  Caller c{p};
  ASSERT_TRUE(c.hit(T0, 1).admitted);
  c.s = adjust(p, c.s, T0, 5);
  EXPECT_TRUE(c.peek(T0, 4).admitted);
  EXPECT_FALSE(c.peek(T0, 5).admitted);
  c.s = adjust(p, c.s, T0, -2);
  EXPECT_TRUE(c.peek(T0, 6).admitted);
  EXPECT_FALSE(c.peek(T0, 7).admitted);
  c.s = adjust(p, c.s, T0, -100);
  EXPECT_EQ(time_to_neutral(p, c.s, T0), 0);
  EXPECT_EQ(c.burst(T0), 10);

  c.s = adjust(p, c.s, T0, 1000);
  c.s = adjust(p, c.s, T0, 1000);
  EXPECT_EQ(time_to_neutral(p, c.s, T0), 20 * kSec) << "debt bounded by one burst";
  auto d = c.peek(T0, 1);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 11 * kSec) << "the same wait as a token bucket in full debt";
  EXPECT_FALSE(c.hit(T0 + 11 * kSec - 1).admitted);
  EXPECT_TRUE(c.hit(T0 + 11 * kSec).admitted);
}

TEST(Adjust, WindowsChargesRefundsAndDebt) {
  for (auto p : {fixed_window(10, 10 * kSec), sliding_window(10, 10 * kSec)}) {
    SCOPED_TRACE(describe(p));
    Caller c{p};
    ASSERT_TRUE(c.hit(T0 + 1 * kSec, 1).admitted);
    c.s = adjust(p, c.s, T0 + 1 * kSec, 5);
    EXPECT_TRUE(c.peek(T0 + 1 * kSec, 4).admitted);
    EXPECT_FALSE(c.peek(T0 + 1 * kSec, 5).admitted);
    c.s = adjust(p, c.s, T0 + 1 * kSec, -3);
    EXPECT_TRUE(c.peek(T0 + 1 * kSec, 7).admitted);
    EXPECT_FALSE(c.peek(T0 + 1 * kSec, 8).admitted);
    c.s = adjust(p, c.s, T0 + 1 * kSec, -100);  // never below zero
    EXPECT_EQ(c.peek(T0 + 1 * kSec, 10).remaining, 0);
    EXPECT_TRUE(c.peek(T0 + 1 * kSec, 10).admitted);

    c.s = adjust(p, c.s, T0 + 1 * kSec, 1000);
    c.s = adjust(p, c.s, T0 + 1 * kSec, 1000);
    ASSERT_TRUE(std::holds_alternative<WindowState>(c.s));
    EXPECT_EQ(std::get<WindowState>(c.s).current, 20) << "debt bounded by one limit";
    EXPECT_FALSE(c.peek(T0 + 9 * kSec, 0).admitted || c.peek(T0 + 9 * kSec, 1).admitted);
  }
  // A fixed window's debt ends with its window; a sliding window's weighs on the next one:
  // 20 * (1 - e/10) + 1 <= 10 <=> e >= 5.5 s.
  Caller f{fixed_window(10, 10 * kSec)};
  f.s = adjust(f.p, State{}, T0 + 1 * kSec, 1000);
  EXPECT_TRUE(f.peek(T0 + 10 * kSec).admitted);
  Caller s{sliding_window(10, 10 * kSec)};
  s.s = adjust(s.p, State{}, T0 + 1 * kSec, 1000);
  auto d = s.peek(T0 + 10 * kSec);
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.retry_after, 5500 * kMs);
  EXPECT_TRUE(s.peek(T0 + 15500 * kMs).admitted);
}

TEST(Adjust, LogAndConcurrencyAreUnchanged) {
  auto log = sliding_log(5, 10 * kSec);
  Caller l{log};
  ASSERT_TRUE(l.hit(T0, 2).admitted);
  EXPECT_EQ(describe(adjust(log, l.s, T0, 3)), describe(l.s));
  auto conc = concurrency(5);
  State one = ConcurrencyState{1};
  EXPECT_EQ(describe(adjust(conc, one, T0, 3)), describe(one));
}

// ---------------------------------------------------------------- randomised properties

// Typical parameters: rates of at least 1/s, windows of at most a minute, so every duration is
// below ~20 min. `full` adds what a config may also say: N/m and N/h rates, one-hour windows.
enum class Range { typical, full };

double random_rate(std::mt19937_64& rng, Range r) {
  static const double per[] = {1.0, 1.0 / 60, 1.0 / 3600};
  static const double n[] = {0.5, 1, 2, 3, 7, 10, 100, 1000, 2000};
  if (r == Range::typical) return n[1 + rng() % (std::size(n) - 1)];
  return n[rng() % std::size(n)] * per[rng() % std::size(per)];
}

Micros random_window(std::mt19937_64& rng, Range r) {
  static const Micros w[] = {1 * kSec, 1500 * kMs, 7 * kSec, 10 * kSec, 60 * kSec, 3600 * kSec};
  return w[rng() % (std::size(w) - (r == Range::typical ? 1 : 0))];
}

Params random_params(Algorithm a, std::mt19937_64& rng, Range r) {
  static const std::int64_t caps[] = {1, 2, 3, 5, 10, 20, 100, 1000};
  std::int64_t cap = caps[rng() % std::size(caps)];
  switch (a) {
    case Algorithm::token_bucket:
    case Algorithm::gcra:
      return bucket(a, cap, random_rate(rng, r));
    case Algorithm::sliding_log:
      return windowed(a, std::min<std::int64_t>(cap, 50), random_window(rng, r));
    default:
      return windowed(a, cap, random_window(rng, r));
  }
}

// A time step that keeps the caller near its limit: around the time one unit takes to return.
Micros random_gap(const Params& p, std::mt19937_64& rng) {
  double unit = p.per_second > 0 ? kSec / p.per_second
                                 : static_cast<double>(p.window) / static_cast<double>(p.capacity);
  std::exponential_distribution<double> e(1.0);
  switch (rng() % 4) {
    case 0:
      return 0;
    case 1:
      return static_cast<Micros>(rng() % 1000);
    default:
      return static_cast<Micros>(e(rng) * unit);
  }
}

std::int64_t random_cost(const Params& p, std::mt19937_64& rng) {
  if (rng() % 8 == 0) return static_cast<std::int64_t>(rng() % (p.capacity + 1));
  return std::min<std::int64_t>(p.capacity, 1 + static_cast<std::int64_t>(rng() % 3));
}

// For a refusal, now + retry_after - 1 still refuses and now + retry_after admits. For an
// admission, `remaining` is exact (a request of that cost still fits now, one more does not)
// and the quota is whole (a capacity-sized request passes) exactly at reset_after. Plus the
// invariants of every decision. Over many random states built by random traffic, seeded.
// Returns the number of violations (the first few are reported).
// `slack`: with rates of N/h and hour-long windows, one microsecond is below the algorithms'
// 1e-9 admission tolerance (1/h refills 2.8e-10 token per us), so a wait may be reported up to
// a few microseconds late: never early. Retry-After is whole seconds, and the Lua scripts
// mirror exactly this arithmetic (see the differential tests), so it is the documented bound.
constexpr Micros kSlowSlack = 8;

int check_exactness(Algorithm a, Range range, std::uint64_t seed, Micros slack = 0) {
  std::mt19937_64 rng(seed);
  int refusals = 0, failures = 0;
  constexpr int kMaxReported = 6;
  auto report = [&](const Params& p, const State& s, Micros now, std::int64_t cost,
                    const Decision& d, const std::string& what) {
    if (++failures <= kMaxReported)
      ADD_FAILURE() << what << "\n  params " << describe(p) << "\n  state " << describe(s)
                    << "\n  now T0+" << now - T0 << "us cost " << cost << "\n  decision "
                    << describe(d);
  };
  for (int trial = 0; trial < 400; ++trial) {
    Caller c{random_params(a, rng, range)};
    Micros now = T0 + static_cast<Micros>(rng() % (86400 * kSec));
    for (int step = 0; step < 150; ++step) {
      now += random_gap(c.p, rng);
      const std::int64_t cost = random_cost(c.p, rng);
      const State before = c.s;
      auto e = evaluate(c.p, before, now, cost);
      const auto& d = e.decision;
      if (d.limit != c.p.capacity) report(c.p, before, now, cost, d, "limit is not the capacity");
      if (d.reset_after < 0) report(c.p, before, now, cost, d, "negative reset_after");
      if (d.admitted) {
        if (d.retry_after != 0 || d.remaining < 0 || d.remaining > c.p.capacity - cost)
          report(c.p, before, now, cost, d, "admitted with an impossible remaining/retry_after");
        c.s = std::move(e.next);
        if (time_to_neutral(c.p, c.s, now) < d.reset_after)
          report(c.p, c.s, now, cost, d, "the key would expire before the quota is whole");
        if (!evaluate(c.p, c.s, now, d.remaining).decision.admitted)
          report(c.p, c.s, now, cost, d, "`remaining` more does not fit");
        if (evaluate(c.p, c.s, now, d.remaining + 1).decision.admitted)
          report(c.p, c.s, now, cost, d, "more than `remaining` fits");
        if (!evaluate(c.p, c.s, now + d.reset_after, c.p.capacity).decision.admitted)
          report(c.p, c.s, now, cost, d, "not whole at reset_after");
        if (d.reset_after > slack &&
            evaluate(c.p, c.s, now + d.reset_after - 1 - slack, c.p.capacity).decision.admitted)
          report(c.p, c.s, now, cost, d, "already whole at reset_after - 1us");
      } else {
        ++refusals;
        if (d.remaining != 0 || d.retry_after < 1)
          report(c.p, before, now, cost, d, "refused with remaining or no retry");
        if (d.retry_after > 1 + slack &&
            evaluate(c.p, before, now + d.retry_after - 1 - slack, cost).decision.admitted)
          report(c.p, before, now, cost, d, "admitted at now + retry_after - 1us");
        if (!evaluate(c.p, before, now + d.retry_after, cost).decision.admitted)
          report(c.p, before, now, cost, d, "still refused at now + retry_after");
      }
    }
  }
  EXPECT_GT(refusals, 1000) << "the traffic must actually hit the limit";
  return failures;
}

struct AlgorithmParam {
  Algorithm a;
};
void PrintTo(const AlgorithmParam& p, std::ostream* os) {
  *os << floodgate::config::to_string(p.a);
}

class RandomisedAlgorithm : public ::testing::TestWithParam<AlgorithmParam> {};

INSTANTIATE_TEST_SUITE_P(Algorithms, RandomisedAlgorithm,
                         ::testing::Values(AlgorithmParam{Algorithm::token_bucket},
                                           AlgorithmParam{Algorithm::gcra},
                                           AlgorithmParam{Algorithm::sliding_window},
                                           AlgorithmParam{Algorithm::sliding_log},
                                           AlgorithmParam{Algorithm::fixed_window}),
                         [](const auto& info) {
                           return std::string(floodgate::config::to_string(info.param.a));
                         });

TEST_P(RandomisedAlgorithm, RetryAfterRemainingAndResetAreExact) {
  const Algorithm a = GetParam().a;
  EXPECT_EQ(check_exactness(a, Range::typical, 0xF100D6A7Eull + static_cast<unsigned>(a)), 0);
}

// The same over every rate and window a config can express (N/m, N/h, 1 h windows), where
// durations reach hours and a microsecond is a tiny fraction of a token.
TEST_P(RandomisedAlgorithm, RetryAfterRemainingAndResetAreExactForSlowRatesAndLongWindows) {
  const Algorithm a = GetParam().a;
  EXPECT_EQ(check_exactness(a, Range::full, 0x5104ull + static_cast<unsigned>(a), kSlowSlack), 0);
}

// After time_to_neutral, the state decides exactly as a new caller, for any cost.
int check_neutral(Algorithm a, Range range, std::uint64_t seed, Micros slack = 0) {
  std::mt19937_64 rng(seed);
  int failures = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Caller c{random_params(a, rng, range)};
    Micros now = T0 + static_cast<Micros>(rng() % (86400 * kSec));
    int steps = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < steps; ++i) {
      now += random_gap(c.p, rng);
      c.hit(now, random_cost(c.p, rng));
    }
    if (rng() % 3 == 0 && (a == Algorithm::token_bucket || a == Algorithm::gcra ||
                           a == Algorithm::sliding_window || a == Algorithm::fixed_window))
      c.s = adjust(c.p, c.s, now,
                   static_cast<std::int64_t>(rng() % (2 * c.p.capacity + 1)) - c.p.capacity / 2);
    Micros ttn = time_to_neutral(c.p, c.s, now);
    Micros at = now + ttn + slack;
    bool ok = ttn >= 0 && time_to_neutral(c.p, c.s, at) == 0;
    for (std::int64_t cost : {std::int64_t{1}, c.p.capacity}) {
      ok = ok && same_decision(c.peek(at, cost), evaluate(c.p, State{}, at, cost).decision);
    }
    if (!ok && ++failures <= 6)
      ADD_FAILURE() << "not neutral at now + time_to_neutral: " << describe(c.p) << " state "
                    << describe(c.s) << " now T0+" << now - T0 << " ttn " << ttn
                    << "\n  full-quota request then: " << describe(c.peek(at, c.p.capacity))
                    << " vs new " << describe(evaluate(c.p, State{}, at, c.p.capacity).decision);
  }
  return failures;
}

TEST_P(RandomisedAlgorithm, NeutralAfterTimeToNeutral) {
  const Algorithm a = GetParam().a;
  EXPECT_EQ(check_neutral(a, Range::typical, 0xA11CEull + static_cast<unsigned>(a)), 0);
}

TEST_P(RandomisedAlgorithm, NeutralAfterTimeToNeutralForSlowRatesAndLongWindows) {
  const Algorithm a = GetParam().a;
  EXPECT_EQ(check_neutral(a, Range::full, 0xB0Bull + static_cast<unsigned>(a), kSlowSlack), 0);
}

// ---------------------------------------------------------------- known numeric edges

// A 1 h sliding window: one request in the previous window weighs 1/3.6e9 per microsecond,
// below the 1e-9 admission tolerance: whatever the wait is, the same request must be refused
// 1 us before it and admitted at it (within a few microseconds of the exact hour).
TEST(SlidingWindow, RetryAfterExactWithAnHourWindow) {
  Caller c{sliding_window(1, 3600 * kSec)};
  ASSERT_TRUE(c.hit(T0).admitted);
  auto d = c.peek(T0 + 10 * kSec);
  ASSERT_FALSE(d.admitted);
  EXPECT_NEAR(static_cast<double>(d.retry_after), 2 * 3600 * kSec - 10 * kSec, 10);
  EXPECT_FALSE(c.peek(T0 + 10 * kSec + d.retry_after - 1 - kSlowSlack).admitted);
  EXPECT_TRUE(c.peek(T0 + 10 * kSec + d.retry_after).admitted);
}

// A bucket refilling 1/h gains 2.8e-10 token per microsecond, below the 1e-9 tolerance: the
// wait must still be the first microsecond at which the request passes.
TEST(TokenBucket, RetryAfterExactWithAnHourlyRate) {
  Caller c{token_bucket(1, 1.0 / 3600)};
  ASSERT_TRUE(c.hit(T0).admitted);
  auto d = c.peek(T0);
  ASSERT_FALSE(d.admitted);
  EXPECT_NEAR(static_cast<double>(d.retry_after), 3600 * kSec, 10);
  EXPECT_FALSE(c.peek(T0 + d.retry_after - 1 - kSlowSlack).admitted);
  EXPECT_TRUE(c.peek(T0 + d.retry_after).admitted);
}

// on_exceed: delay. A burst of 2 refilling 1/s with 3 units of allowance (max_delay 3s):
// the third and later requests are admitted with the wait until their unit has refilled, in
// order, and the sixth is refused until the queue has moved.
class DelayAllowance : public ::testing::TestWithParam<Algorithm> {};

TEST_P(DelayAllowance, RequestsBeyondTheBurstWaitTheirTurn) {
  auto p = bucket(GetParam(), 2, 1);
  p.max_delay = 3 * kSec;  // at 1/s: 3 units
  ASSERT_EQ(p.delay_allowance(), 3);
  State s;
  std::vector<Micros> delays;
  for (int i = 0; i < 5; ++i) {
    auto e = evaluate(p, s, T0, 1);
    ASSERT_TRUE(e.decision.admitted) << i;
    EXPECT_EQ(e.decision.retry_after, 0) << i;
    delays.push_back(e.decision.delay);
    s = e.next;
  }
  EXPECT_EQ(delays, (std::vector<Micros>{0, 0, kSec, 2 * kSec, 3 * kSec}));
  auto refused = evaluate(p, s, T0, 1);
  EXPECT_FALSE(refused.decision.admitted);
  EXPECT_EQ(refused.decision.retry_after, kSec) << "when the first delayed unit is repaid";
  // A second on, the queue is one unit shorter.
  auto later = evaluate(p, s, T0 + kSec, 1);
  ASSERT_TRUE(later.decision.admitted);
  EXPECT_EQ(later.decision.delay, 3 * kSec);
  // Without an allowance the same state refuses, as before.
  p.max_delay = 0;
  EXPECT_FALSE(evaluate(p, s, T0 + kSec, 1).decision.admitted);
}

INSTANTIATE_TEST_SUITE_P(Buckets, DelayAllowance,
                         ::testing::Values(Algorithm::token_bucket, Algorithm::gcra),
                         [](const auto& info) {
                           return std::string(floodgate::config::to_string(info.param));
                         });

}  // namespace
