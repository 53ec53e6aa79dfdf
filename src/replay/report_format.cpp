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

bool ever_refused(const LimitReport& l, const std::string& caller) {
  return l.refused_keys.count_of(caller) > 0 || l.shadow_refused_keys.count_of(caller) > 0;
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

std::string lease_heading(const Summary& s) {
  const auto& sim = s.candidate->report().simulation;
  std::string out = "leased limits, decided by " + std::to_string(sim.instances) +
                    (sim.instances == 1 ? " instance" : " instances") + " sharing one store";
  switch (sim.spread) {
    case Spread::client:
      return out + " (requests spread by client address)";
    case Spread::request:
      return out + " (each request to the next instance)";
    case Spread::log:
      return out + " (log i at instance i)";
  }
  return out;
}

std::vector<std::string> lease_lines(const LimitReport& leased, const LimitReport& exact) {
  const auto& l = *leased.lease;
  const auto& c = *l.counters;
  std::vector<std::string> out;
  // Both counted alike: the requests this limit refused (shadow: would have).
  auto refused = [](const LimitReport& r) { return r.shadow ? r.shadow_refused : r.refused; };
  std::string first = name_of(leased) + " (lease " + std::to_string(l.size) + "): refused " +
                      thousands(refused(leased)) + " of " + thousands(leased.seen) + ", exact " +
                      thousands(refused(exact)) +
                      "; at a lease's refusal the exact limit had at most " +
                      thousands(static_cast<std::uint64_t>(l.most_free_at_refusal)) +
                      " units free, bound " + thousands(static_cast<std::uint64_t>(l.bound)) +
                      " = " + l.terms + "; over-admitted " + thousands(l.over_admitted);
  out.push_back(std::move(first));
  const auto local = c.local.load();
  out.push_back(percent(local, leased.seen, 1) + " decided from units in hand; " +
                thousands(c.leases.load()) + " leases, " + thousands(c.granted.load()) +
                " units granted, " + thousands(c.returned.load()) + " returned");
  return out;
}

}  // namespace floodgate::replay
