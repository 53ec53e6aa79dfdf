#include "floodgate/metrics/metrics.hpp"

#include <utility>

namespace floodgate::metrics {

namespace {

const std::vector<double>& latency_bounds() {
  static const std::vector<double> b = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
  return b;
}

}  // namespace

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::admitted:
      return "admitted";
    case Outcome::limited:
      return "limited";
    case Outcome::shadow_limited:
      return "shadow_limited";
    case Outcome::store_error_open:
      return "store_error_open";
    case Outcome::store_error_closed:
      return "store_error_closed";
    case Outcome::local:
      return "local";
    case Outcome::rejected:
      return "rejected";
    case Outcome::denied:
      return "denied";
    case Outcome::allowed:
      return "allowed";
    case Outcome::unlimited:
      return "unlimited";
    case Outcome::kCount:
      break;
  }
  return "?";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double seconds) {
  std::size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::buckets() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

UpstreamMetrics::UpstreamMetrics() : latency(latency_bounds()) {}

Metrics::Metrics(std::string version, std::string pop)
    : decision_memory(latency_bounds()),
      decision_redis(latency_bounds()),
      version_(std::move(version)),
      pop_(std::move(pop)) {}

void count_own_status(OwnStatusCounts& counts, int status) {
  std::size_t i = 0;
  while (i < kOwnStatuses.size() && kOwnStatuses[i] != status) ++i;
  counts[i].fetch_add(1, std::memory_order_relaxed);
}

namespace {

// The cell of `key` in `table`, made on first use: the address stays while the table lives.
template <typename Table, typename Key>
auto& cell_of(Table& table, Key&& key) {
  auto it = table.find(key);
  if (it == table.end())
    it = table.emplace(std::forward<Key>(key),
                       std::make_unique<typename Table::mapped_type::element_type>())
             .first;
  return *it->second;
}

}  // namespace

LimitCounters& Metrics::limit(std::string_view route, std::string_view limit) {
  std::lock_guard lock(mutex_);
  return cell_of(limits_, std::pair{std::string(route), std::string(limit)});
}

LeaseCounters& Metrics::lease(std::string_view route, std::string_view limit) {
  std::lock_guard lock(mutex_);
  return cell_of(leases_, std::pair{std::string(route), std::string(limit)});
}

RouteMetrics& Metrics::route(std::string_view name) {
  std::lock_guard lock(mutex_);
  return cell_of(routes_, std::string(name));
}

UpstreamMetrics& Metrics::upstream(std::string_view name) {
  std::lock_guard lock(mutex_);
  return cell_of(upstreams_, std::string(name));
}

std::map<std::string, Metrics::RouteCounts, std::less<>> Metrics::route_counts() const {
  std::map<std::string, RouteCounts, std::less<>> out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, r] : routes_) {
    auto& counts = out[name];
    for (std::size_t i = 0; i < r->outcomes.size(); ++i)
      counts[i] = r->outcomes[i].load(std::memory_order_relaxed);
    counts.back() = r->deny_cache_hits.load(std::memory_order_relaxed);
  }
  return out;
}

}  // namespace floodgate::metrics
