#pragma once
// YAML -> validated Config. Every problem is collected (never only the first) and reported
// with the file, line and column it comes from; a config with errors yields no snapshot.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/config/config.hpp"

namespace floodgate::config {

struct Diagnostic {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string message;

  std::string to_string() const;  // "FILE:LINE:COL: message"
};

// A ${NAME} that had no value (an error), and the setting it was in ("store.key_secret").
struct UnsetVariable {
  std::string name;
  std::string path;
};

struct LoadResult {
  ConfigPtr config;  // null when errors is not empty
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  std::vector<UnsetVariable> unset;  // among the errors: what the replay may stand in for
};

// Looks up ${NAME}; injected so tests need not touch the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

LoadResult load_config_file(const std::string& path, const EnvLookup& env = process_env());
LoadResult load_config_text(std::string_view yaml, const std::string& file_name,
                            const EnvLookup& env);
// A config fetched from config_source's url: named `name` in its diagnostics (the url,
// redacted), its relative paths from `base_dir` (the directory of the local file naming the
// source); it must have a `version:` and cannot name a config_source of its own.
LoadResult load_fetched_config(std::string_view yaml, const std::string& name,
                               const std::string& base_dir, const EnvLookup& env);

// A leased limit's definition as one line (key prefix, route, limit, algorithm, parameters,
// tiers, lease terms): equal lines, the same units.
std::string lease_definition(const StoreSettings& store, const Route& route, const Limit& limit);

// What a reload from `running` (the config the process started with: what a reload cannot
// change still runs as it said) to `after` changes that only a restart applies (listeners,
// threads, the admin listener, the store's server), one line each for the log.
std::vector<std::string> restart_only_changes(const Config& running, const Config& after);
// `next` as it will run after a reload: its threads, admin listener, store connection
// (server, cluster nodes, user, password) and access log destination those of `started`, so that
// the published snapshot, and /config with it, says what runs. `next` itself when they are the same
// already.
ConfigPtr as_running(const Config& started, const ConfigPtr& next);

// The one-screen summary printed by --check-config.
std::string summarize(const Config& config);
// A leased limit's early-refusal bound spelled out: "(3 - 1) x 50 + 3 x 50".
std::string early_refusal_terms(int instances, const Limit& limit);

}  // namespace floodgate::config
