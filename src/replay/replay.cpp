#include "replay.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "floodgate/config/loader.hpp"
#include "floodgate/limit/utc_time.hpp"

namespace floodgate::replay {

namespace {

constexpr limit::Micros kMinute = 60 * limit::kMicrosPerSecond;
// A year of minutes: longer logs fold their tail into the last minute of the series.
constexpr std::size_t kMaxMinutes = 366 * 24 * 60;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Settings a replay never reads: where the store and the origins are, and the secrets (it
// keys its own throwaway store, and reads claims from the log rather than verifying tokens).
bool unused_offline(std::string_view path) {
  for (std::string_view p :
       {"store.", "upstreams.", "jwt.hs256_secret", "jwt.public_keys", "admin.", "server.listen"})
    if (path.starts_with(p)) return true;
  return false;
}

// A value of the shape the setting at `path` takes, for a variable a replay does not need.
std::string stand_in(const config::UnsetVariable& v) {
  if (v.path.ends_with(".url")) return "http://unset-in-replay.invalid";
  if (v.path.starts_with("store.redis") || v.path.ends_with("listen")) return "127.0.0.1:1";
  return "unset-in-replay-" + v.name;
}

config::ConfigPtr load(const std::string& file, std::ostream& err) {
  auto r = config::load_config_file(file);
  if (!r.config) {
    // Unset variables the replay does not need are not its errors: a stand-in, and a note.
    // Loaded again with those; should errors remain, the first load's are the ones to show.
    std::vector<config::UnsetVariable> unused;
    for (const auto& v : r.unset)
      if (unused_offline(v.path)) unused.push_back(v);
    if (!unused.empty()) {
      auto env = [&unused, real = config::process_env()](const std::string& name) {
        for (const auto& v : unused)
          if (v.name == name) return std::optional<std::string>(stand_in(v));
        return real(name);
      };
      auto again = config::load_config_file(file, env);
      if (again.config) {
        for (const auto& v : unused)
          err << "floodgate replay: " << v.name << " is not set; " << file
              << " uses it only where a replay does not look\n";
        r = std::move(again);
      }
    }
  }
  if (!r.config) {
    for (const auto& e : r.errors) err << e.to_string() << "\n";
    err << file << ": " << r.errors.size() << " error" << (r.errors.size() == 1 ? "" : "s") << "\n";
  }
  return r.config;
}

const char* verdict_text(Verdict v) {
  switch (v) {
    case Verdict::admitted:
      return "admitted";
    case Verdict::refused:
      return "refused";
    case Verdict::rejected:
      return "rejected";
    case Verdict::denied:
      return "denied";
    case Verdict::unmatched:
      return "no-route";
  }
  return "?";
}

void write_decision(std::ostream& out, const Decision& d) {
  out << '\t' << (d.route ? d.route->name : "-") << '\t' << verdict_text(d.verdict) << '\t'
      << (d.limit ? d.limit->name : "-");
}

bool has_lease(const config::Config& c) {
  for (const auto& route : c.routes)
    for (const auto& l : route.limits)
      if (l.lease) return true;
  return false;
}

}  // namespace

int run(const Options& o, std::ostream& out, std::ostream& err) {
  if (o.lease && !o.baseline_file.empty()) {
    err << "floodgate replay: --lease compares the config with itself decided exactly; it "
           "takes no --baseline\n";
    return 2;
  }
  auto candidate = load(o.candidate_file, err);
  if (!candidate) return 2;
  config::ConfigPtr baseline;
  if (!o.baseline_file.empty()) {
    baseline = load(o.baseline_file, err);
    if (!baseline) return 2;
  }
  Summary s;
  s.files = o.logs;
  LogReader reader;
  std::string open_error;
  if (!reader.open(o.logs, open_error)) {
    err << "floodgate replay: " << open_error << "\n";
    return 2;
  }
  std::ofstream decisions;
  if (!o.decisions_file.empty()) {
    decisions.open(o.decisions_file);
    if (!decisions) {
      err << "floodgate replay: cannot write " << o.decisions_file << "\n";
      return 2;
    }
  }
  const auto key_hash = key_hash_for({candidate.get(), baseline.get()});
  if (o.lease) {
    // The same config twice: its leased limits by the simulated instances, and exactly.
    LeaseSimulation sim{o.instances, o.spread};
    if (sim.instances == 0)
      sim.instances = static_cast<std::size_t>(std::max(1, candidate->store.instances));
    if (!has_lease(*candidate))
      err << "floodgate replay: no limit in " << o.candidate_file
          << " has a lease: every limit is decided exactly\n";
    s.candidate =
        std::make_unique<Replayer>(candidate, "leased", o.candidate_file, o.top, sim, key_hash);
    s.baseline = std::make_unique<Replayer>(candidate, "exact", o.candidate_file, o.top,
                                            LeaseSimulation{}, key_hash);
  } else {
    s.candidate = std::make_unique<Replayer>(candidate, "candidate", o.candidate_file, o.top,
                                             LeaseSimulation{}, key_hash);
    if (baseline)
      s.baseline = std::make_unique<Replayer>(baseline, "baseline", o.baseline_file, o.top,
                                              LeaseSimulation{}, key_hash);
  }

  if (!o.overrides_file.empty()) {
    std::ifstream in(o.overrides_file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string why = in ? "" : "cannot read the file";
    auto list = why.empty() ? limit::overrides_from_json(text, why) : std::nullopt;
    if (!list) {
      err << "floodgate replay: " << o.overrides_file << ": " << why << "\n";
      return 2;
    }
    for (auto& ov : *list) ov.until = 0;  // in force for the whole log
    s.candidate->set_overrides(*list);
    if (s.baseline) s.baseline->set_overrides(*list);
  }

  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  auto next_progress = wall_start + std::chrono::seconds(1);
  std::vector<std::string> inputs_seen;
  limit::Micros clock = 0;
  std::uint64_t n = 0;
  while (const LogRecord* r = reader.next()) {
    if (n++ == 0) {
      s.first = r->at;
      s.minute0 = r->at - (r->at % kMinute + kMinute) % kMinute;
      clock = r->at;
    }
    // Lines of one log may be a little out of order (several workers writing): time never
    // goes back, a late line is decided at the latest time seen.
    if (r->at < clock)
      ++s.out_of_order;
    else
      clock = r->at;
    const auto minute = std::min<std::size_t>(
        static_cast<std::size_t>((clock - s.minute0) / kMinute), kMaxMinutes - 1);
    bump(s.requests_by_minute, minute);
    if (r->live_refused) ++s.live_refused;
    if (r->has_fields) ++s.with_fields;
    // nginx lines carry the whole query: every query: input is there.
    if (!r->query.empty() &&
        std::find(inputs_seen.begin(), inputs_seen.end(), "query:*") == inputs_seen.end())
      inputs_seen.emplace_back("query:*");
    for (const auto& f : r->fields) {
      // An RLS call's rls:domain, rls:N, ... are the one input "descriptors".
      const std::string_view input = f.first.starts_with("rls:") ? "descriptors" : f.first;
      if (std::find(inputs_seen.begin(), inputs_seen.end(), input) == inputs_seen.end())
        inputs_seen.emplace_back(input);
    }

    auto c = s.candidate->decide(*r, clock, minute);
    if (s.baseline) {
      auto b = s.baseline->decide(*r, clock, minute);
      const bool cr = c.verdict == Verdict::refused, br = b.verdict == Verdict::refused;
      if (cr && !br) {
        ++s.diff.newly_refused;
        s.diff.keys.add("+ " + c.route->name + "/" + c.limit->name + " " + c.key);
      } else if (br && !cr) {
        ++s.diff.newly_admitted;
        s.diff.keys.add("- " + b.route->name + "/" + b.limit->name + " " + b.key);
      }
      if (decisions) {
        decisions << limit::format_utc(clock) << '\t' << r->method << '\t' << r->path;
        write_decision(decisions, c);
        write_decision(decisions, b);
        decisions << '\n';
      }
    } else if (decisions) {
      decisions << limit::format_utc(clock) << '\t' << r->method << '\t' << r->path;
      write_decision(decisions, c);
      decisions << '\n';
    }
    if ((n & 0x3fff) == 0) {
      s.peak_live_keys = std::max(s.peak_live_keys, s.candidate->live_keys());
      if (o.progress) {
        auto now = std::chrono::steady_clock::now();
        if (now >= next_progress) {
          next_progress = now + std::chrono::seconds(1);
          const double secs = std::chrono::duration<double>(now - wall_start).count();
          char line[160];
          std::snprintf(line, sizeof line,
                        "replay: %.1f M requests, %.2f M/s, log time %s, %.0f%% of input\n",
                        static_cast<double>(n) / 1e6, static_cast<double>(n) / 1e6 / secs,
                        limit::format_utc(clock).substr(0, 19).c_str(), reader.progress() * 100.0);
          err << line << std::flush;
        }
      }
    }
  }
  s.last = clock;
  s.peak_live_keys = std::max(s.peak_live_keys, s.candidate->live_keys());
  s.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  s.cpu_seconds = cpu_seconds() - cpu_start;
  s.counts = reader.counts();
  s.read_errors = reader.read_errors();
  s.candidate->finish(s.with_fields, inputs_seen);
  if (s.baseline) s.baseline->finish(s.with_fields, inputs_seen);

  if (o.json)
    write_json(s, o.top, out);
  else
    write_text(s, o.top, out);
  if (!o.html_file.empty()) {
    std::ofstream html(o.html_file);
    write_html(s, o.top, html);
    if (!html) {
      err << "floodgate replay: cannot write " << o.html_file << "\n";
      return 2;
    }
  }
  return 0;
}

}  // namespace floodgate::replay
