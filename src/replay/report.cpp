// The renderings of a replay: text for a terminal, JSON for machines, HTML with a plot.
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "floodgate/limit/utc_time.hpp"
#include "replay.hpp"

namespace floodgate::replay {

namespace {

std::string thousands(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string percent(std::uint64_t part, std::uint64_t whole, int decimals = 2) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals,
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string minute_text(limit::Micros t) {
  return limit::format_utc(t).substr(0, 16) + "Z";  // 2026-11-30T05:10Z
}

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

constexpr limit::Micros kMinute = 60 * limit::kMicrosPerSecond;

// "route/limit" (appended piecewise: GCC 12 warns falsely on a chain of operator+).
std::string name_of(const LimitReport& l) {
  std::string out;
  out.reserve(l.route.size() + 1 + l.limit.size());
  out += l.route;
  out += '/';
  out += l.limit;
  return out;
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

// The fewest callers that make up 90% of the difference (at most 10).
struct Concentration {
  std::size_t callers = 0;
  double share = 0;
  std::vector<TopCounter::Entry> entries;
};

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

void text_config(const Summary& s, const Replayer& rp, std::size_t top, std::ostream& out) {
  const auto& r = rp.report();
  out << "\n" << r.label << ": " << r.file << "\n";
  out << "  refused " << thousands(r.refused) << " of " << thousands(r.requests) << " ("
      << percent(r.refused, r.requests) << ")";
  if (r.shadow_only) out << "; shadow limits would refuse " << thousands(r.shadow_only) << " more";
  if (r.unmatched) out << "; no route " << thousands(r.unmatched);
  if (r.rejected) out << "; rejected (401/400) " << thousands(r.rejected);
  out << "\n";
  out << "  " << pad("route/limit", 34) << pad("mode", 9) << lpad("seen", 12) << lpad("refused", 12)
      << lpad("rate", 9) << lpad("shadow", 10) << "\n";
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      out << "  " << pad(name_of(l), 34) << pad(l.shadow ? "shadow" : "enforce", 9)
          << lpad(thousands(l.seen), 12) << lpad(l.shadow ? "-" : thousands(l.refused), 12)
          << lpad(l.shadow ? "-" : percent(l.refused, l.seen), 9)
          << lpad(l.shadow ? thousands(l.shadow_refused) : "-", 10) << "\n";
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
          out << "    " << pad(name_of(l), 30) << lpad(thousands(e.count), 10) << "  " << e.key
              << (e.error ? "  (approximate)" : "") << "\n";
  }
  bool header = false;
  // A terminal shows the five nearest per limit; --json and --html have all `top`.
  const std::size_t nearest = std::min<std::size_t>(top, 5);
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      std::size_t shown = 0;
      for (const auto& [key, used] : l.closest.top()) {
        if (l.refused_keys.count_of(key) > 0) continue;  // refused: listed above
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
  out << "\ndifference: the candidate refuses " << thousands(cr.refused) << " ("
      << percent(cr.refused, cr.requests) << "), the baseline " << thousands(br.refused) << " ("
      << percent(br.refused, br.requests) << ")";
  if (cr.refused != br.refused) {
    const double points =
        cr.requests ? 100.0 * (static_cast<double>(cr.refused) - static_cast<double>(br.refused)) /
                          static_cast<double>(cr.requests)
                    : 0.0;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", std::fabs(points));
    out << ": the candidate refuses " << buf << " percentage points "
        << (cr.refused > br.refused ? "more" : "less") << " of all requests";
  }
  out << "\n  refused only by the candidate: " << thousands(s.diff.newly_refused)
      << "; only by the baseline: " << thousands(s.diff.newly_admitted) << "\n";
  auto conc = concentration(s.diff);
  if (conc.callers > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f%%", conc.share * 100.0);
    out << "  " << buf << " of the difference is " << conc.callers
        << (conc.callers == 1 ? " caller" : " callers")
        << " (+ refused only by the candidate, - only by the baseline):\n";
    for (const auto& e : conc.entries)
      out << "    " << lpad(thousands(e.count), 10) << "  " << e.key << "\n";
  }
}

namespace {

boost::json::array series(const std::vector<std::uint32_t>& v, std::size_t length) {
  boost::json::array a;
  a.reserve(length);
  for (std::size_t i = 0; i < length; ++i) a.push_back(i < v.size() ? v[i] : 0);
  return a;
}

boost::json::object json_config(const Summary& s, const Replayer& rp, std::size_t top) {
  const auto& r = rp.report();
  boost::json::object o;
  o["file"] = r.file;
  o["requests"] = r.requests;
  o["refused"] = r.refused;
  o["shadow_only"] = r.shadow_only;
  o["unmatched"] = r.unmatched;
  o["rejected"] = r.rejected;
  o["refused_per_minute"] = series(r.refused_by_minute, s.requests_by_minute.size());
  boost::json::array limits;
  for (const auto& route : r.limits)
    for (const auto& l : route) {
      boost::json::object lo;
      lo["route"] = l.route;
      lo["limit"] = l.limit;
      lo["mode"] = l.shadow ? "shadow" : "enforce";
      lo["seen"] = l.seen;
      lo["refused"] = l.refused;
      lo["shadow_refused"] = l.shadow_refused;
      lo["refused_per_minute"] = series(l.refused_by_minute, s.requests_by_minute.size());
      boost::json::array keys;
      for (const auto& e : l.refused_keys.top(top))
        keys.push_back({{"caller", e.key}, {"refused", e.count}, {"error", e.error}});
      lo["top_refused"] = std::move(keys);
      boost::json::array closest;
      for (const auto& [key, used] : l.closest.top())
        closest.push_back({{"caller", key}, {"peak_share_used", used}});
      lo["closest"] = std::move(closest);
      limits.push_back(std::move(lo));
    }
  o["limits"] = std::move(limits);
  boost::json::array missing;
  for (const auto& m : r.missing_inputs) missing.push_back(boost::json::string(m));
  o["missing_inputs"] = std::move(missing);
  return o;
}

}  // namespace

void write_json(const Summary& s, std::size_t top, std::ostream& out) {
  boost::json::object o;
  const auto& c = s.counts;
  o["files"] = boost::json::value_from(s.files);
  o["lines"] = {{"read", c.lines}, {"requests", c.requests}, {"skipped", c.skipped},
                {"bad", c.bad},    {"json", c.json_lines},   {"nginx", c.nginx_lines}};
  boost::json::object reasons;
  for (const auto& [why, n] : c.bad_reasons) reasons[why] = n;
  o["bad_reasons"] = std::move(reasons);
  o["read_errors"] = boost::json::value_from(s.read_errors);
  o["first"] = limit::format_utc(s.first);
  o["last"] = limit::format_utc(s.last);
  o["minute0"] = limit::format_utc(s.minute0);
  o["requests_per_minute"] = series(s.requests_by_minute, s.requests_by_minute.size());
  o["refused_at_the_time"] = s.live_refused;
  o["out_of_order"] = s.out_of_order;
  o["wall_seconds"] = s.wall_seconds;
  o["cpu_seconds"] = s.cpu_seconds;
  o["requests_per_second"] = s.wall_seconds > 0 ? c.requests / s.wall_seconds : 0.0;
  o["peak_live_keys"] = s.peak_live_keys;
  o["candidate"] = json_config(s, *s.candidate, top);
  if (s.baseline) {
    o["baseline"] = json_config(s, *s.baseline, top);
    auto conc = concentration(s.diff);
    boost::json::array keys;
    for (const auto& e : conc.entries) keys.push_back({{"caller", e.key}, {"requests", e.count}});
    o["difference"] = {{"refused_only_by_candidate", s.diff.newly_refused},
                       {"refused_only_by_baseline", s.diff.newly_admitted},
                       {"share_of_top_callers", conc.share},
                       {"top_callers", std::move(keys)}};
  }
  out << boost::json::serialize(o) << "\n";
}

namespace {

std::string html_escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Refusal rate per minute, one polyline per config, on a shared axis.
std::string svg_plot(const Summary& s) {
  constexpr double W = 960, H = 320, L = 60, R = 20, T = 20, B = 40;
  const auto& req = s.requests_by_minute;
  const std::size_t n = std::max<std::size_t>(1, req.size());
  auto rates = [&](const Replayer& rp) {
    std::vector<double> v(n, 0.0);
    const auto& ref = rp.report().refused_by_minute;
    for (std::size_t i = 0; i < req.size(); ++i)
      v[i] = req[i] && i < ref.size() ? 100.0 * ref[i] / req[i] : 0.0;
    return v;
  };
  auto cand = rates(*s.candidate);
  std::vector<double> base;
  if (s.baseline) base = rates(*s.baseline);
  double top = 1.0;
  for (double v : cand) top = std::max(top, v);
  for (double v : base) top = std::max(top, v);
  top = std::ceil(top);
  auto x = [&](std::size_t i) {
    return L + (W - L - R) * (n == 1 ? 0.5 : double(i) / double(n - 1));
  };
  auto y = [&](double v) { return T + (H - T - B) * (1.0 - v / top); };
  auto line = [&](const std::vector<double>& v, const char* colour) {
    std::string pts;
    char buf[48];
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x(i), y(v[i]));
      pts += buf;
    }
    return "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
           "\" stroke-width=\"1.5\" points=\"" + pts + "\"/>";
  };
  char buf[512];
  std::string svg;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">",
                W, H);
  svg += buf;
  for (int k = 0; k <= 4; ++k) {
    double v = top * k / 4;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                  "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.1f%%</text>",
                  L, W - R, y(v), y(v), L - 6, y(v) + 4, v);
    svg += buf;
  }
  for (int k = 0; k <= 4; ++k) {
    std::size_t i = (n - 1) * static_cast<std::size_t>(k) / 4;
    std::snprintf(
        buf, sizeof buf, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>", x(i),
        H - B + 18,
        minute_text(s.minute0 + static_cast<limit::Micros>(i) * kMinute).substr(11).c_str());
    svg += buf;
  }
  if (s.baseline) svg += line(base, "#888");
  svg += line(cand, "#c0392b");
  svg += "</svg>";
  return svg;
}

void html_config(const Replayer& rp, std::size_t top, std::ostream& out) {
  const auto& r = rp.report();
  out << "<h2>" << r.label << ": " << html_escaped(r.file) << "</h2>\n<p>Refused "
      << thousands(r.refused) << " of " << thousands(r.requests) << " ("
      << percent(r.refused, r.requests) << ")";
  if (r.shadow_only) out << "; shadow limits would refuse " << thousands(r.shadow_only) << " more";
  out << ".</p>\n<table><tr><th>route/limit</th><th>mode</th><th>seen</th><th>refused</th>"
         "<th>rate</th><th>shadow</th></tr>\n";
  for (const auto& route : r.limits)
    for (const auto& l : route)
      out << "<tr><td>" << html_escaped(name_of(l)) << "</td><td>"
          << (l.shadow ? "shadow" : "enforce") << "</td><td>" << thousands(l.seen) << "</td><td>"
          << (l.shadow ? "-" : thousands(l.refused)) << "</td><td>"
          << (l.shadow ? "-" : percent(l.refused, l.seen)) << "</td><td>"
          << (l.shadow ? thousands(l.shadow_refused) : "-") << "</td></tr>\n";
  out << "</table>\n<h3>Most refused callers</h3>\n<table><tr><th>route/limit</th><th>caller</th>"
         "<th>refused</th></tr>\n";
  for (const auto& route : r.limits)
    for (const auto& l : route)
      for (const auto& e : l.refused_keys.top(top))
        out << "<tr><td>" << html_escaped(name_of(l)) << "</td><td>" << html_escaped(e.key)
            << "</td><td>" << thousands(e.count) << "</td></tr>\n";
  out << "</table>\n<h3>Closest to their limit</h3>\n<table><tr><th>route/limit</th>"
         "<th>caller</th><th>peak share of quota</th></tr>\n";
  for (const auto& route : r.limits)
    for (const auto& l : route)
      for (const auto& [key, used] : l.closest.top())
        out << "<tr><td>" << html_escaped(name_of(l)) << "</td><td>" << html_escaped(key)
            << "</td><td>" << static_cast<int>(std::lround(used * 100)) << "%</td></tr>\n";
  out << "</table>\n";
  for (const auto& m : r.missing_inputs)
    out << "<p><b>warning:</b> " << html_escaped(m) << "</p>\n";
}

}  // namespace

void write_html(const Summary& s, std::size_t top, std::ostream& out) {
  out << "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>floodgate replay</title>"
         "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
         ".c{color:#c0392b}.b{color:#888}</style></head><body>\n";
  out << "<h1>floodgate replay</h1>\n<p>" << thousands(s.counts.requests) << " requests, "
      << limit::format_utc(s.first).substr(0, 19) << "Z to "
      << limit::format_utc(s.last).substr(0, 19) << "Z; " << thousands(s.counts.bad)
      << " bad lines.</p>\n";
  out << "<h2>Refusal rate per minute</h2>\n<p><span class=\"c\">&#9632; candidate</span>";
  if (s.baseline) out << " &nbsp; <span class=\"b\">&#9632; baseline</span>";
  out << "</p>\n" << svg_plot(s) << "\n";
  html_config(*s.candidate, top, out);
  if (s.baseline) {
    html_config(*s.baseline, top, out);
    auto conc = concentration(s.diff);
    out << "<h2>Difference</h2>\n<p>Refused only by the candidate: "
        << thousands(s.diff.newly_refused)
        << "; only by the baseline: " << thousands(s.diff.newly_admitted)
        << ".</p>\n<table><tr><th>caller</th><th>requests"
        << "</th></tr>\n";
    for (const auto& e : conc.entries)
      out << "<tr><td>" << html_escaped(e.key) << "</td><td>" << thousands(e.count)
          << "</td></tr>\n";
    out << "</table>\n";
  }
  out << "</body></html>\n";
}

}  // namespace floodgate::replay
