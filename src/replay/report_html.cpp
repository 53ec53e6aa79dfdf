// A replay as one HTML page with an SVG plot of each config's refusals per minute.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string_view>

#include "floodgate/limit/utc_time.hpp"
#include "replay.hpp"
#include "report_format.hpp"

namespace floodgate::replay {

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
        out << "<tr><td>" << html_escaped(name_of(l)) << "</td><td>" << html_escaped(e.caller)
            << "</td><td>" << thousands(e.count) << "</td></tr>\n";
  out << "</table>\n<h3>Busiest callers</h3>\n<table><tr><th>route/limit</th><th>caller</th>"
         "<th>requests</th><th>refused</th><th>shadow refused</th></tr>\n";
  for (const auto& route : r.limits)
    for (const auto& l : route)
      for (const auto& e : l.callers.top(top))
        out << "<tr><td>" << html_escaped(name_of(l)) << "</td><td>" << html_escaped(e.caller)
            << "</td><td>" << thousands(e.count)
            << (e.error ? " (±" + thousands(e.error) + ")" : "") << "</td><td>"
            << thousands(e.refused) << "</td><td>" << thousands(e.shadow_refused) << "</td></tr>\n";
  out << "</table>\n<h3>Closest to their limit</h3>\n<table><tr><th>route/limit</th>"
         "<th>caller</th><th>peak share of quota</th></tr>\n";
  for (const auto& route : r.limits)
    for (const auto& l : route)
      for (const auto& [key, used] : l.closest.top())
        if (!ever_refused(l, key))
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
  out << "<h2>Refusal rate per minute</h2>\n<p><span class=\"c\">&#9632; "
      << s.candidate->report().label << "</span>";
  if (s.baseline)
    out << " &nbsp; <span class=\"b\">&#9632; " << s.baseline->report().label << "</span>";
  out << "</p>\n" << svg_plot(s) << "\n";
  html_config(*s.candidate, top, out);
  if (s.baseline) {
    html_config(*s.baseline, top, out);
    auto conc = concentration(s.diff);
    out << "<h2>Difference</h2>\n<p>Refused only by the " << s.candidate->report().label << ": "
        << thousands(s.diff.newly_refused) << "; only by the " << s.baseline->report().label << ": "
        << thousands(s.diff.newly_admitted) << ".</p>\n<table><tr><th>caller</th><th>requests"
        << "</th></tr>\n";
    for (const auto& e : conc.entries)
      out << "<tr><td>" << html_escaped(e.caller) << "</td><td>" << thousands(e.count)
          << "</td></tr>\n";
    out << "</table>\n";
  }
  bool heading = false;
  for_each_lease(s, [&](const LimitReport& leased, const LimitReport& exact) {
    if (!heading) out << "<h2>" << html_escaped(lease_heading(s)) << "</h2>\n";
    heading = true;
    out << "<p>";
    const char* sep = "";
    for (const auto& line : lease_lines(leased, exact)) {
      out << sep << html_escaped(line);
      sep = "<br>\n";
    }
    out << "</p>\n";
  });
  out << "</body></html>\n";
}

}  // namespace floodgate::replay
