#pragma once
// One worker's top offenders: a sliding-window heavy-hitter summary per route and limit
// (admin.top), written by the worker's requests without locks and copied out on the worker's
// own loop when the admin listener asks.

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/limit/heavy_hitters.hpp"

namespace floodgate::decide {

class TopBoard {
 public:
  // How many counters each slice keeps: k sets how many callers /top shows, not how right it
  // is. With m counters in every slice of every worker, a merged count overstates by at most
  // 1/m of the requests the window counted, and every caller above that share is tracked
  // (heavy_hitters.hpp); at least 100 makes that 1 % whatever k, and 4 per caller shown
  // keeps a long list (k > 25) as sharp as it was.
  static constexpr std::size_t kMinCounters = 100;
  static constexpr std::size_t kCountersPerShown = 4;
  static std::size_t counters(std::size_t k) {
    return std::max(kMinCounters, kCountersPerShown * k);
  }

  // The window of `route`'s `limit` under `c` (made on first use). A limit keeps its window
  // across reloads while its route, name, key and top settings stay the same.
  limit::TopWindow& window(const config::Config& c, const config::Route& route,
                           const config::Limit& limit);

  // Copies of the windows of `current`'s limits at `now`. Windows of limits no longer in
  // `current` and idle for a whole window are dropped: returns true then, and every pointer
  // from window() is invalid.
  bool snapshot(const config::Config& current, limit::Micros now,
                std::vector<limit::LimitTop>& out);

 private:
  static std::string identity(const config::Config& c, const config::Route& route,
                              const config::Limit& limit);
  struct Slot {
    limit::LimitTop names;  // route, limit, key, k, window; no slices
    std::unique_ptr<limit::TopWindow> window;
  };
  std::map<std::string, Slot, std::less<>> slots_;
};

}  // namespace floodgate::decide
