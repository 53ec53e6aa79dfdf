// GET /stats: the live page's numbers. Counters are sampled every StatsHistory::kInterval on
// the admin thread; rates are differences between samples, so the page needs no state of its
// own and shows the last minutes as soon as it opens.
#include <boost/json.hpp>

#include <chrono>
#include <cmath>

#include "live_view.hpp"

namespace floodgate::admin {

namespace json = boost::json;
using metrics::Histogram;
using metrics::Outcome;

namespace {

constexpr std::size_t kOutcomes = static_cast<std::size_t>(Outcome::kCount);

const Histogram& decision_histogram(const Metrics& m) {
  return m.backend == "memory" ? m.decision_memory : m.decision_redis;
}

// The `q` quantile of the observations between two bucket snapshots, in milliseconds,
// interpolated within its bucket; null when there were none.
json::value quantile_ms(const std::vector<double>& bounds, const std::vector<std::uint64_t>& before,
                        const std::vector<std::uint64_t>& after, double q) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < after.size(); ++i) total += after[i] - before[i];
  if (total == 0) return nullptr;
  const double rank = q * static_cast<double>(total);
  double seen = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    const double n = static_cast<double>(after[i] - before[i]);
    if (n > 0 && seen + n >= rank) {
      const double low = i == 0 ? 0 : bounds[i - 1];
      const double high = i < bounds.size() ? bounds[i] : bounds.back() * 2;
      const double at = low + (high - low) * ((rank - seen) / n);
      return std::round(at * 1e6) / 1e3;  // ms, to the microsecond
    }
    seen += n;
  }
  return bounds.back() * 1e3;
}

double rate(std::uint64_t before, std::uint64_t after, double seconds) {
  if (after < before || seconds <= 0) return 0;
  return std::round(static_cast<double>(after - before) / seconds * 100) / 100;
}

}  // namespace

void StatsHistory::sample(const Metrics& metrics, std::pair<int, int> health) {
  Sample s;
  s.time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  s.routes = metrics.route_counts();
  s.decisions = decision_histogram(metrics).buckets();
  for (const auto& e : metrics.store_errors) s.store_errors += e.load(std::memory_order_relaxed);
  s.health = health;
  samples_.push_back(std::move(s));
  while (samples_.size() > kSamples) samples_.pop_front();
}

std::string StatsHistory::json(const Metrics& metrics, bool draining) const {
  json::object root;
  root["version"] = metrics.version();
  root["pop"] = metrics.pop();
  root["draining"] = draining;
  root["interval_seconds"] = kInterval.count();
  json::object store{{"backend", metrics.backend}};
  json::object totals;
  if (!samples_.empty()) {
    const auto& last = samples_.back();
    root["time"] = last.time;
    store["healthy_connections"] = last.health.first;
    store["connections"] = last.health.second;
    store["circuit_open"] = last.health.second - last.health.first;
    store["errors_total"] = last.store_errors;
    for (const auto& [name, counts] : last.routes) {
      json::object r;
      for (std::size_t i = 0; i < kOutcomes; ++i) r[to_string(static_cast<Outcome>(i))] = counts[i];
      r["deny_cache_hits"] = counts.back();
      totals[name] = std::move(r);
    }
  }
  root["store"] = std::move(store);
  root["totals"] = std::move(totals);

  // Per interval: time at its end, then each series.
  json::array times, decisions, p50, p99, errors;
  std::map<std::string, std::array<json::array, kOutcomes + 1>, std::less<>> routes;
  const auto& bounds = decision_histogram(metrics).bounds();
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    const auto& a = samples_[i - 1];
    const auto& b = samples_[i];
    const double dt = b.time - a.time;
    times.push_back(std::round(b.time * 1000) / 1000);
    std::uint64_t n_before = 0, n_after = 0;
    for (auto v : a.decisions) n_before += v;
    for (auto v : b.decisions) n_after += v;
    decisions.push_back(rate(n_before, n_after, dt));
    p50.push_back(quantile_ms(bounds, a.decisions, b.decisions, 0.5));
    p99.push_back(quantile_ms(bounds, a.decisions, b.decisions, 0.99));
    errors.push_back(rate(a.store_errors, b.store_errors, dt));
    for (const auto& [name, after] : b.routes) {
      auto& series = routes[name];
      auto before = a.routes.find(name);
      for (std::size_t o = 0; o <= kOutcomes; ++o) {
        // A route seen for the first time: its earlier intervals are zeros.
        while (series[o].size() + 1 < times.size()) series[o].push_back(0.0);
        series[o].push_back(rate(before == a.routes.end() ? 0 : before->second[o], after[o], dt));
      }
    }
  }
  json::object by_route;
  for (auto& [name, series] : routes) {
    json::object r;
    for (std::size_t o = 0; o < kOutcomes; ++o)
      r[to_string(static_cast<Outcome>(o))] = std::move(series[o]);
    r["deny_cache_hits"] = std::move(series.back());
    by_route[name] = std::move(r);
  }
  root["series"] = json::object{{"time", std::move(times)},
                                {"routes", std::move(by_route)},
                                {"decisions_per_second", std::move(decisions)},
                                {"decision_p50_ms", std::move(p50)},
                                {"decision_p99_ms", std::move(p99)},
                                {"store_errors_per_second", std::move(errors)}};
  return json::serialize(root) + "\n";
}

}  // namespace floodgate::admin
