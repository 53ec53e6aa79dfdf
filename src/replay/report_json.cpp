// A replay as JSON, for machines: the same figures as the text, with per-minute series.
#include <boost/json.hpp>

#include <ostream>

#include "floodgate/limit/utc_time.hpp"
#include "replay.hpp"
#include "report_format.hpp"

namespace floodgate::replay {

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
  o["label"] = r.label;
  o["file"] = r.file;
  if (r.simulation.instances > 0)
    o["lease_simulation"] = {{"instances", r.simulation.instances},
                             {"spread", to_string(r.simulation.spread)}};
  o["requests"] = r.requests;
  o["refused"] = r.refused;
  o["shadow_only"] = r.shadow_only;
  o["unmatched"] = r.unmatched;
  o["rejected"] = r.rejected;
  o["denied"] = r.denied;
  o["allowed"] = r.allowed;
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
      if (!l.refused_by_rollout_percent.empty()) {
        // What each share would refuse: the keys enforced at P% are those below it.
        boost::json::object at;
        for (int p : kRolloutSteps) at[std::to_string(p) + "%"] = l.refused_at(p);
        lo["rollout"] = {{"enforced", config::format_rollout(l.rollout_basis_points)},
                         {"would_refuse", std::move(at)}};
      }
      lo["refused_per_minute"] = series(l.refused_by_minute, s.requests_by_minute.size());
      boost::json::array keys;
      for (const auto& e : l.refused_keys.top(top))
        keys.push_back({{"caller", e.caller}, {"refused", e.count}, {"error", e.error}});
      lo["top_refused"] = std::move(keys);
      boost::json::array callers;
      for (const auto& e : l.callers.top(top))
        callers.push_back({{"caller", e.caller},
                           {"requests", e.count},
                           {"refused", e.refused},
                           {"shadow_refused", e.shadow_refused},
                           {"error", e.error}});
      lo["top_callers"] = std::move(callers);
      boost::json::array closest;
      for (const auto& [key, used] : l.closest.top())
        closest.push_back({{"caller", key}, {"peak_share_used", used}});
      lo["closest"] = std::move(closest);
      if (l.lease) {
        const auto& c = *l.lease->counters;
        lo["lease"] = {{"size", l.lease->size},
                       {"bound", l.lease->bound},
                       {"bound_terms", l.lease->terms},
                       {"refused", l.lease->refused},
                       {"most_free_at_refusal", l.lease->most_free_at_refusal},
                       {"over_admitted", l.lease->over_admitted},
                       {"local", c.local.load()},
                       {"leases", c.leases.load()},
                       {"granted", c.granted.load()},
                       {"returned", c.returned.load()}};
      }
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
    for (const auto& e : conc.entries)
      keys.push_back({{"caller", e.caller}, {"requests", e.count}});
    o["difference"] = {{"refused_only_by_candidate", s.diff.newly_refused},
                       {"refused_only_by_baseline", s.diff.newly_admitted},
                       {"share_of_top_callers", conc.share},
                       {"top_callers", std::move(keys)}};
  }
  out << boost::json::serialize(o) << "\n";
}

}  // namespace floodgate::replay
