// The embedded store: all-or-nothing acquisition across keys, shadow items, expiry of idle keys,
// the max_keys cap, and thread safety. Driven by a FakeClock; no sockets.

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/memory_store.hpp"

using floodgate::config::Algorithm;
using floodgate::limit::FakeClock;
using floodgate::limit::kMicrosPerSecond;
using floodgate::limit::Micros;
using floodgate::limit::Params;
using floodgate::store::AcquireResult;
using floodgate::store::Item;
using floodgate::store::MemoryState;
using floodgate::store::MemoryStore;
using floodgate::store::Outcome;

namespace {

constexpr Micros kSec = kMicrosPerSecond;
constexpr Micros T0 = 1'699'999'200LL * kSec;  // a multiple of 1 h

Params fixed_window(std::int64_t limit, Micros window) {
  Params p;
  p.algorithm = Algorithm::fixed_window;
  p.capacity = limit;
  p.window = window;
  return p;
}
Params token_bucket(std::int64_t capacity, double rate) {
  Params p;
  p.algorithm = Algorithm::token_bucket;
  p.capacity = capacity;
  p.per_second = rate;
  return p;
}
Params concurrency(std::int64_t limit) {
  Params p;
  p.algorithm = Algorithm::concurrency;
  p.capacity = limit;
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

Outcome acquire(MemoryState& s, std::vector<Item> items) {
  return s.acquire(items);
}

// Keys that the store puts into one given shard (MemoryState::shard_index).
std::vector<std::string> keys_in_shard(std::size_t shard, std::size_t n, const std::string& tag) {
  std::vector<std::string> out;
  for (std::size_t i = 0; out.size() < n; ++i) {
    std::string k = "rl:r:" + tag + ":{" + std::to_string(i) + "}";
    if (MemoryState::shard_index(k) == shard) out.push_back(k);
  }
  return out;
}

TEST(MemoryState, OneItemIsDecidedAndCharged) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto a = item("rl:r:l:{a}", fixed_window(3, 60 * kSec));
  for (int i = 1; i <= 3; ++i) {
    auto o = acquire(s, {a});
    ASSERT_TRUE(o.admitted);
    ASSERT_EQ(o.decisions.size(), 1u);
    EXPECT_EQ(o.decisions[0].remaining, 3 - i);
    EXPECT_EQ(o.decisions[0].limit, 3);
  }
  auto refused = acquire(s, {a});
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.decisions[0].retry_after, 60 * kSec);
  EXPECT_EQ(s.size(), 1u);
  // Other keys are independent.
  EXPECT_TRUE(acquire(s, {item("rl:r:l:{b}", fixed_window(3, 60 * kSec))}).admitted);
  // The store's clock decides: a new window.
  clock.advance(60 * kSec);
  EXPECT_TRUE(acquire(s, {a}).admitted);
}

TEST(MemoryState, AllOrNothingAcrossKeys) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto wide = item("rl:r:wide:{x}", fixed_window(10, 60 * kSec));
  auto narrow = item("rl:r:narrow:{x}", fixed_window(1, 60 * kSec));

  auto first = acquire(s, {wide, narrow});
  ASSERT_TRUE(first.admitted);
  ASSERT_EQ(first.decisions.size(), 2u);
  EXPECT_EQ(first.decisions[0].remaining, 9);
  EXPECT_EQ(first.decisions[1].remaining, 0);

  for (int i = 0; i < 5; ++i) {
    auto o = acquire(s, {wide, narrow});
    EXPECT_FALSE(o.admitted);
    ASSERT_EQ(o.decisions.size(), 2u);
    EXPECT_TRUE(o.decisions[0].admitted) << "the first item alone would have passed";
    EXPECT_FALSE(o.decisions[1].admitted);
  }
  // The refused requests charged nothing to the first key: 9 still left.
  auto alone = acquire(s, {wide});
  ASSERT_TRUE(alone.admitted);
  EXPECT_EQ(alone.decisions[0].remaining, 8);

  // And in the other order: the first item refuses, the second is not charged.
  auto other = item("rl:r:other:{x}", token_bucket(5, 1));
  EXPECT_FALSE(acquire(s, {narrow, other}).admitted);
  auto o = acquire(s, {other});
  EXPECT_EQ(o.decisions[0].remaining, 4) << "a full bucket: the refused request took nothing";
}

TEST(MemoryState, CostsAreChargedPerItem) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto a = item("rl:r:a:{x}", token_bucket(100, 1), 40);
  auto b = item("rl:r:b:{x}", fixed_window(100, 60 * kSec), 30);
  auto o = acquire(s, {a, b});
  ASSERT_TRUE(o.admitted);
  EXPECT_EQ(o.decisions[0].remaining, 60);
  EXPECT_EQ(o.decisions[1].remaining, 70);
  a.cost = 61;  // more than is left of a: neither charged
  EXPECT_FALSE(acquire(s, {a, b}).admitted);
  a.cost = 60;
  b.cost = 70;
  o = acquire(s, {a, b});
  ASSERT_TRUE(o.admitted);
  EXPECT_EQ(o.decisions[0].remaining, 0);
  EXPECT_EQ(o.decisions[1].remaining, 0);
}

TEST(MemoryState, ShadowItemsNeverRefuseAndAreChargedOnlyWhenTheyAdmit) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto enforced = item("rl:r:enforced:{x}", fixed_window(100, 60 * kSec));
  auto shadow = item("rl:r:shadow:{x}", fixed_window(3, 60 * kSec), 2, /*enforce=*/false);

  auto o = acquire(s, {enforced, shadow});
  EXPECT_TRUE(o.admitted);
  EXPECT_TRUE(o.decisions[1].admitted);
  EXPECT_EQ(o.decisions[1].remaining, 1) << "the shadow limit admitted: charged 2";

  o = acquire(s, {enforced, shadow});
  EXPECT_TRUE(o.admitted) << "a shadow refusal never refuses the request";
  EXPECT_FALSE(o.decisions[1].admitted) << "but is reported";
  EXPECT_EQ(o.decisions[0].remaining, 98) << "the enforcing limit was charged";

  // The refusing shadow item took nothing: 1 is still left of it.
  shadow.cost = 1;
  o = acquire(s, {enforced, shadow});
  EXPECT_TRUE(o.decisions[1].admitted);
  EXPECT_EQ(o.decisions[1].remaining, 0);

  // A shadow-only request is always admitted.
  o = acquire(s, {shadow});
  EXPECT_TRUE(o.admitted);
  EXPECT_FALSE(o.decisions[0].admitted);

  // An enforcing refusal charges no shadow item either, even one that would admit.
  auto tight = item("rl:r:tight:{x}", fixed_window(1, 60 * kSec));
  auto roomy = item("rl:r:roomy:{x}", fixed_window(5, 60 * kSec), 1, false);
  ASSERT_TRUE(acquire(s, {tight}).admitted);
  o = acquire(s, {tight, roomy});
  EXPECT_FALSE(o.admitted);
  EXPECT_TRUE(o.decisions[1].admitted);
  EXPECT_EQ(acquire(s, {roomy}).decisions[0].remaining, 4) << "roomy was not charged before";
}

TEST(MemoryState, RefusalsConsumeNothing) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto b = item("rl:r:b:{x}", token_bucket(2, 1));
  ASSERT_TRUE(acquire(s, {b}).admitted);
  ASSERT_TRUE(acquire(s, {b}).admitted);
  for (int i = 0; i < 100; ++i) {
    clock.advance(1000);  // 0.1 s in 100 steps: a flood of refusals
    ASSERT_FALSE(acquire(s, {b}).admitted) << i;
  }
  clock.set(T0 + 1 * kSec);
  auto o = acquire(s, {b});
  EXPECT_TRUE(o.admitted) << "refusals did not delay the refill";
  EXPECT_EQ(o.decisions[0].remaining, 0);
}

TEST(MemoryState, AdjustSettlesAfterTheFact) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto b = item("rl:r:tokens:{x}", token_bucket(100, 10), 10);
  ASSERT_TRUE(acquire(s, {b}).admitted);  // 90 left
  s.adjust(b, 50);                        // the true cost was 60
  b.cost = 41;
  EXPECT_FALSE(acquire(s, {b}).admitted);
  b.cost = 40;
  EXPECT_TRUE(acquire(s, {b}).admitted);  // 0 left
  s.adjust(b, 500);                       // debt: at most one capacity
  b.cost = 1;
  auto o = acquire(s, {b});
  EXPECT_FALSE(o.admitted);
  EXPECT_EQ(o.decisions[0].retry_after, 10100 * 1000) << "100 tokens of debt + 1 at 10/s";
  s.adjust(b, -1000);  // a refund back to full: the key is neutral and forgotten
  EXPECT_EQ(s.size(), 0u);
  EXPECT_TRUE(acquire(s, {b}).admitted);
}

TEST(MemoryState, ConcurrencyLeasesAreReleased) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto c = item("rl:r:conc:{x}", concurrency(2));
  EXPECT_TRUE(acquire(s, {c}).admitted);
  EXPECT_TRUE(acquire(s, {c}).admitted);
  auto refused = acquire(s, {c});
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.decisions[0].retry_after, 1 * kSec);
  s.release(c);
  EXPECT_TRUE(acquire(s, {c}).admitted);
  s.release(c);
  s.release(c);
  EXPECT_EQ(s.size(), 0u) << "no lease held: the key is gone";
  s.release(c);  // a stray release of an unknown key changes nothing
  EXPECT_EQ(s.size(), 0u);
  EXPECT_TRUE(acquire(s, {c}).admitted);
  EXPECT_TRUE(acquire(s, {c}).admitted);
  EXPECT_FALSE(acquire(s, {c}).admitted);
  // A lease is forgotten after an hour if it is never returned (an instance died): not sooner.
  clock.advance(3600 * kSec - 1);
  EXPECT_FALSE(acquire(s, {c}).admitted) << "a microsecond before the lease time";
  clock.advance(1);
  EXPECT_TRUE(acquire(s, {c}).admitted);
}

TEST(MemoryState, NeutralStatesAreNeverStored) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto o = acquire(s, {item("rl:r:zero:{x}", token_bucket(5, 1), 0),
                       item("rl:r:zero:{y}", fixed_window(5, 60 * kSec), 0)});
  EXPECT_TRUE(o.admitted);
  EXPECT_EQ(s.size(), 0u) << "a cost of 0 on a new key changes nothing worth keeping";
}

TEST(MemoryState, KeyExpiresAfterTimeToNeutral) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto b = item("rl:r:b:{x}", token_bucket(10, 10), 5);  // neutral again 0.5 s later
  ASSERT_TRUE(acquire(s, {b}).admitted);
  EXPECT_EQ(s.size(), 1u);
  auto w = item("rl:r:w:{x}", fixed_window(1, 10 * kSec));
  clock.set(T0 + 3 * kSec);
  ASSERT_TRUE(acquire(s, {w}).admitted);  // expires with its window, at T0 + 10 s
  EXPECT_EQ(s.size(), 2u);

  clock.set(T0 + 10 * kSec - 1);
  EXPECT_FALSE(acquire(s, {w}).admitted);
  clock.set(T0 + 10 * kSec);
  auto again = acquire(s, {w});
  EXPECT_TRUE(again.admitted) << "the expired entry reads as a new caller";
  EXPECT_EQ(again.decisions[0].remaining, 0);
  EXPECT_EQ(s.size(), 2u) << "expired entries stay until a sweep (or an overwrite) removes them";
}

// Expired entries are removed lazily: the shard sweeps once it has seen as many inserts as it
// holds keys (at least 64). In a shard that has never been swept, that is the 64th insert.
TEST(MemoryState, ExpiredKeysAreSweptByLaterInserts) {
  FakeClock clock(T0);
  MemoryState s(clock, 1'000'000);
  auto keys = keys_in_shard(5, 64, "sweep");
  for (std::size_t i = 0; i < 50; ++i)
    ASSERT_TRUE(acquire(s, {item(keys[i], fixed_window(1, 1 * kSec))}).admitted);
  EXPECT_EQ(s.size(), 50u);
  clock.advance(2 * kSec);  // all 50 expired
  for (std::size_t i = 50; i < 63; ++i)
    ASSERT_TRUE(acquire(s, {item(keys[i], fixed_window(1, 1 * kSec))}).admitted);
  EXPECT_EQ(s.size(), 63u) << "not swept yet";
  ASSERT_TRUE(acquire(s, {item(keys[63], fixed_window(1, 1 * kSec))}).admitted);
  EXPECT_EQ(s.size(), 14u) << "the 64th insert swept the 50 expired keys";
}

// The sweep must keep working after the first one: a shard that holds live keys and then sees
// at least as many inserts as it holds keys sweeps its expired ones ("as many inserts as it
// holds keys", memory_store.cpp). Idle callers must not cost memory until the max_keys cap.
TEST(MemoryState, ExpiredKeysAreSweptAgainAfterAFirstSweep) {
  FakeClock clock(T0);
  MemoryState s(clock, 1'000'000);
  auto keys = keys_in_shard(7, 100 + 400, "again");
  // 100 short-lived keys (the 64th insert sweeps, finding nothing expired).
  for (std::size_t i = 0; i < 100; ++i)
    ASSERT_TRUE(acquire(s, {item(keys[i], fixed_window(1, 1 * kSec))}).admitted);
  clock.advance(2 * kSec);  // all 100 expired
  // 400 new, long-lived keys into the same shard: four times as many inserts as it held.
  for (std::size_t i = 100; i < 500; ++i)
    ASSERT_TRUE(acquire(s, {item(keys[i], fixed_window(1, 3600 * kSec))}).admitted);
  EXPECT_EQ(s.size(), 400u) << "the 100 expired keys are still held: the shard never sweeps again "
                               "while inserts_since_sweep < map.size(), which always holds once "
                               "any key survived a sweep";
}

TEST(MemoryState, MaxKeysCapEvictsAndCounts) {
  FakeClock clock(T0);
  // 64 shards of 16 keys each.
  MemoryState s(clock, 64 * 16);
  for (int i = 0; i < 5000; ++i)
    ASSERT_TRUE(
        acquire(s, {item("rl:r:cap:{" + std::to_string(i) + "}", fixed_window(5, 3600 * kSec))})
            .admitted);
  EXPECT_LE(s.size(), 64u * 16);
  EXPECT_GE(s.size(), 64u * 15) << "every shard is full after 5000 inserts";
  EXPECT_EQ(s.evictions(), 5000 - s.size()) << "every insert beyond the cap evicted one live key";

  // Expired keys make room without counting as evictions.
  FakeClock clock2(T0);
  MemoryState t(clock2, 64 * 16);
  auto keys = keys_in_shard(3, 32, "cap");
  for (int i = 0; i < 16; ++i)
    ASSERT_TRUE(acquire(t, {item(keys[i], fixed_window(1, 1 * kSec))}).admitted);
  clock2.advance(2 * kSec);
  for (int i = 16; i < 32; ++i)
    ASSERT_TRUE(acquire(t, {item(keys[i], fixed_window(1, 1 * kSec))}).admitted);
  EXPECT_EQ(t.evictions(), 0u);
  EXPECT_EQ(t.size(), 16u);
  // One more live key in the full shard: one eviction.
  ASSERT_TRUE(
      acquire(t, {item(keys_in_shard(3, 33, "cap")[32], fixed_window(1, 1 * kSec))}).admitted);
  EXPECT_EQ(t.evictions(), 1u);
  EXPECT_EQ(t.size(), 16u);
}

// store.max_keys is "a cap on live keys"; the config accepts values from 1000.
TEST(MemoryState, NeverHoldsMoreThanMaxKeys) {
  for (std::size_t max_keys : {1000u, 1500u, 5000u}) {
    FakeClock clock(T0);
    MemoryState s(clock, max_keys);
    const int n = static_cast<int>(max_keys) * 3;
    for (int i = 0; i < n; ++i)
      acquire(s, {item("rl:r:max:{" + std::to_string(i) + "}", fixed_window(5, 3600 * kSec))});
    EXPECT_LE(s.size(), max_keys) << "max_keys " << max_keys << " (16 per shard at least: 1024)";
    EXPECT_EQ(s.evictions() + s.size(), static_cast<std::uint64_t>(n));
  }
}

TEST(MemoryState, ThreadsShareOneKeyExactly) {
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  const auto limit = item("rl:r:shared:{x}", fixed_window(5000, 3600 * kSec));
  std::atomic<int> admitted{0};
  auto worker = [&] {
    std::vector<Item> items{limit};
    int mine = 0;
    for (int i = 0; i < 10000; ++i)
      if (s.acquire(items).admitted) ++mine;
    admitted += mine;
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  EXPECT_EQ(admitted.load(), 5000);
}

TEST(MemoryState, ThreadsWithOverlappingKeysInEitherOrder) {
  // Two keys in different shards, acquired in opposite orders: no deadlock, exact totals.
  FakeClock clock(T0);
  MemoryState s(clock, 100000);
  auto k1 = keys_in_shard(1, 1, "x")[0];
  auto k2 = keys_in_shard(60, 1, "y")[0];
  auto a = item(k1, fixed_window(3000, 3600 * kSec));
  auto b = item(k2, fixed_window(1000000, 3600 * kSec));
  std::atomic<int> admitted{0};
  auto worker = [&](std::vector<Item> items) {
    int mine = 0;
    for (int i = 0; i < 5000; ++i)
      if (s.acquire(items).admitted) ++mine;
    admitted += mine;
  };
  std::thread t1(worker, std::vector<Item>{a, b}), t2(worker, std::vector<Item>{b, a});
  t1.join();
  t2.join();
  EXPECT_EQ(admitted.load(), 3000);
  // b was charged exactly once per admitted request (all-or-nothing under contention).
  auto o = acquire(s, {b});
  EXPECT_EQ(o.decisions[0].remaining, 1000000 - 3000 - 1);
}

TEST(MemoryStore, CompletesOnTheExecutorNeverInline) {
  FakeClock clock(T0);
  MemoryState state(clock, 100000);
  boost::asio::io_context io;
  MemoryStore store(state, io.get_executor());
  bool done = false;
  bool admitted = false;
  store.async_acquire({item("rl:r:async:{x}", fixed_window(1, 60 * kSec))}, [&](AcquireResult r) {
    done = true;
    admitted = std::get<Outcome>(r).admitted;
  });
  EXPECT_FALSE(done) << "the handler must not run inside async_acquire";
  io.run();
  EXPECT_TRUE(done);
  EXPECT_TRUE(admitted);
  EXPECT_EQ(state.size(), 1u) << "decided (and charged) at the call";
}

}  // namespace
