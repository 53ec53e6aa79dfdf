#pragma once
// One worker's top offenders: a sliding-window heavy-hitter summary per route and limit
// (admin.top), written by the worker's requests without locks and copied out on the worker's
// own loop when the admin listener asks.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/limit/heavy_hitters.hpp"

namespace floodgate::decide {

class TopBoard {
 public:
  // Each slice keeps this many counters per k shown: callers above 1/(4k) of a slice's
  // requests are never missed, and counts are off by at most 1/(4k) of the requests.
  static constexpr std::size_t kCountersPerShown = 4;

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
