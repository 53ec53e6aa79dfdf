#include "floodgate/store/memory_store.hpp"

#include <boost/asio/post.hpp>
#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <vector>

namespace floodgate::store {

const char* to_string(StoreError e) {
  switch (e) {
    case StoreError::timeout:
      return "timeout";
    case StoreError::unavailable:
      return "unavailable";
    case StoreError::protocol:
      return "protocol";
  }
  return "?";
}

MemoryState::MemoryState(const limit::Clock& clock, std::size_t max_keys)
    : clock_(clock), max_per_shard_(std::max<std::size_t>(1, max_keys / kShards)) {}

std::size_t MemoryState::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.map.size();
  }
  return n;
}

limit::State MemoryState::current(Shard& shard, const Digest& key, limit::Micros now) {
  auto it = shard.map.find(key);
  if (it == shard.map.end() || it->second.expires_at <= now) return std::monostate{};
  return it->second.state;
}

// Expired entries are swept once the shard has seen as many inserts as it holds keys
// (amortised O(1) per insert); at the cap, an arbitrary entry is evicted and counted.
void MemoryState::make_room(Shard& shard, limit::Micros now) {
  // Amortised: a full sweep once the shard has seen as many inserts as the last sweep left
  // keys (at least 64), so its cost is O(1) per insert whatever the shard size.
  ++shard.inserts_since_sweep;
  const bool due = shard.inserts_since_sweep >= std::max<std::size_t>(64, shard.live_after_sweep);
  // At the cap, reclaim expired keys before evicting live ones, but still amortised.
  const bool full =
      shard.map.size() >= max_per_shard_ &&
      shard.inserts_since_sweep >= std::max<std::size_t>(16, shard.live_after_sweep / 8);
  if (due || full) {
    boost::unordered::erase_if(shard.map,
                               [now](const auto& kv) { return kv.second.expires_at <= now; });
    boost::unordered::erase_if(shard.holds,
                               [now](const auto& kv) { return kv.second.forget_at <= now; });
    shard.inserts_since_sweep = 0;
    shard.live_after_sweep = shard.map.size();
  }
  // At the cap: drop one entry, counted only if it was still live.
  while (shard.map.size() >= max_per_shard_) {
    auto victim = shard.map.begin();
    if (victim->second.expires_at > now) evictions_.fetch_add(1, std::memory_order_relaxed);
    shard.map.erase(victim);
  }
}

void MemoryState::store(Shard& shard, const Digest& key, const limit::Params& p, limit::State next,
                        limit::Micros now) {
  auto it = shard.map.find(key);
  if (it == shard.map.end()) return insert(shard, key, p, std::move(next), now);
  auto ttl = limit::time_to_neutral(p, next, now);
  if (ttl <= 0)
    shard.map.erase(it);
  else
    it->second = Entry{std::move(next), now + ttl};
}

void MemoryState::insert(Shard& shard, const Digest& key, const limit::Params& p, limit::State next,
                         limit::Micros now) {
  auto ttl = limit::time_to_neutral(p, next, now);
  if (ttl <= 0) return;
  make_room(shard, now);
  shard.map.emplace(key, Entry{std::move(next), now + ttl});
}

bool MemoryState::holds_apply(const Item& item) {
  return !item.leased.holder.empty() && (item.params.algorithm == config::Algorithm::token_bucket ||
                                         item.params.algorithm == config::Algorithm::gcra);
}

MemoryState::Held MemoryState::leases_of(Shard& shard, const Digest& key, const Item& item,
                                         limit::Micros now) {
  Held h;
  auto it = shard.holds.find(key);
  if (it == shard.holds.end()) return h;
  if (it->second.forget_at <= now) {  // Redis has let the record expire by now
    shard.holds.erase(it);
    return h;
  }
  const auto state = current(shard, key, now);
  const auto* since = limit::updated_at(state);
  std::int64_t held = 0;  // since the state was written: holders that expired meanwhile too
  auto& all = it->second.by_holder;
  for (const auto& x : all) {
    if (!since || x.until > *since) held += x.units;
    if (x.until > now) {
      h.live += x.units;
      if (x.holder == item.leased.holder) h.own = x.units, h.own_until = x.until;
    }
  }
  std::erase_if(all, [now](const Hold& x) { return x.until <= now; });
  if (all.empty()) shard.holds.erase(it);
  if (held > 0) store(shard, key, item.params, limit::hold(item.params, state, now, held), now);
  return h;
}

MemoryState::Held MemoryState::release_held(Shard& shard, const Digest& key, const Item& item,
                                            std::int64_t freed, limit::Micros now) {
  auto h = leases_of(shard, key, item, now);
  freed = std::min(h.own, freed);
  if (freed > 0) {
    h.live -= freed;
    h.own -= freed;
    set_lease(shard, key, item.leased.holder, h.own, h.own_until);
  }
  return h;
}

void MemoryState::set_lease(Shard& shard, const Digest& key, const std::string& holder,
                            std::int64_t units, limit::Micros until) {
  auto it = shard.holds.find(key);
  if (units <= 0) {
    if (it == shard.holds.end()) return;
    std::erase_if(it->second.by_holder, [&](const Hold& x) { return x.holder == holder; });
    if (it->second.by_holder.empty()) shard.holds.erase(it);
    return;
  }
  if (it == shard.holds.end()) it = shard.holds.try_emplace(key).first;
  auto& all = it->second.by_holder;
  auto x = std::find_if(all.begin(), all.end(), [&](const Hold& y) { return y.holder == holder; });
  if (x == all.end())
    all.push_back({holder, units, until});
  else
    x->units = units, x->until = until;
  // Redis lets the record expire a minute after its last until, not sooner (prelude.lua).
  it->second.forget_at = std::max(it->second.forget_at, until + 60 * limit::kMicrosPerSecond);
}

Outcome MemoryState::acquire(std::span<const Item> items) {
  Outcome out;
  acquire(items, out);
  return out;
}

void MemoryState::acquire(std::span<const Item> items, Outcome& out) {
  // Lock every shard involved, in index order, so two requests sharing keys cannot deadlock.
  boost::container::small_vector<std::size_t, 4> shard_ix;
  boost::container::small_vector<Digest, 4> digests;
  for (const auto& item : items) {
    digests.push_back(digest_of(item.key));
    shard_ix.push_back(shard_for(digests.back()));
  }
  boost::container::small_vector<std::size_t, 4> order(shard_ix.begin(), shard_ix.end());
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  boost::container::small_vector<std::unique_lock<std::mutex>, 4> locks;
  for (auto i : order) locks.emplace_back(shards_[i].mutex);

  const auto now = clock_.now();
  out.admitted = true;
  out.now = now;
  out.decisions.clear();
  out.decisions.reserve(items.size());
  // A leasing holder's bucket (acquire.lua's decide_item): what it reports spent is no longer
  // held, and what every live holder holds counts against the burst. First, for every such
  // item: this may write its state, before any entry is looked up below.
  boost::container::small_vector<Held, 4> holds(items.size());
  boost::container::small_vector<limit::Micros, 4> until(items.size(), 0);
  for (std::size_t i = 0; i < items.size(); ++i)
    if (holds_apply(items[i])) {
      holds[i] =
          release_held(shards_[shard_ix[i]], digests[i], items[i], items[i].leased.settled, now);
      until[i] = std::max(now + items[i].leased.ttl, holds[i].own_until);
    }
  // One lookup per key: its entry (or end) is kept for the write below.
  using Iterator = decltype(Shard::map)::iterator;
  boost::container::small_vector<Iterator, 4> found;
  boost::container::small_vector<bool, 4> present;  // found[i] is an entry (not end())
  boost::container::small_vector<limit::Evaluation, 4> evals;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& shard = shards_[shard_ix[i]];
    auto it = shard.map.find(digests[i]);
    found.push_back(it);
    present.push_back(it != shard.map.end());
    limit::State state;
    if (it != shard.map.end() && it->second.expires_at > now) state = it->second.state;
    evals.push_back(limit::take(items[i].params, state, now, items[i].cost, items[i].take_up_to,
                                holds[i].live));
    out.decisions.push_back(evals.back().decision);
    if (items[i].enforce && !evals.back().decision.admitted) out.admitted = false;
  }
  if (!out.admitted) return;  // refused: nothing is charged anywhere
  // An admission that took the last unit also says when the same request would pass again,
  // so the gate can refuse until then without asking (acquire.lua does the same).
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& d = out.decisions[i];
    if (!d.admitted || d.remaining != 0 ||
        items[i].params.algorithm == config::Algorithm::concurrency ||
        items[i].params.max_delay > 0)  // its queue decides, never the deny cache
      continue;
    // (What the holder took is held from now on.)
    const auto held = holds[i].live + (holds_apply(items[i]) ? d.granted : 0);
    auto again = limit::evaluate(items[i].params, evals[i].next, now, items[i].cost, held);
    if (!again.decision.admitted) d.retry_after = again.decision.retry_after;
  }
  // Existing entries first: writing through an iterator or erasing one invalidates no
  // other, while an insertion may rehash the shard, so new keys go last.
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!evals[i].decision.admitted || !present[i]) continue;
    auto ttl = limit::time_to_neutral(items[i].params, evals[i].next, now);
    if (ttl > 0) {
      found[i]->second = Entry{std::move(evals[i].next), now + ttl};
      continue;
    }
    for (std::size_t j = i + 1; j < items.size(); ++j)  // the same key twice: erased once
      if (present[j] && found[j] == found[i]) present[j] = false;
    shards_[shard_ix[i]].map.erase(found[i]);
  }
  // (The same new key twice: the first insert is found and overwritten by the second.)
  for (std::size_t i = 0; i < items.size(); ++i)
    if (evals[i].decision.admitted && !present[i]) {
      bool repeated = false;
      for (std::size_t j = 0; j < i; ++j) repeated |= !present[j] && digests[j] == digests[i];
      auto& shard = shards_[shard_ix[i]];
      if (repeated)
        store(shard, digests[i], items[i].params, std::move(evals[i].next), now);
      else
        insert(shard, digests[i], items[i].params, std::move(evals[i].next), now);
    }
  // What a holder took is held until its until, or until it says it spent or returned it.
  for (std::size_t i = 0; i < items.size(); ++i)
    if (holds_apply(items[i]) && evals[i].decision.admitted)
      set_lease(shards_[shard_ix[i]], digests[i], items[i].leased.holder,
                holds[i].own + out.decisions[i].granted, until[i]);
}

void MemoryState::adjust(const Item& item, std::int64_t delta) {
  const auto key = digest_of(item.key);
  auto& shard = shards_[shard_for(key)];
  std::lock_guard lock(shard.mutex);
  auto now = clock_.now();
  std::int64_t held = 0;
  if (holds_apply(item)) {
    // Units the holder reports spent, and a return's own units, are no longer held.
    const auto freed = item.leased.settled - (item.leased.returning ? delta : 0);
    held = release_held(shard, key, item, freed, now).live;
  }
  store(shard, key, item.params,
        limit::adjust(item.params, current(shard, key, now), now, delta, held), now);
}

void MemoryState::release(const Item& item) {
  const auto key = digest_of(item.key);
  auto& shard = shards_[shard_for(key)];
  std::lock_guard lock(shard.mutex);
  auto now = clock_.now();
  store(shard, key, item.params, limit::release(item.params, current(shard, key, now)), now);
}

void MemoryState::reset(const Item& item) {
  const auto key = digest_of(item.key);
  auto& shard = shards_[shard_for(key)];
  std::lock_guard lock(shard.mutex);
  shard.map.erase(key);
}

void MemoryStore::async_acquire(std::vector<Item> items, Handler handler) {
  auto outcome = state_.acquire(items);
  // The worker's own loop: the caller resumes on its thread, never inside this call.
  boost::asio::post(executor_,
                    [h = std::move(handler), r = AcquireResult(std::move(outcome))]() mutable {
                      std::move(h)(std::move(r));
                    });
}

}  // namespace floodgate::store
