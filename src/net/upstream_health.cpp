#include "upstream_health.hpp"

namespace floodgate::http {

ServerHealth& UpstreamHealth::of(const config::UpstreamServer& s) {
  // A server is the same across reloads while its upstream's name and its pool key (url,
  // verification, protocol) are.
  std::string key = s.name + ' ' + s.pool_key;
  std::lock_guard lock(mutex_);
  auto it = servers_.find(key);
  if (it == servers_.end()) {
    auto h = std::make_unique<ServerHealth>();
    h->upstream = s.name;
    h->url = s.url;
    it = servers_.emplace(std::move(key), std::move(h)).first;
  }
  return *it->second;
}

bool UpstreamHealth::record(ServerHealth& h, const config::Ejection& e, bool failed,
                            ServerHealth::clock::time_point now) {
  if (!failed) {
    if (h.failures.load(std::memory_order_relaxed) != 0)
      h.failures.store(0, std::memory_order_relaxed);
    return false;
  }
  h.failed.fetch_add(1, std::memory_order_relaxed);
  if (e.consecutive_failures <= 0) return false;
  // The failure that completes a run ejects; the run starts over (a server back from its
  // cool-down is ejected again only after as many failures more).
  if (h.failures.fetch_add(1, std::memory_order_relaxed) + 1 < e.consecutive_failures) return false;
  h.failures.store(0, std::memory_order_relaxed);
  h.ejected_until.store((now + e.cool_down).time_since_epoch().count(), std::memory_order_relaxed);
  h.ejections.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::vector<metrics::UpstreamServerSample> UpstreamHealth::samples(
    const config::Config& current) const {
  const auto now = ServerHealth::clock::now();
  std::lock_guard lock(mutex_);
  std::vector<metrics::UpstreamServerSample> out;
  for (const auto& up : current.upstreams)
    for (const auto& s : up.servers) {
      auto it = servers_.find(s.name + ' ' + s.pool_key);
      if (it == servers_.end()) continue;  // no request and no check yet
      const auto& h = *it->second;
      out.push_back({h.upstream, h.url, h.requests.load(std::memory_order_relaxed),
                     h.failed.load(std::memory_order_relaxed),
                     h.ejections.load(std::memory_order_relaxed),
                     h.checks_failed.load(std::memory_order_relaxed), h.up(now)});
    }
  return out;
}

const UpstreamBalancer::Pools& UpstreamBalancer::pools(const config::ConfigPtr& config) {
  if (seen_[0].first == config) return seen_[0].second;
  std::swap(seen_[0], seen_[1]);
  if (seen_[0].first != config) {
    seen_[0].first = config;
    seen_[0].second.assign(config->upstreams.size(), {});
    for (std::size_t i = 0; i < config->upstreams.size(); ++i)
      for (const auto& s : config->upstreams[i].servers)
        seen_[0].second[i].push_back(&health_.of(s));
  }
  return seen_[0].second;
}

ServerUse UpstreamBalancer::pick(const config::ConfigPtr& config, const config::Upstream& up,
                                 const config::UpstreamServer* avoid) {
  const auto& health = pools(config)[static_cast<std::size_t>(&up - config->upstreams.data())];
  const auto n = up.servers.size();
  const auto now = ServerHealth::clock::now();
  // Candidates: the servers in service, or every one when none is (panic); never `avoid`. A
  // retry finds none when `avoid` was the only one in service.
  bool any = true;
  for (std::size_t i = 0; i < n; ++i)
    if (health[i]->up(now)) any = false;
  auto usable = [&](std::size_t i) {
    return &up.servers[i] != avoid && (any || health[i]->up(now));
  };
  std::size_t best = n;
  if (up.balance == config::Balance::least_requests) {
    // Fewest in flight per unit of weight; ties go round the pool.
    const auto start = static_cast<std::size_t>(turn_++ % n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto i = (start + k) % n;
      if (!usable(i)) continue;
      if (best == n ||
          health[i]->in_flight.load(std::memory_order_relaxed) * up.servers[best].weight <
              health[best]->in_flight.load(std::memory_order_relaxed) * up.servers[i].weight)
        best = i;
    }
  } else {
    // Smooth weighted round robin: weights 5,1,1 give a a b a c a a, not a a a a a b c.
    std::int64_t total = 0;
    std::int64_t* best_current = nullptr;
    for (std::size_t i = 0; i < n; ++i) {
      if (!usable(i)) continue;
      auto& current = current_[health[i]];
      current += up.servers[i].weight;
      total += up.servers[i].weight;
      if (!best_current || current > *best_current) {
        best = i;
        best_current = &current;
      }
    }
    if (best_current) *best_current -= total;
  }
  if (best == n) return {};
  return ServerUse(up, up.servers[best], *health[best]);
}

}  // namespace floodgate::http
