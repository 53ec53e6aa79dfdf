// `rls.envoy_config`: a directory of envoyproxy/ratelimit configuration files, read with that
// service's meaning (its README and config loader): `domain`, nested `descriptors` of `key`,
// optional `value` (a trailing `*` a prefix), `rate_limit: {unit, requests_per_unit, unlimited,
// name, replaces}`, `shadow_mode`, `detailed_metric`. A rate limit is a fixed window of one
// unit aligned to the epoch (month = 30 days, year = 365), decided by floodgate's store.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "rls_rules.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

namespace fs = std::filesystem;

// envoyproxy/ratelimit's units (case-insensitive, as it upper-cases them), in seconds.
std::optional<std::int64_t> unit_seconds(std::string unit) {
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::pair<const char*, std::int64_t> kUnits[] = {
      {"second", 1},    {"minute", 60},        {"hour", 3600},       {"day", 86400},
      {"week", 604800}, {"month", 30 * 86400}, {"year", 365 * 86400}};
  for (const auto& [name, seconds] : kUnits)
    if (unit == name) return seconds;
  return std::nullopt;
}

// A limit's name from the rule's path when rate_limit.name gives none (or one that cannot
// name a metric): the keys and values joined with '.', other bytes as '_'.
std::string generated_name(const std::vector<RlsEntry>& path) {
  std::string out;
  for (const auto& e : path) {
    if (!out.empty()) out += '.';
    out += e.key;
    if (!e.any) out += "_" + e.value;
  }
  for (auto& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return out.substr(0, 200);
}

struct FileReader {
  YamlReader& r;
  RlsDomain& domain;
  Route& route;
  std::set<std::string>& names;

  // A rule's `rate_limit`: its limit (none when unlimited) into the rule.
  void rate_limit(const Section& s, const std::vector<RlsEntry>& path, bool shadow, RlsRule& rule) {
    if (!r.map(s.node(), s.path(), {"unit", "requests_per_unit", "unlimited", "name", "replaces"}))
      return;
    s.boolean("unlimited", rule.unlimited);
    s.string("name", rule.name);
    if (s.has("replaces"))
      for (const auto& n : r.sequence(s["replaces"], s.at("replaces"))) {
        Section rep(r, n, s.at("replaces"));
        if (!r.map(n, rep.path(), {"name"}) || !rep.require("name")) continue;
        std::string name;
        rep.string("name", name);
        if (name.empty())
          r.error(n, rep.path(), "should not have an empty replaces entry");
        else if (name == rule.name)
          r.error(n, rep.path(), "replaces should not contain name of same descriptor");
        else
          rule.replaces.push_back(name);
      }
    if (rule.unlimited) {
      if (s.has("unit"))
        r.error(s["unit"], s.at("unit"), "should not specify rate limit unit when unlimited");
      return;
    }
    std::optional<std::int64_t> seconds;
    if (s.require("unit"))
      if (auto unit = r.string(s["unit"], s.at("unit")); unit && !(seconds = unit_seconds(*unit)))
        r.error(s["unit"], s.at("unit"),
                "invalid rate limit unit '" + *unit +
                    "' (expected second, minute, hour, day, week, month or year)");
    std::int64_t per_unit = 0;
    if (s.require("requests_per_unit")) s.integer("requests_per_unit", per_unit, 0, 4294967295LL);
    if (!seconds) return;
    Limit l;
    l.name = valid_name(rule.name) ? rule.name : generated_name(path);
    for (int n = 2; !names.insert(l.name).second; ++n)
      l.name = (valid_name(rule.name) ? rule.name : generated_name(path)) + "." + std::to_string(n);
    l.algorithm = Algorithm::fixed_window;
    l.params.limit = per_unit;  // 0 refuses every request, as there
    l.params.window = std::chrono::seconds(*seconds);
    l.key = rls_key(path);
    l.mode = shadow ? LimitMode::shadow : LimitMode::enforce;
    rule.limits.push_back(route.limits.size());
    route.limits.push_back(std::move(l));
  }

  // One `descriptors` list at depth path.size(), its rules and their children.
  void descriptors(const YAML::Node& n, const std::string& at, std::vector<RlsEntry>& path) {
    const auto items = r.sequence(n, at);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string here = at + "[" + std::to_string(i) + "]";
      Section s(r, items[i], here);
      if (!r.map(items[i], here,
                 {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric"}))
        continue;
      RlsEntry e;
      if (s.require("key")) s.string("key", e.key);
      if (e.key.empty()) {
        r.error(items[i], here, "descriptor has empty key");
        continue;
      }
      if (s.has("value")) {
        s.string("value", e.value);
        e.any = e.value.empty();  // as there: an empty value is the key's default
      }
      bool shadow = false, detailed = false;
      s.boolean("shadow_mode", shadow);
      s.boolean("detailed_metric", detailed);  // per-value metrics: see docs/spec-notes.md
      path.push_back(e);
      if (s.has("rate_limit")) {
        RlsRule rule;
        rate_limit(Section(r, s["rate_limit"], s.at("rate_limit")), path, shadow, rule);
        if (auto clash = add_rls_rule(domain, path, std::move(rule)))
          r.error(items[i], here, "duplicate descriptor: " + *clash);
      }
      if (s.has("descriptors")) descriptors(s["descriptors"], s.at("descriptors"), path);
      path.pop_back();
    }
  }
};

// The files under `dir` envoyproxy/ratelimit would read, in name order (dot files and
// directories skipped; only *.yaml and *.yml, so a README beside them is not a config).
std::vector<fs::path> config_files(const fs::path& dir, std::error_code& ec) {
  std::vector<fs::path> out;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (!name.empty() && name.front() == '.') {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    const auto ext = it->path().extension();
    if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void read_file(YamlReader& parent, const fs::path& file, RlsSettings& out,
               std::vector<Route>& routes, OnStoreError on_store_error) {
  YamlReader r = parent.for_file(file.string());
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    r.error_at(YAML::Mark(), "cannot be read");
    return;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    r.error_at(e.mark, "error loading config file: " + e.msg);
    return;
  }
  Section s(r, root, "");
  if (!r.map(root, "", {"domain", "descriptors"})) return;
  RlsDomain d;
  if (s.has("domain")) s.string("domain", d.name);
  if (d.name.empty()) {
    r.error(root, "domain", "config file cannot have empty domain");
    return;
  }
  if (!valid_rls_domain(d.name)) {
    r.error(s["domain"], "domain", rls_domain_rule());
    return;
  }
  if (out.domain(d.name)) {
    r.error(s["domain"], "domain",
            "duplicate domain '" + d.name + "' (in rls.domains or another file)");
    return;
  }
  Route route = rls_route(d.name, on_store_error);
  std::set<std::string> names{kRlsOverrideLimit};
  FileReader reader{r, d, route, names};
  std::vector<RlsEntry> path;
  try {
    if (s.has("descriptors")) reader.descriptors(s["descriptors"], "descriptors", path);
  } catch (const YAML::Exception& e) {
    r.error_at(e.mark, "unexpected structure: " + e.msg);
    return;
  }
  add_override_limit(d, route);
  d.route = routes.size();
  routes.push_back(std::move(route));
  out.domains.push_back(std::move(d));
}

}  // namespace

void read_envoy_rls_dir(YamlReader& r, const YAML::Node& at, const std::string& path,
                        RlsSettings& out, std::vector<Route>& routes) {
  std::error_code ec;
  if (!fs::is_directory(out.envoy_config, ec)) {
    r.error(at, path, "\"" + out.envoy_config + "\" is not a directory");
    return;
  }
  const auto files = config_files(out.envoy_config, ec);
  if (ec) {
    r.error(at, path, "cannot list \"" + out.envoy_config + "\": " + ec.message());
    return;
  }
  if (files.empty()) r.warn(at, path, "\"" + out.envoy_config + "\" has no *.yaml or *.yml file");
  for (const auto& f : files) read_file(r, f, out, routes, out.on_store_error);
}

}  // namespace floodgate::config
