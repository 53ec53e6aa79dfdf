#pragma once
// What the admin listener's live view reads: GET /top (the heaviest callers per limit, merged
// across workers), GET /stats (rates of the last minutes, sampled on the admin thread) and
// GET / (the page that draws both).

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/metrics/metrics.hpp"
#include "floodgate/limit/heavy_hitters.hpp"

namespace floodgate::admin {

using metrics::Metrics;  // the counters admin renders (metrics/)

struct JsonAnswer {
  int status = 200;
  std::string body;
};

// GET /top?limit=NAME&k=N: `parts` (each limit's summaries from every worker) merged per
// route and limit. NAME is a limit's name or "route/limit"; N at most the configured k.
JsonAnswer top_json(const std::vector<limit::LimitTop>& parts, std::string_view query);

// Counters sampled every few seconds for the last minutes, so that the page plots a history
// as soon as it opens. Only the admin thread uses it.
class StatsHistory {
 public:
  static constexpr std::chrono::seconds kInterval{2};
  static constexpr std::size_t kSamples = 301;  // ten minutes of intervals

  // `health`: healthy store connections, of how many.
  void sample(const Metrics& metrics, std::pair<int, int> health);
  // GET /stats: the store's state, per-route totals and, per interval, decisions per second
  // by route and outcome, store decision latency (p50, p99) and store errors per second.
  std::string json(const Metrics& metrics, bool draining) const;

 private:
  struct Sample {
    double time = 0;  // Unix seconds
    std::map<std::string, Metrics::RouteCounts, std::less<>> routes;
    std::vector<std::uint64_t> decisions;  // the backend's latency buckets
    std::uint64_t store_errors = 0;
    std::pair<int, int> health{0, 0};
  };
  std::deque<Sample> samples_;
};

// The page served at GET /: one HTML document, its style and script inline.
std::string_view admin_page();

}  // namespace floodgate::admin
