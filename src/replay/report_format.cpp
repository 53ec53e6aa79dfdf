#include "report_format.hpp"

#include <cstdio>

#include "floodgate/limit/utc_time.hpp"

namespace floodgate::replay {

std::string thousands(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(std::uint64_t part, std::uint64_t whole, int decimals) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals,
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string minute_text(limit::Micros t) {
  return limit::format_utc(t).substr(0, 16) + "Z";  // 2026-11-30T05:10Z
}

// Appended piecewise: GCC 12 warns falsely on a chain of operator+.
std::string name_of(const LimitReport& l) {
  std::string out;
  out.reserve(l.route.size() + 1 + l.limit.size());
  out += l.route;
  out += '/';
  out += l.limit;
  return out;
}

Concentration concentration(const Difference& d) {
  Concentration c;
  const std::uint64_t total = d.newly_refused + d.newly_admitted;
  if (total == 0) return c;
  std::uint64_t sum = 0;
  for (auto& e : d.keys.top(10)) {
    sum += e.count;
    c.entries.push_back(e);
    if (static_cast<double>(sum) >= 0.9 * static_cast<double>(total)) break;
  }
  c.callers = c.entries.size();
  c.share = static_cast<double>(sum) / static_cast<double>(total);
  return c;
}

}  // namespace floodgate::replay
