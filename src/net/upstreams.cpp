#include "upstreams.hpp"

#include <algorithm>

namespace floodgate::http {

metrics::UpstreamMetrics& Upstreams::stats(const std::string& name) {
  auto& slot = stats_[name];
  if (!slot) slot = &metrics.upstream(name);
  return *slot;
}

bool Upstreams::retry(const config::ConfigPtr& c, ServerUse& use) {
  auto next = balancer.pick(c, use.upstream(), &use.server());
  if (!next) return false;
  stats(use.server().name).retries.fetch_add(1, std::memory_order_relaxed);
  use = std::move(next);
  return true;
}

void Upstreams::resent(ServerUse& use) {
  stats(use.server().name).resent.fetch_add(1, std::memory_order_relaxed);
}

void Upstreams::answered(ServerUse& use, std::chrono::steady_clock::duration took, int status) {
  auto& s = stats(use.server().name);
  s.latency.observe(std::chrono::duration<double>(took).count());
  s.by_class[std::min(5, std::max(0, status / 100))].fetch_add(1, std::memory_order_relaxed);
  outcome(use, status >= 500);
}

void Upstreams::connect_failed(ServerUse& use, bool timeout, std::string_view why) {
  const auto& u = use.server();
  auto& s = stats(u.name);
  (timeout ? s.timeouts : s.connect_errors).fetch_add(1, std::memory_order_relaxed);
  if (auto quiet = errors.allow(); quiet >= 0)
    log.warn("upstream {} ({}): connect failed: {} ({} similar lines suppressed)", u.name, u.url,
             why, quiet);
  outcome(use, true);
}

void Upstreams::timed_out(ServerUse& use) {
  stats(use.server().name).timeouts.fetch_add(1, std::memory_order_relaxed);
  outcome(use, true);
}

// An upstream of one server is never ejected (as nginx ignores max_fails there): there is
// nowhere else to send its requests.
void Upstreams::outcome(ServerUse& use, bool failed) {
  static constexpr config::Ejection kNever{0, config::Duration(0)};
  if (!use.first_outcome()) return;
  const auto& e = use.upstream().servers.size() > 1 ? use.upstream().ejection : kNever;
  if (balancer.health().record(use.health(), e, failed, std::chrono::steady_clock::now()))
    log.warn("upstream {}: server {} ejected for {} after {} failures in a row", use.server().name,
             use.server().url, config::format_duration(e.cool_down), e.consecutive_failures);
}

}  // namespace floodgate::http
