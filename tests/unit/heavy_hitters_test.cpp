// The heavy-hitter summary behind /top and the replay's busiest callers: Space-Saving's
// guarantees checked against exact counts on skewed and uniform streams, merged across
// workers and slices, memory that does not grow with distinct keys, and the sliding window.
#include "floodgate/limit/heavy_hitters.hpp"

#include <gtest/gtest.h>

#include "floodgate/decide/top_board.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

namespace floodgate::limit {
namespace {

// Keys 1..n drawn with P(k) proportional to 1/k^s (s = 0: uniform), fixed seed.
std::vector<std::uint64_t> stream(std::size_t length, std::size_t keys, double s,
                                  std::uint32_t seed) {
  std::vector<double> weights(keys);
  for (std::size_t k = 0; k < keys; ++k) weights[k] = 1.0 / std::pow(static_cast<double>(k + 1), s);
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> out(length);
  for (auto& v : out) v = key_id("caller-" + std::to_string(pick(rng)));
  return out;
}

struct Checked {
  double worst_error = 0;        // the largest (count - true) seen, as a share of total/m
  double worst_stated = 0;       // the largest stated error, as a share of total/m
  std::size_t heavy_missed = 0;  // keys above total/m not tracked
};

// Every guarantee of the summary against the exact counts of what went into it.
Checked check(const std::vector<HeavyEntry>& entries, std::uint64_t floor, std::uint64_t total,
              std::size_t capacity, const std::unordered_map<std::uint64_t, std::uint64_t>& truth) {
  Checked c;
  const double bound = static_cast<double>(total) / static_cast<double>(capacity);
  std::map<std::uint64_t, const HeavyEntry*> tracked;
  for (const auto& e : entries) {
    tracked[e.id] = &e;
    const auto it = truth.find(e.id);
    const std::uint64_t real = it == truth.end() ? 0 : it->second;
    EXPECT_LE(real, e.count) << "a count never understates";
    EXPECT_LE(e.count - real, e.error) << "it overstates by at most its error";
    EXPECT_LE(static_cast<double>(e.error), bound + 1e-9) << "no error exceeds total/m";
    c.worst_error = std::max(c.worst_error, static_cast<double>(e.count - real) / bound);
    c.worst_stated = std::max(c.worst_stated, static_cast<double>(e.error) / bound);
  }
  for (const auto& [id, real] : truth) {
    if (tracked.count(id)) continue;
    EXPECT_LE(real, floor) << "an untracked key was seen at most floor() times";
    if (static_cast<double>(real) > bound) ++c.heavy_missed;
  }
  return c;
}

std::unordered_map<std::uint64_t, std::uint64_t> exact(const std::vector<std::uint64_t>& s) {
  std::unordered_map<std::uint64_t, std::uint64_t> out;
  for (auto id : s) ++out[id];
  return out;
}

void feed(HeavyHitters& h, const std::vector<std::uint64_t>& s) {
  for (auto id : s) {
    bool fresh = false;
    auto& e = h.add(id, 1, fresh);
    if (fresh) e.caller = std::to_string(id);
  }
}

TEST(HeavyHitters, ExactWhileThereAreNoMoreKeysThanCounters) {
  HeavyHitters h(8);
  bool fresh = false;
  for (int round = 0; round < 5; ++round)
    for (std::uint64_t id = 1; id <= 8; ++id) h.add(id, id, fresh);
  auto top = h.top(3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 8u);
  EXPECT_EQ(top[0].count, 40u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[2].id, 6u);
  EXPECT_EQ(h.floor(), 5u);  // full: the least count
  EXPECT_EQ(h.total(), 5u * 36u);
}

TEST(HeavyHitters, FreshOnlyWhenTheKeyTakesACounter) {
  HeavyHitters h(2);
  bool fresh = false;
  h.add(1, 1, fresh);
  EXPECT_TRUE(fresh);
  h.add(1, 1, fresh);
  EXPECT_FALSE(fresh);
  h.add(2, 1, fresh);
  EXPECT_TRUE(fresh);
  auto& e = h.add(3, 1, fresh);  // displaces key 2 (count 1): inherits it
  EXPECT_TRUE(fresh);
  EXPECT_TRUE(e.caller.empty());
  EXPECT_EQ(e.count, 2u);
  EXPECT_EQ(e.error, 1u);
  EXPECT_EQ(h.find(2), nullptr);
  ASSERT_NE(h.find(1), nullptr);
  EXPECT_EQ(h.find(1)->count, 2u);
}

TEST(HeavyHitters, SkewedStreamKeepsEveryHeavyKeyWithinTheBound) {
  const std::size_t m = 80;  // 4 x k for the default k of 20
  const auto s = stream(1'000'000, 100'000, 1.1, 7);
  HeavyHitters h(m);
  feed(h, s);
  const auto truth = exact(s);
  auto c = check(h.entries(), h.floor(), h.total(), m, truth);
  EXPECT_EQ(c.heavy_missed, 0u);
  // The top 10 by count are the true top 10, in order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> real(truth.begin(), truth.end());
  std::sort(real.begin(), real.end(), [](auto a, auto b) { return a.second > b.second; });
  auto top = h.top(10);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(top[i].id, real[i].first) << i;
  std::printf(
      "[ measured ] zipf 1.1, 1M requests, 100k keys, m=%zu: worst overstatement %.3f "
      "of total/m, worst stated error %.3f of total/m\n",
      m, c.worst_error, c.worst_stated);
}

TEST(HeavyHitters, UniformStreamStaysWithinTheBound) {
  const std::size_t m = 80;
  const auto s = stream(1'000'000, 100'000, 0.0, 11);
  HeavyHitters h(m);
  feed(h, s);
  auto c = check(h.entries(), h.floor(), h.total(), m, exact(s));
  EXPECT_EQ(c.heavy_missed, 0u);  // nobody is above total/m: nothing to miss, nothing invented
  std::printf(
      "[ measured ] uniform, 1M requests, 100k keys, m=%zu: worst overstatement %.3f "
      "of total/m, worst stated error %.3f of total/m\n",
      m, c.worst_error, c.worst_stated);
}

TEST(HeavyHitters, CountsAddUpToTheTotalThroughAnyChurn) {
  // Space-Saving's invariant: every add lands on exactly one counter. Small capacity and many
  // keys exercise the index's deletions.
  HeavyHitters h(5);
  std::mt19937 rng(3);
  bool fresh = false;
  for (int i = 0; i < 200'000; ++i) {
    h.add(rng() % 1000, 1 + rng() % 3, fresh);
    if (i % 9973 == 0) {
      std::uint64_t sum = 0;
      for (const auto& e : h.entries()) {
        sum += e.count;
        ASSERT_EQ(h.find(e.id), &e);
      }
      ASSERT_EQ(sum, h.total());
    }
  }
}

TEST(HeavyHitters, MergedWorkersAndSlicesKeepTheGuarantees) {
  // Two workers, six slices each: twelve summaries of parts of one skewed stream.
  const std::size_t m = 80;
  const auto s = stream(600'000, 50'000, 1.05, 5);
  std::vector<HeavyHitters> parts(12, HeavyHitters(m));
  std::mt19937 rng(9);
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto& part =
        parts[(i * 6 / s.size()) * 2 + rng() % 2];  // the slice by time, a worker at random
    bool fresh = false;
    part.add(s[i], 1, fresh);
  }
  std::vector<const HeavyHitters*> ptrs;
  for (const auto& p : parts) ptrs.push_back(&p);
  auto merged = merge(ptrs, 20);
  ASSERT_EQ(merged.entries.size(), 20u);
  EXPECT_EQ(merged.total, s.size());
  const auto truth = exact(s);
  auto c = check(merged.entries, merged.floor, merged.total, m, truth);
  // Only the 20 listed are returned: the heavy ones must be among them, in true order.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> real(truth.begin(), truth.end());
  std::sort(real.begin(), real.end(), [](auto a, auto b) { return a.second > b.second; });
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(merged.entries[i].id, real[i].first) << i;
  std::printf(
      "[ measured ] merged 2 workers x 6 slices, zipf 1.05, 600k requests: worst "
      "overstatement %.3f of total/m, worst stated error %.3f of total/m\n",
      c.worst_error, c.worst_stated);
}

// /top as a worker sizes it (decide::TopBoard), with the smallest k: a botnet's 100,000
// distinct callers of one request each, and ten heavy callers of 0.5 % to 5 % of the requests,
// over two workers and six slices of a window. Every caller above 1 % of the requests is
// tracked with its true count to within 1 % of them, whatever k: k = 5 lists the five
// heaviest in their true order, the whole merge lists every caller above 1 %.
TEST(HeavyHitters, TopFindsEveryCallerAbove1PercentAmong100000WithinAnErrorOf1Percent) {
  const std::size_t k = 5;
  const std::size_t m = decide::TopBoard::counters(k);
  const std::vector<double> shares = {0.05,  0.04,  0.03,  0.025, 0.02,
                                      0.015, 0.012, 0.011, 0.008, 0.005};
  double heavy = 0;
  for (auto sh : shares) heavy += sh;
  const std::size_t singles = 100'000;
  const auto total = static_cast<std::size_t>(std::lround(singles / (1 - heavy)));
  std::vector<std::uint64_t> s;
  for (std::size_t i = 0; i < singles; ++i) s.push_back(key_id("bot-" + std::to_string(i)));
  for (std::size_t h = 0; h < shares.size(); ++h)
    for (long i = 0; i < std::lround(shares[h] * static_cast<double>(total)); ++i)
      s.push_back(key_id("heavy-" + std::to_string(h)));
  std::mt19937_64 rng(38);
  std::shuffle(s.begin(), s.end(), rng);
  std::vector<HeavyHitters> parts(12, HeavyHitters(m));  // 2 workers x 6 slices
  for (std::size_t i = 0; i < s.size(); ++i) {
    bool fresh = false;
    parts[(i * 6 / s.size()) * 2 + rng() % 2].add(s[i], 1, fresh);
  }
  std::vector<const HeavyHitters*> ptrs;
  for (const auto& p : parts) ptrs.push_back(&p);
  const auto truth = exact(s);
  const double n = static_cast<double>(s.size());

  auto shown = merge(ptrs, k);
  ASSERT_EQ(shown.entries.size(), k);
  for (std::size_t h = 0; h < k; ++h)
    EXPECT_EQ(shown.entries[h].id, key_id("heavy-" + std::to_string(h))) << h;

  auto all = merge(ptrs, ptrs.size() * m);
  double worst = 0, worst_stated = 0;
  for (std::size_t h = 0; h < shares.size(); ++h) {
    const auto id = key_id("heavy-" + std::to_string(h));
    const auto real = truth.at(id);
    auto it = std::find_if(all.entries.begin(), all.entries.end(),
                           [&](const HeavyEntry& e) { return e.id == id; });
    if (static_cast<double>(real) <= n / 100) continue;  // not promised (and may be listed)
    ASSERT_NE(it, all.entries.end()) << "heavy-" << h << " (" << real << ") is not listed";
    EXPECT_GE(it->count, real);
    EXPECT_LE(it->count - real, it->error);
    EXPECT_LE(static_cast<double>(it->error), n / 100) << h;
    worst = std::max(worst, static_cast<double>(it->count - real) / n);
    worst_stated = std::max(worst_stated, static_cast<double>(it->error) / n);
  }
  // No one-request caller is mistaken for one above 1 %.
  for (const auto& e : all.entries) {
    if (truth.at(e.id) == 1) {
      EXPECT_LE(static_cast<double>(e.count), n / 100 + 1) << e.caller;
    }
  }
  std::size_t bytes = 0;
  for (std::size_t w = 0; w < 2; ++w) {
    TopWindow window(m, 60 * kMicrosPerSecond);
    bool fresh = false;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (i % 2 == w) {
        auto& e =
            window.at(1'000 * kMicrosPerSecond + static_cast<Micros>(i) * 500).add(s[i], 1, fresh);
        if (fresh) e.caller = "ip=203.0.113.255";  // an IPv4 caller's text
      }
    bytes = std::max(bytes, window.bytes());
  }
  std::printf(
      "[ measured ] /top, k = %zu (%zu counters a slice): %zu requests from %zu callers over 2 "
      "workers x 6 slices: worst overstatement %.4f %% of the requests, worst stated error "
      "%.4f %% (bound 1 %%); memory per limit and worker %zu bytes\n",
      k, m, s.size(), truth.size(), 100 * worst, 100 * worst_stated, bytes);
}

TEST(HeavyHitters, AMillionDistinctCallersDoNotGrowIt) {
  const std::size_t m = 80;
  HeavyHitters h(m);
  bool fresh = false;
  char text[32];
  auto add = [&](std::uint32_t i) {
    auto& e = h.add(key_id(std::to_string(i)), 1, fresh);
    if (fresh) {
      // 15 bytes whatever i: the text fits std::string's inline buffer, as an IPv4 caller does.
      std::snprintf(text, sizeof text, "ip=10.%03u.%03u.%u", (i >> 16) & 255, (i >> 8) & 255,
                    i % 10);
      e.caller = text;
    }
  };
  for (std::uint32_t i = 0; i < m; ++i) add(i);
  const auto full = h.bytes();
  for (std::uint32_t i = m; i < 1'000'000; ++i) add(i);
  EXPECT_EQ(h.size(), m);
  EXPECT_EQ(h.bytes(), full);
  TopWindow w(m, 60 * kMicrosPerSecond);
  for (std::uint32_t i = 0; i < 1'000'000; ++i) {
    auto& e = w.at(1'000 * kMicrosPerSecond + i * 60).add(key_id(std::to_string(i)), 1, fresh);
    if (fresh) e.caller = "ip=a-caller-text-longer-than-sso";
  }
  std::printf(
      "[ measured ] memory: one summary of %zu counters %zu bytes after %u and after "
      "1M distinct keys; a 60 s window of 6 slices %zu bytes after 1M distinct keys\n",
      m, full, static_cast<unsigned>(m), w.bytes());
  EXPECT_LT(w.bytes(), 6 * (full + m * 48));
}

TEST(TopWindow, CoversTheLastWindowToWithinOneSlice) {
  const Micros second = kMicrosPerSecond;
  TopWindow w(16, 60 * second);  // slices of 10 s
  bool fresh = false;
  const Micros t0 = 1'000'000 * second;  // a multiple of the slice
  w.at(t0).add(1, 5, fresh);
  w.at(t0 + 30 * second).add(2, 3, fresh);
  auto total = [&](Micros now) {
    std::uint64_t n = 0;
    for (const auto* h : w.recent(now)) n += h->total();
    return n;
  };
  EXPECT_EQ(total(t0 + 30 * second), 8u);
  EXPECT_EQ(total(t0 + 59 * second), 8u);
  EXPECT_EQ(total(t0 + 60 * second), 3u);  // the first slice left the window
  EXPECT_EQ(total(t0 + 90 * second), 0u);
  // Counting again reuses a slice that left the window: its old counts are gone.
  w.at(t0 + 60 * second).add(3, 1, fresh);
  EXPECT_TRUE(fresh);
  EXPECT_EQ(total(t0 + 60 * second), 4u);
  auto slices = w.recent(t0 + 60 * second);
  auto merged = merge(slices, 5);
  ASSERT_EQ(merged.entries.size(), 2u);
  EXPECT_EQ(merged.entries[0].id, 2u);
  EXPECT_EQ(merged.entries[0].count, 3u);
  EXPECT_EQ(w.last_used(), t0 + 60 * second);
}

}  // namespace
}  // namespace floodgate::limit
