// A replay as text for a terminal: totals, each config's limits with a sparkline of their
// refusals, and the difference between two configs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "floodgate/limit/utc_time.hpp"
#include "replay.hpp"
#include "report_format.hpp"

namespace floodgate::replay {

namespace {

// A column: text padded with spaces to `width` on the right (pad) or the left (lpad).
struct Column {
  std::string text;
  std::size_t width;
  bool right;
  friend std::ostream& operator<<(std::ostream& out, const Column& c) {
    const std::size_t fill = c.text.size() < c.width ? c.width - c.text.size() : 0;
    if (c.right) out << std::string(fill, ' ');
    out << c.text;
    if (!c.right) out << std::string(fill, ' ');
    return out;
  }
};
Column pad(std::string s, std::size_t width) {
  return {std::move(s), width, false};
}
Column lpad(std::string s, std::size_t width) {
  return {std::move(s), width, true};
}

struct Peak {
  std::size_t minute = 0;
  std::uint32_t refused = 0;
};

Peak peak_of(const std::vector<std::uint32_t>& refused) {
  Peak p;
  for (std::size_t i = 0; i < refused.size(); ++i)
    if (refused[i] > p.refused) p = {i, refused[i]};
  return p;
}

// Refusal rate per minute, folded into at most `width` columns of ▁▂▃▄▅▆▇█ scaled to the
// highest column (a space: no refusal).
std::string sparkline(const std::vector<std::uint32_t>& refused,
                      const std::vector<std::uint32_t>& requests, std::size_t width) {
  static const char* blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                 "\u2585", "\u2586", "\u2587", "\u2588"};
  if (requests.empty()) return {};
  const std::size_t per = (requests.size() + width - 1) / width;
  std::vector<double> rates;
  for (std::size_t start = 0; start < requests.size(); start += per) {
    std::uint64_t req = 0, ref = 0;
    for (std::size_t i = start; i < std::min(start + per, requests.size()); ++i) {
      req += requests[i];
      if (i < refused.size()) ref += refused[i];
    }
    rates.push_back(req ? static_cast<double>(ref) / static_cast<double>(req) : 0.0);
  }
  double top = *std::max_element(rates.begin(), rates.end());
  std::string out;
  for (double r : rates) {
    if (r <= 0 || top <= 0)
      out += ' ';
    else
      out += blocks[std::min<int>(7, static_cast<int>(r / top * 7.999))];
  }
  return out;
}

void text_config(const Summary& s, const Replayer& rp, std::size_t top, std::ostream& out) {
  const auto& r = rp.report();
  out << "\n" << r.label << ": " << r.file << "\n";
  out << "  refused " << thousands(r.refused) << " of " << thousands(r.requests) << " ("
      << percent(r.refused, r.requests) << ")";
  if (r.shadow_only) out << "; shadow limits would refuse " << thousands(r.shadow_only) << " more";
  if (r.unmatched) out << "; no route " << thousands(r.unmatched);
  if (r.rejected) out << "; rejected (401/400) " << thousands(r.rejected);
  if (r.denied) out << "; denied by a list (403) " << thousands(r.denied);
  if (r.allowed)
    out << "; allowed past the limits by a list or an override " << thousands(r.allowed);
  out << "\n";
  out << "  " << pad("route/limit", 34) << pad("mode", 9) << lpad("seen", 12) << lpad("refused", 12)
      << lpad("rate", 9) << lpad("shadow", 10) << "\n";
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      // A limit being rolled out shows its share: "10%".
      const auto mode = l.shadow ? std::string("shadow")
                        : l.rollout_basis_points < 10000
                            ? config::format_rollout(l.rollout_basis_points)
                            : std::string("enforce");
      out << "  " << pad(name_of(l), 34) << pad(mode, 9) << lpad(thousands(l.seen), 12)
          << lpad(l.shadow ? "-" : thousands(l.refused), 12)
          << lpad(l.shadow ? "-" : percent(l.refused, l.seen), 9)
          << lpad(l.shadow || l.rollout_basis_points < 10000 ? thousands(l.shadow_refused) : "-",
                  10)
          << "\n";
    }
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      if (l.refused_by_rollout_percent.empty()) continue;
      out << "  rollout of " << name_of(l) << " (enforced for "
          << config::format_rollout(l.rollout_basis_points) << " of keys): it would refuse";
      for (int p : kRolloutSteps)
        out << (p == kRolloutSteps[0] ? " " : ", ") << thousands(l.refused_at(p)) << " at " << p
            << "%";
      out << "\n";
    }
  if (r.refused > 0) {
    auto p = peak_of(r.refused_by_minute);
    out << "  refusal rate per minute, " << minute_text(s.minute0) << " to " << minute_text(s.last)
        << " (peak " << thousands(p.refused) << " refused at "
        << minute_text(s.minute0 + static_cast<limit::Micros>(p.minute) * kMinute) << "):\n";
    out << "    |" << sparkline(r.refused_by_minute, s.requests_by_minute, 72) << "|\n";
    out << "  most refused callers:\n";
    for (const auto& route : r.limits)
      for (const auto& l : route)
        for (const auto& e : l.refused_keys.top(top))
          out << "    " << pad(name_of(l), 30) << lpad(thousands(e.count), 10) << "  " << e.caller
              << (e.error ? "  (approximate)" : "") << "\n";
  }
  // A terminal shows five per limit; --json and --html have all `top`.
  const std::size_t nearest = std::min<std::size_t>(top, 5);
  bool busiest = false;
  for (const auto& route : r.limits)
    for (const auto& l : route)
      for (const auto& e : l.callers.top(nearest)) {
        if (!busiest) out << "  busiest callers (requests, refused; the view /top gives live):\n";
        busiest = true;
        out << "    " << pad(name_of(l), 30) << lpad(thousands(e.count), 10)
            << lpad(thousands(l.shadow ? e.shadow_refused : e.refused), 10) << "  " << e.caller
            << (e.error ? "  (within " + thousands(e.error) + ")" : std::string()) << "\n";
      }
  bool header = false;
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      std::size_t shown = 0;
      for (const auto& [key, used] : l.closest.top()) {
        if (ever_refused(l, key)) continue;  // refused (or would be, shadow): listed above
        if (shown++ == nearest) break;
        if (!header) out << "  closest to their limit without being refused:\n";
        header = true;
        char buf[16];
        std::snprintf(buf, sizeof buf, "%.0f%%", used * 100.0);
        out << "    " << pad(name_of(l), 30) << lpad(buf, 10) << "  " << key << "\n";
      }
    }
  for (const auto& m : r.missing_inputs)
    out << "  warning: the limits read " << m << ": such requests were decided as missing it\n";
}

}  // namespace

void write_text(const Summary& s, std::size_t top, std::ostream& out) {
  const auto& c = s.counts;
  out << "floodgate replay: " << thousands(c.requests) << " requests from " << s.files.size()
      << (s.files.size() == 1 ? " log" : " logs");
  if (c.requests) {
    out << ", " << limit::format_utc(s.first).substr(0, 19) << "Z to "
        << limit::format_utc(s.last).substr(0, 19) << "Z";
  }
  out << "\n  lines: " << thousands(c.lines) << " read, " << thousands(c.skipped) << " skipped, "
      << thousands(c.bad) << " bad";
  for (const auto& [why, n] : c.bad_reasons)
    out << "; " << thousands(n) << " " << why << " (first at " << c.first_bad.at(why) << ")";
  out << "\n";
  for (const auto& e : s.read_errors) out << "  read error: " << e << "\n";
  if (s.out_of_order)
    out << "  " << thousands(s.out_of_order)
        << " lines were earlier than the line before them and were decided at that time\n";
  if (c.json_lines)
    out << "  refused at the time (the log's own decisions): " << thousands(s.live_refused) << "\n";
  char speed[200];
  std::snprintf(speed, sizeof speed,
                "  replayed in %.2f s: %.2f M requests/s, %.2f M per CPU-second; peak %s live "
                "keys\n",
                s.wall_seconds, s.wall_seconds > 0 ? c.requests / s.wall_seconds / 1e6 : 0.0,
                s.cpu_seconds > 0 ? c.requests / s.cpu_seconds / 1e6 : 0.0,
                thousands(s.peak_live_keys).c_str());
  out << speed;
  text_config(s, *s.candidate, top, out);
  if (!s.baseline) return;
  text_config(s, *s.baseline, top, out);
  const auto& cr = s.candidate->report();
  const auto& br = s.baseline->report();
  out << "\ndifference: the " << cr.label << " refuses " << thousands(cr.refused) << " ("
      << percent(cr.refused, cr.requests) << "), the " << br.label << " " << thousands(br.refused)
      << " (" << percent(br.refused, br.requests) << ")";
  if (cr.refused != br.refused) {
    const double points =
        cr.requests ? 100.0 * (static_cast<double>(cr.refused) - static_cast<double>(br.refused)) /
                          static_cast<double>(cr.requests)
                    : 0.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", std::fabs(points));
    out << ": the " << cr.label << " refuses " << buf << " percentage points "
        << (cr.refused > br.refused ? "more" : "less") << " of all requests";
  }
  out << "\n  refused only by the " << cr.label << ": " << thousands(s.diff.newly_refused)
      << "; only by the " << br.label << ": " << thousands(s.diff.newly_admitted) << "\n";
  auto conc = concentration(s.diff);
  if (conc.callers > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f%%", conc.share * 100.0);
    out << "  " << buf << " of the difference is " << conc.callers
        << (conc.callers == 1 ? " caller" : " callers") << " (+ refused only by the " << cr.label
        << ", - only by the " << br.label << "):\n";
    for (const auto& e : conc.entries)
      out << "    " << lpad(thousands(e.count), 10) << "  " << e.caller << "\n";
  }
  bool heading = false;
  for_each_lease(s, [&](const LimitReport& leased, const LimitReport& exact) {
    if (!heading) out << "\n" << lease_heading(s) << ":\n";
    heading = true;
    const char* indent = "  ";
    for (const auto& line : lease_lines(leased, exact)) {
      out << indent << line << "\n";
      indent = "    ";
    }
  });
}

}  // namespace floodgate::replay
