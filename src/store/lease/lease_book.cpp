// The units in hand, per key, for one instance (store/leased_store.hpp).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <utility>

#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/leased_store.hpp"

namespace floodgate::store {

namespace {

bool is_window(const limit::Params& p) {
  return p.algorithm == config::Algorithm::fixed_window ||
         p.algorithm == config::Algorithm::sliding_window;
}

// Window units go back only this long before their window ends: a refund that reached the
// store in the next window would free room there that the units never took (an over-admission
// the next window would pay for). Later, they are dropped instead.
constexpr limit::Micros kWindowReturnMargin = limit::kMicrosPerSecond;

void bump(std::atomic<std::uint64_t> metrics::LeaseCounters::*counter, metrics::LeaseCounters* c,
          std::int64_t n) {
  if (c && n > 0) (c->*counter).fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
}

}  // namespace

LeaseBook::LeaseBook() {
  std::random_device rd;
  char id[17];
  std::snprintf(id, sizeof id, "%08x%08x", rd(), rd());
  holder_ = id;
}

LeaseBook::Shard& LeaseBook::shard_of(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

const LeaseBook::Shard& LeaseBook::shard_of(const std::string& key) const {
  return shards_[std::hash<std::string>{}(key) % kShards];
}

bool LeaseBook::same_terms(const Lease& l, const Item& item) {
  const auto& p = item.params;
  return l.params.algorithm == p.algorithm && l.params.capacity == p.capacity &&
         l.params.per_second == p.per_second && l.params.window == p.window &&
         l.size == item.leased.size && l.ttl == item.leased.ttl;
}

LeaseBook::Lease* LeaseBook::current(Shard& shard, const Item& item) {
  auto it = shard.leases.find(item.key);
  return it != shard.leases.end() && same_terms(it->second, item) ? &it->second : nullptr;
}

bool LeaseBook::worth_returning(const Lease& l, limit::Micros now) {
  return l.window_end == 0 || now + kWindowReturnMargin < l.window_end;
}

LeaseBook::GiveBack LeaseBook::returned(Item item, std::int64_t units, std::int64_t settled,
                                        bool returning) const {
  item.take_up_to = 0;
  item.leased.holder = holder_;
  item.leased.settled = settled;
  item.leased.returning = returning;
  bump(&metrics::LeaseCounters::returned, item.leased.counters, units);
  return {std::move(item), std::max<std::int64_t>(0, units)};
}

void LeaseBook::give(const std::string& key, Lease& l, std::int64_t units, bool report,
                     GiveBacks& back) const {
  // Windows keep no record of who holds what; a lease past its ttl is no longer in the
  // store's record either (a report would be taken from the holder's next lease).
  if (!report || is_window(l.params)) l.spent = 0;
  if (units <= 0 && l.spent <= 0) return;
  Item item;
  item.key = key;
  item.params = l.params;
  item.leased.size = l.size;
  item.leased.ttl = l.ttl;
  item.leased.counters = l.counters;
  back.push_back(returned(std::move(item), units, std::exchange(l.spent, 0), report));
}

void LeaseBook::expire(const std::string& key, Lease& l, limit::Micros now, GiveBacks& back) const {
  if (l.units == 0 && l.spent == 0) return;
  if (!worth_returning(l, now)) {
    if (now >= l.window_end) l.units = 0;  // the window they were taken from is over
    return;
  }
  if (now < l.expires) return;
  // Past its ttl the store no longer counts the lease as held (its until is no earlier than
  // this): the units go back as a plain refund.
  give(key, l, l.units, false, back);
  l.units = 0;
}

limit::Decision LeaseBook::local_decision(const Lease& l, std::int64_t cost, limit::Micros now) {
  limit::Decision d;
  d.admitted = true;
  d.limit = l.params.capacity;
  // What the store had left at the last grant, plus what is in hand (SPEC): the units a
  // request could still count on.
  d.remaining = std::min(l.params.capacity, std::max<std::int64_t>(0, l.last.remaining) + l.units);
  d.reset_after = std::max<limit::Micros>(0, l.last.reset_after - (now - l.last_at));
  d.granted = cost;
  return d;
}

LeaseBook::Take LeaseBook::take(const Item& item, limit::Micros now, GiveBacks& back,
                                bool may_wait) {
  auto& shard = shard_of(item.key);
  std::lock_guard lock(shard.mutex);
  auto [it, fresh] = shard.leases.try_emplace(item.key);
  auto& l = it->second;
  if (fresh || !same_terms(l, item)) {
    // A new key, or its limit changed on a reload: what the old terms took goes back.
    if (!fresh) {
      expire(item.key, l, now, back);
      if (worth_returning(l, now)) give(item.key, l, l.units, true, back);
    }
    const auto pending = fresh ? 0 : l.pending;
    l = Lease{};
    l.params = item.params;
    l.size = item.leased.size;
    l.ttl = item.leased.ttl;
    l.pending = pending;  // answered later; granted() sees the terms changed and returns it
  }
  l.counters = item.leased.counters;
  expire(item.key, l, now, back);
  Take t;
  if (l.units >= item.cost) {
    l.units -= item.cost;
    l.spent += item.cost;
    t.local = true;
    t.decision = local_decision(l, item.cost, now);
    bump(&metrics::LeaseCounters::local, l.counters, 1);
    // Below half: more is asked for in the background, so a hot key never waits.
    if (!closed_ && l.pending == 0 && l.units * 2 < l.size) {
      t.top_up = l.size - l.units;
      l.pending += t.top_up;
      t.settled = std::exchange(l.spent, 0);
    }
    return t;
  }
  if (may_wait && l.pending > 0) {
    t.wait = true;
    return t;
  }
  t.reserved = l.units;
  l.units = 0;
  // Reported with the grant; what this request takes from hand, with the next one.
  t.settled = std::exchange(l.spent, t.reserved);
  if (!closed_) {
    // The store counts what an instance holds, unused or spent and not yet reported, until it
    // reports it: this request's cost is part of it, so the hand gets at most size - cost and
    // the instance holds at most `size` (config::LeaseSettings::early_refusal_bound counts on it).
    t.spare = std::max<std::int64_t>(0, l.size - l.pending - item.cost);
    l.pending += t.spare;
  }
  return t;
}

std::vector<LeaseBook::Wake> LeaseBook::granted(const Item& item, std::int64_t need,
                                                std::int64_t spare, std::int64_t settled,
                                                const limit::Decision* answer, limit::Micros sent,
                                                limit::Micros store_now, limit::Micros now,
                                                limit::Decision& decision, GiveBacks& back) {
  auto& shard = shard_of(item.key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.leases.find(item.key);
  Lease* l = current(shard, item);
  std::vector<Wake> wake;
  if (it != shard.leases.end()) {
    it->second.pending = std::max<std::int64_t>(0, it->second.pending - spare);
    if (!answer) it->second.spent += settled;  // not reported after all
    if (spare > 0) wake.swap(it->second.waiting);
  }
  if (!answer) return wake;
  if (!answer->admitted) {
    decision = *answer;
    if (l) l->last = *answer, l->last_at = now;
    return wake;
  }
  const std::int64_t extra = std::max<std::int64_t>(0, answer->granted - need);
  bump(&metrics::LeaseCounters::leases, item.leased.counters, 1);
  bump(&metrics::LeaseCounters::granted, item.leased.counters, answer->granted);
  if (!l || closed_) {
    // Nobody keeps them (a drain, or the limit changed meanwhile): back at once, and the
    // request's own units reported spent.
    back.push_back(returned(item, extra, need, true));
  } else {
    if (is_window(l->params) && store_now > 0) {
      // The units belong to the window the store was in. Its end in local time, counted from
      // when the grant was sent (the store decided later than that): never late.
      const auto w = l->params.window;
      const auto end = sent + (store_now - store_now % w + w - store_now);
      // Each grant's estimate of the end differs by the round trip's jitter; another window's
      // by about a window. Units of another window are void (or soon); the same window's stay,
      // with the earlier estimate kept.
      if (l->window_end == 0 || std::abs(end - l->window_end) > w / 2) {
        l->units = 0;
        l->window_end = end;
      } else {
        l->window_end = std::min(l->window_end, end);
      }
    }
    l->units += extra;
    l->spent += need;
    l->last = *answer;
    l->last_at = now;
    // From when it was asked: the store holds the units for the holder until its own clock
    // at the grant plus ttl, and the grant came later than the asking.
    l->expires = sent + l->ttl;
  }
  if (l) {
    decision = local_decision(*l, item.cost, now);
    decision.reset_after = answer->reset_after;
    if (decision.remaining == 0) decision.retry_after = answer->retry_after;
  } else {
    decision = *answer;
    decision.remaining = std::max<std::int64_t>(0, answer->remaining);
  }
  return wake;
}

bool LeaseBook::await(const Item& item, Wake wake) {
  auto& shard = shard_of(item.key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.leases.find(item.key);
  if (it == shard.leases.end() || it->second.pending == 0) return false;
  it->second.waiting.push_back(std::move(wake));
  return true;
}

void LeaseBook::put_back(const Item& item, std::int64_t units, limit::Micros now, GiveBacks& back) {
  if (units <= 0) return;
  auto& shard = shard_of(item.key);
  std::lock_guard lock(shard.mutex);
  Lease* l = current(shard, item);
  if (is_window(item.params)) {
    // Units of a window are worth something only in it: back into the hand while it lasts (a
    // request refused by another limit in its last second included: dropped, they would be
    // counted by the store and spent by nobody), to the store only when worth returning.
    if (!l || now >= l->window_end) return;
    if (!closed_) {
      l->units += units;
    } else if (worth_returning(*l, now)) {
      back.push_back(returned(item, units, 0, false));
    }
    return;
  }
  if (l && !closed_ && now < l->expires) {
    // Counted as spent when taken: those not reported yet are simply held again. Any already
    // reported are no longer held in the store's eyes, so they go back to it.
    const auto again = std::min(units, l->spent);
    l->spent -= again;
    l->units += again;
    units -= again;
    if (units == 0) return;
  }
  back.push_back(returned(item, units, 0, false));  // no longer held in the store's eyes
}

bool LeaseBook::sweep(limit::Micros now, GiveBacks& back) {
  bool kept = false;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (auto it = shard.leases.begin(); it != shard.leases.end();) {
      auto& l = it->second;
      expire(it->first, l, now, back);
      // Idle for a ttl with nothing in hand or asked for: forgotten (the next request asks).
      if (l.units == 0 && l.pending == 0 && now >= l.last_at + l.ttl) {
        it = shard.leases.erase(it);
        continue;
      }
      kept = true;
      ++it;
    }
  }
  return kept;
}

void LeaseBook::close(limit::Micros now, GiveBacks& back) {
  closed_ = true;
  return_all(now, back);
}

void LeaseBook::return_all(limit::Micros now, GiveBacks& back) {
  for (auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (auto& [key, l] : shard.leases) {
      if (worth_returning(l, now)) give(key, l, l.units, now < l.expires, back);
      l.units = 0;
    }
  }
}

void LeaseBook::reconfigure(const std::string& leased, limit::Micros now, GiveBacks& back) {
  {
    std::lock_guard lock(definition_mutex_);
    const bool first = !definition_;
    if (definition_ == leased) return;
    definition_ = leased;
    if (first) return;  // the config the instance started with: nothing is held yet
  }
  return_all(now, back);
}

std::int64_t LeaseBook::in_hand(const std::string& key, limit::Micros now) const {
  const auto& shard = shard_of(key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.leases.find(key);
  if (it == shard.leases.end() || now >= it->second.expires) return 0;
  return it->second.units;
}

std::int64_t LeaseBook::asked(const std::string& key) const {
  const auto& shard = shard_of(key);
  std::lock_guard lock(shard.mutex);
  auto it = shard.leases.find(key);
  return it == shard.leases.end() ? 0 : it->second.pending;
}

std::size_t LeaseBook::size() const {
  std::size_t n = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    n += shard.leases.size();
  }
  return n;
}

}  // namespace floodgate::store
