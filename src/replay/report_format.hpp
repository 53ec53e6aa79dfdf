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

// "route/limit"
std::string name_of(const LimitReport& l);

// The fewest callers that make up 90% of the difference (at most 10).
struct Concentration {
  std::size_t callers = 0;
  double share = 0;
  std::vector<limit::HeavyEntry> entries;
};
Concentration concentration(const Difference& d);

}  // namespace floodgate::replay
