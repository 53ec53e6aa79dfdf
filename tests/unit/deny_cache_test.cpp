// The per-worker cache of refusals: a refused caller is answered locally until its
// Retry-After passes, never longer, and never for a limit whose definition changed.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/limit/algorithm.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/deny_cache.hpp"
#include "floodgate/store/memory_store.hpp"

using floodgate::config::Algorithm;
using floodgate::limit::Decision;
using floodgate::limit::DenyCache;
using floodgate::limit::evaluate;
using floodgate::limit::kMicrosPerSecond;
using floodgate::limit::Micros;
using floodgate::limit::Params;
using floodgate::limit::State;
using floodgate::store::Item;

namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr Micros T0 = 1'699'999'200LL * kSec;

Params sliding_window(std::int64_t limit, Micros window) {
  Params p;
  p.algorithm = Algorithm::sliding_window;
  p.capacity = limit;
  p.window = window;
  return p;
}

Item item(std::string key, Params p, std::int64_t cost = 1, bool enforce = true) {
  Item i;
  i.key = std::move(key);
  i.params = p;
  i.cost = cost;
  i.enforce = enforce;
  return i;
}

Decision refused(Micros retry_after, Micros reset_after, std::int64_t limit = 100) {
  Decision d;
  d.admitted = false;
  d.limit = limit;
  d.remaining = 0;
  d.retry_after = retry_after;
  d.reset_after = reset_after;
  return d;
}

// A refusal learnt from a store whose clock is ahead of (or behind) this PoP's is answered
// on the store's clock: the reset headers of a remembered refusal point where the store's own
// answer pointed (Redis's TIME, not a PoP clock days off).
TEST(DenyCache, ARememberedRefusalKeepsTheStoresClock) {
  DenyCache cache;
  const Micros ahead = 3 * 24 * 3600 * kSec;
  auto a = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  cache.remember(a, refused(5 * kSec, 40 * kSec), T0, T0 + ahead);
  auto hit = cache.check({a}, T0 + 2 * kSec);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->store_now, T0 + 2 * kSec + ahead);
  EXPECT_EQ(hit->store_now + hit->decision.reset_after, T0 + ahead + 40 * kSec);
  // Without the store's clock (the embedded store): this PoP's.
  cache.remember(a, refused(5 * kSec, 40 * kSec), T0);
  EXPECT_EQ(cache.check({a}, T0 + 2 * kSec)->store_now, T0 + 2 * kSec);
}

TEST(DenyCache, RemembersARefusalUntilItsRetryAfter) {
  DenyCache cache;
  auto a = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  cache.remember(a, refused(5 * kSec, 40 * kSec), T0);
  EXPECT_EQ(cache.size(), 1u);

  auto hit = cache.check({a}, T0);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->item, 0u);
  EXPECT_FALSE(hit->decision.admitted);
  EXPECT_EQ(hit->decision.limit, 100);
  EXPECT_EQ(hit->decision.remaining, 0);
  EXPECT_EQ(hit->decision.retry_after, 5 * kSec);
  EXPECT_EQ(hit->decision.reset_after, 40 * kSec);

  // Recomputed from now.
  hit = cache.check({a}, T0 + 2 * kSec);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->decision.retry_after, 3 * kSec);
  EXPECT_EQ(hit->decision.reset_after, 38 * kSec);

  hit = cache.check({a}, T0 + 5 * kSec - 1);
  ASSERT_TRUE(hit.has_value()) << "still refused 1 us before Retry-After";
  EXPECT_EQ(hit->decision.retry_after, 1);
  EXPECT_EQ(cache.hits(), 3u);

  EXPECT_FALSE(cache.check({a}, T0 + 5 * kSec).has_value())
      << "exactly at Retry-After: ask the store";
  EXPECT_EQ(cache.hits(), 3u);
}

TEST(DenyCache, OneProbeAtATimeWhenARefusalRunsOut) {
  DenyCache cache;
  auto a = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  cache.remember(a, refused(5 * kSec, 40 * kSec), T0);
  const Micros end = T0 + 5 * kSec;
  EXPECT_FALSE(cache.check({a}, end).has_value())
      << "the first request after Retry-After probes the store";
  auto held = cache.check({a}, end + 10);
  ASSERT_TRUE(held.has_value())
      << "others wait for the probe's answer instead of stampeding the store";
  EXPECT_GE(held->decision.retry_after, 1);
  EXPECT_TRUE(cache.check({a}, end + DenyCache::kProbeWindow - 1).has_value());
  EXPECT_FALSE(cache.check({a}, end + DenyCache::kProbeWindow).has_value())
      << "a lost probe is replaced";
  // The probe is refused again: a fresh refusal replaces the entry.
  cache.remember(a, refused(2 * kSec, 30 * kSec), end + 20);
  EXPECT_TRUE(cache.check({a}, end + 30).has_value());
  // The probe is admitted with room to spare: the entry goes, and everyone asks the store.
  Decision ok;
  ok.admitted = true;
  ok.limit = 100;
  ok.remaining = 3;
  cache.admitted({a}, {ok}, end + 40);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.check({a}, end + 40).has_value());
}

// The store's answer for a request that took the last unit carries when the next one would
// pass: the requests right behind it are refused locally until exactly then.
TEST(DenyCache, AnAdmissionThatTookTheLastUnitRefusesUntilTheNextUnit) {
  Params p;
  p.algorithm = Algorithm::token_bucket;
  p.capacity = 2;
  p.per_second = 4;  // one token every 250 ms
  auto a = item("rl:r:l:{a}", p);
  floodgate::limit::FakeClock clock(T0);
  floodgate::store::MemoryState store(clock, 1000);
  std::vector<Item> items{a};
  auto first = store.acquire(items);
  ASSERT_TRUE(first.admitted);
  EXPECT_EQ(first.decisions[0].retry_after, 0) << "one token left: nothing to remember";
  auto last = store.acquire(items);
  ASSERT_TRUE(last.admitted);
  ASSERT_EQ(last.decisions[0].remaining, 0);
  EXPECT_EQ(last.decisions[0].retry_after, 250'000);

  DenyCache cache;
  cache.admitted(items, last.decisions, T0);
  auto hit = cache.check(items, T0 + 249'999);
  ASSERT_TRUE(hit.has_value());
  EXPECT_FALSE(hit->decision.admitted);
  EXPECT_EQ(hit->decision.retry_after, 1);
  clock.set(T0 + 249'999);
  EXPECT_FALSE(store.acquire(items).admitted) << "the store agrees: still refused";
  EXPECT_FALSE(cache.check(items, T0 + 250'000).has_value()) << "then the store is asked again";
  clock.set(T0 + 250'000);
  EXPECT_TRUE(store.acquire(items).admitted);
}

TEST(DenyCache, EndsExactlyWhenTheAlgorithmWouldAdmit) {
  auto p = sliding_window(10, 10 * kSec);
  auto a = item("rl:r:l:{a}", p);
  State s;
  for (int i = 0; i < 10; ++i) s = evaluate(p, s, T0 + 1 * kSec, 1).next;
  auto d = evaluate(p, s, T0 + 4 * kSec, 1).decision;
  ASSERT_FALSE(d.admitted);
  DenyCache cache;
  cache.remember(a, d, T0 + 4 * kSec);
  const Micros pass_at = T0 + 4 * kSec + d.retry_after;
  EXPECT_TRUE(cache.check({a}, pass_at - 1).has_value());
  EXPECT_FALSE(evaluate(p, s, pass_at - 1, 1).decision.admitted);
  EXPECT_FALSE(cache.check({a}, pass_at).has_value());
  EXPECT_TRUE(evaluate(p, s, pass_at, 1).decision.admitted);
}

TEST(DenyCache, ReportsWhichItemIsRefused) {
  DenyCache cache;
  auto a = item("rl:r:a:{x}", sliding_window(100, 60 * kSec));
  auto b = item("rl:r:b:{x}", sliding_window(10, 60 * kSec));
  EXPECT_FALSE(cache.check({a, b}, T0).has_value()) << "empty cache";
  cache.remember(b, refused(7 * kSec, 7 * kSec, 10), T0);
  auto hit = cache.check({a, b}, T0 + 1 * kSec);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->item, 1u);
  EXPECT_EQ(hit->decision.limit, 10);
  EXPECT_EQ(hit->decision.retry_after, 6 * kSec);
  EXPECT_FALSE(cache.check({a}, T0 + 1 * kSec).has_value()) << "another key of the same caller";
}

TEST(DenyCache, ForgetsWhenTheLimitDefinitionChanges) {
  auto base = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  struct Change {
    const char* what;
    void (*apply)(Item&);
  };
  const Change changes[] = {
      {"capacity", [](Item& i) { i.params.capacity = 200; }},
      {"window", [](Item& i) { i.params.window = 30 * kSec; }},
      {"algorithm", [](Item& i) { i.params.algorithm = Algorithm::fixed_window; }},
      {"rate", [](Item& i) { i.params.per_second = 3; }},
      {"cost", [](Item& i) { i.cost = 2; }},
  };
  for (const auto& c : changes) {
    SCOPED_TRACE(c.what);
    DenyCache cache;
    cache.remember(base, refused(30 * kSec, 30 * kSec), T0);
    ASSERT_TRUE(cache.check({base}, T0 + 1).has_value());
    Item changed = base;
    c.apply(changed);
    EXPECT_FALSE(cache.check({changed}, T0 + 1).has_value());
    EXPECT_EQ(cache.size(), 0u) << "the stale entry is dropped";
  }
}

TEST(DenyCache, NeverCachesConcurrencyOrAdmissions) {
  DenyCache cache;
  Params conc;
  conc.algorithm = Algorithm::concurrency;
  conc.capacity = 2;
  auto c = item("rl:r:conc:{a}", conc);
  cache.remember(c, refused(1 * kSec, 0, 2), T0);
  EXPECT_EQ(cache.size(), 0u) << "a concurrency refusal ends with a release, not at a time";
  EXPECT_FALSE(cache.check({c}, T0).has_value());

  auto a = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  Decision ok;
  ok.admitted = true;
  ok.limit = 100;
  ok.remaining = 5;
  cache.remember(a, ok, T0);
  cache.remember(a, refused(0, 10 * kSec), T0);  // no wait at all: nothing to remember
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.check({a}, T0).has_value());
}

TEST(DenyCache, ShadowItemsAreNeverAnsweredFromTheCache) {
  DenyCache cache;
  auto enforced = item("rl:r:l:{a}", sliding_window(100, 60 * kSec));
  cache.remember(enforced, refused(30 * kSec, 30 * kSec), T0);
  auto shadow = enforced;
  shadow.enforce = false;
  EXPECT_FALSE(cache.check({shadow}, T0 + 1).has_value()) << "a shadow limit never refuses";
  EXPECT_TRUE(cache.check({enforced}, T0 + 1).has_value());
  auto other = item("rl:r:other:{a}", sliding_window(5, 60 * kSec));
  auto hit = cache.check({shadow, other, enforced}, T0 + 1);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->item, 2u);
}

TEST(DenyCache, BoundedSize) {
  DenyCache cache(3);
  auto p = sliding_window(100, 60 * kSec);
  cache.remember(item("k1", p), refused(1 * kSec, 1 * kSec), T0);
  cache.remember(item("k2", p), refused(10 * kSec, 10 * kSec), T0);
  cache.remember(item("k3", p), refused(10 * kSec, 10 * kSec), T0);
  EXPECT_EQ(cache.size(), 3u);
  // Full: expired entries go first (k1), then the new one fits.
  cache.remember(item("k4", p), refused(10 * kSec, 10 * kSec), T0 + 2 * kSec);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(cache.check({item("k2", p)}, T0 + 2 * kSec).has_value());
  EXPECT_TRUE(cache.check({item("k4", p)}, T0 + 2 * kSec).has_value());
  // Full of live entries: it starts over rather than growing (refusals are re-learnt from the
  // store).
  cache.remember(item("k5", p), refused(10 * kSec, 10 * kSec), T0 + 2 * kSec);
  EXPECT_LE(cache.size(), 3u);
  EXPECT_TRUE(cache.check({item("k5", p)}, T0 + 2 * kSec).has_value());
}

}  // namespace

// A counting limit's unit may come back with any response, on any worker: its refusals, and
// "the last unit went to this request", are never cached.
TEST(DenyCache, ACountingLimitsRefusalsAreNeverCached) {
  DenyCache cache;
  auto a = item("rl:r:l:{a}", sliding_window(5, 900 * kSec));
  a.refundable = true;
  cache.remember(a, refused(60 * kSec, 900 * kSec), T0);
  EXPECT_EQ(cache.size(), 0u);
  Decision last;
  last.admitted = true;
  last.limit = 5;
  last.remaining = 0;
  last.retry_after = 60 * kSec;
  cache.admitted({a}, {last}, T0);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.check({a}, T0).has_value());
}
