#include "floodgate/limit/deny_cache.hpp"

#include <boost/container/small_vector.hpp>

#include <bit>
#include <functional>

namespace floodgate::limit {

std::uint64_t DenyCache::fingerprint(const store::Item& item) {
  const auto& p = item.params;
  std::uint64_t h = static_cast<std::uint64_t>(p.algorithm) * 0x9e3779b97f4a7c15ull;
  h ^= std::hash<std::int64_t>{}(p.capacity) + (h << 6) + (h >> 2);
  h ^= std::bit_cast<std::uint64_t>(p.per_second) + (h << 6) + (h >> 2);
  h ^= std::hash<std::int64_t>{}(p.window) + (h << 6) + (h >> 2);
  h ^= std::hash<std::int64_t>{}(item.cost) + (h << 6) + (h >> 2);
  return h;
}

std::optional<DenyCache::Hit> DenyCache::check(const std::vector<store::Item>& items, Micros now) {
  if (map_.empty()) return std::nullopt;
  // A request is refused here only for a refusal still in force (or a probe in flight);
  // otherwise it goes to the store, and only then is it the probe for the expired entries
  // it carries. Marking a probe on a request that another entry then refuses would leave a
  // probe that is never sent, and refuse what the store would admit.
  boost::container::small_vector<Map::iterator, 4> expired;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].enforce) continue;
    auto it = map_.find(items[i].key);
    if (it == map_.end()) continue;
    auto& e = it->second;
    if (e.fingerprint != fingerprint(items[i])) {  // the limit changed (reload): forget
      map_.erase(it);
      continue;
    }
    if (e.until <= now && e.probe_until <= now) {
      expired.push_back(it);
      continue;
    }
    // Refused until `until`; or past it with a probe in flight: refuse a little early
    // rather than stampede the store.
    Hit hit{i, e.decision, now + e.store_ahead};
    hit.decision.retry_after = std::max<Micros>(1, e.until - now);
    hit.decision.reset_after = std::max<Micros>(0, e.reset_at - now);
    ++hits_;
    return hit;
  }
  for (auto it : expired) it->second.probe_until = now + kProbeWindow;  // this request probes
  return std::nullopt;
}

void DenyCache::forget(const std::string& key) {
  if (!map_.empty()) map_.erase(key);
}

void DenyCache::remember(const store::Item& item, const Decision& d, Micros now, Micros store_now) {
  // Concurrency refusals end when any lease returns, a counting limit's when any response it
  // does not count ends (on whichever worker or instance served it): not at a time, never
  // cached.
  if (d.admitted || d.retry_after <= 0 || item.refundable ||
      item.params.algorithm == config::Algorithm::concurrency)
    return;
  if (map_.size() >= max_entries_) {
    std::erase_if(map_, [now](const auto& kv) { return kv.second.until <= now; });
    if (map_.size() >= max_entries_) map_.clear();
  }
  map_[item.key] = Entry{now + d.retry_after,
                         now + d.reset_after,
                         d,
                         fingerprint(item),
                         0,
                         store_now != 0 ? store_now - now : 0};
}

void DenyCache::admitted(const std::vector<store::Item>& items,
                         const std::vector<Decision>& decisions, Micros now, Micros store_now) {
  for (std::size_t i = 0; i < items.size() && i < decisions.size(); ++i) {
    const auto& d = decisions[i];
    if (items[i].enforce && d.admitted && d.retry_after > 0) {
      // The last unit went to this request: the next one is refused until retry_after.
      Decision next = d;
      next.admitted = false;
      next.remaining = 0;
      remember(items[i], next, now, store_now);
    } else if (!map_.empty()) {
      map_.erase(items[i].key);
    }
  }
}

}  // namespace floodgate::limit
