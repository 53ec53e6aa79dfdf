#pragma once
// `floodgate replay`: reads access logs and decides every request again under a candidate
// config (and, to compare, a baseline), then reports what each would have refused.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "log_reader.hpp"
#include "replayer.hpp"

namespace floodgate::replay {

struct Options {
  std::string candidate_file;
  std::string baseline_file;  // empty: no comparison
  std::vector<std::string> logs;
  bool json = false;
  std::string html_file;       // empty: none
  std::string decisions_file;  // empty: none; else one TSV line per request
  std::size_t top = 10;
  bool progress = true;  // on stderr, about once a second
  // --lease: the candidate's leased limits decided by simulated instances, against the same
  // config decided exactly (in the baseline's place). instances 0: the config's store.instances.
  bool lease = false;
  std::size_t instances = 0;
  // --overrides: per-caller overrides in the JSON GET /overrides answers, in force all along.
  std::string overrides_file;
  Spread spread = Spread::client;
};

struct Difference {
  std::uint64_t newly_refused = 0;   // refused by the candidate, admitted by the baseline
  std::uint64_t newly_admitted = 0;  // the other way round
  TopCounter keys{1024};             // "+ route/limit caller" and "- route/limit caller"
};

struct Summary {
  std::vector<std::string> files;
  LineCounts counts;
  std::vector<std::string> read_errors;
  limit::Micros first = 0, last = 0;  // the log's time span
  limit::Micros minute0 = 0;          // the minute series start here
  std::vector<std::uint32_t> requests_by_minute;
  std::uint64_t live_refused = 0;  // refused at the time, by floodgate (its own log says so)
  std::uint64_t with_fields = 0;   // lines that carried replay fields
  std::uint64_t out_of_order = 0;  // lines earlier than the one before (decided at that time)
  double wall_seconds = 0;
  double cpu_seconds = 0;
  std::size_t peak_live_keys = 0;
  std::unique_ptr<Replayer> candidate;
  std::unique_ptr<Replayer> baseline;
  Difference diff;
};

// Runs a replay. Returns the exit status: 0, or 2 with a message on `err` for unusable
// input (a config with errors, a log that cannot be opened).
int run(const Options& options, std::ostream& out, std::ostream& err);

// The renderings of a finished replay.
void write_text(const Summary& s, std::size_t top, std::ostream& out);
void write_json(const Summary& s, std::size_t top, std::ostream& out);
void write_html(const Summary& s, std::size_t top, std::ostream& out);

}  // namespace floodgate::replay
