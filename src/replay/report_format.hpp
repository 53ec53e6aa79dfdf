#pragma once
// What the three renderings of a replay (report_text.cpp, report_json.cpp, report_html.cpp)
// share: number and time formatting, limit names, and where a difference concentrates.

#include <cstdint>
#include <string>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "replay.hpp"

namespace floodgate::replay {

std::string thousands(std::uint64_t n);                                          // 1,234,567
std::string percent(std::uint64_t part, std::uint64_t whole, int decimals = 2);  // "-" of 0
std::string minute_text(limit::Micros t);  // 2026-11-30T05:10Z

constexpr limit::Micros kMinute = 60 * limit::kMicrosPerSecond;

// The rollout shares a report shows what a limit would refuse at (`rollout: P%`).
constexpr int kRolloutSteps[] = {1, 5, 10, 25, 50, 100};

// "route/limit"
std::string name_of(const LimitReport& l);

// Whether the limit refused `caller`, or (shadow) would have: not one that came "closest
// without being refused".
bool ever_refused(const LimitReport& l, const std::string& caller);

// The fewest callers that make up 90% of the difference (at most 10).
struct Concentration {
  std::size_t callers = 0;
  double share = 0;
  std::vector<limit::HeavyEntry> entries;
};
Concentration concentration(const Difference& d);

// --lease: how the simulated instances were reached, and each leased limit's figures in words
// (against the same limit decided exactly), for the text and HTML reports.
std::string lease_heading(const Summary& s);
std::vector<std::string> lease_lines(const LimitReport& leased, const LimitReport& exact);
// Calls `f(leased, exact)` for every leased limit of a --lease replay.
template <class F>
void for_each_lease(const Summary& s, F&& f) {
  if (!s.baseline || s.candidate->report().simulation.instances == 0) return;
  const auto& c = s.candidate->report().limits;
  const auto& b = s.baseline->report().limits;
  for (std::size_t r = 0; r < c.size() && r < b.size(); ++r)
    for (std::size_t l = 0; l < c[r].size() && l < b[r].size(); ++l)
      if (c[r][l].lease) f(c[r][l], b[r][l]);
}

}  // namespace floodgate::replay
