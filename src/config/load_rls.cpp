// `rls:` (SPEC "Envoy's rate limit service (RLS)"): the listeners Envoy's rate limit service
// is served on, and floodgate's own descriptor rules per domain. Each domain's limits become
// the route "rls:DOMAIN"; each rule's `match` a path through the domain's RlsNode tree.

#include <set>

#include "rls_rules.hpp"
#include "sections.hpp"

namespace floodgate::config {
namespace {

// One `match` entry: {key} (any value), {key, value} (that value), {key, value: "pre*"}.
std::optional<RlsEntry> read_entry(YamlReader& r, const YAML::Node& n, const std::string& path) {
  Section s(r, n, path);
  if (!r.map(n, path, {"key", "value"}) || !s.require("key")) return std::nullopt;
  RlsEntry e;
  s.string("key", e.key);
  if (e.key.empty()) {
    r.error(s["key"], s.at("key"), "must not be empty (Envoy never sends an empty key)");
    return std::nullopt;
  }
  if (s.has("value")) {
    e.any = false;
    s.string("value", e.value);
  }
  return e;
}

void read_domain(YamlReader& r, const YAML::Node& n, const std::string& path,
                 const StoreSettings& store, OnStoreError on_store_error, RlsSettings& out,
                 std::vector<Route>& routes) {
  Section s(r, n, path);
  if (!r.map(n, path, {"domain", "descriptors"}) || !s.require("domain")) return;
  RlsDomain d;
  s.string("domain", d.name);
  if (!valid_rls_domain(d.name)) {
    r.error(s["domain"], s.at("domain"), rls_domain_rule());
    return;
  }
  if (out.domain(d.name)) {
    r.error(s["domain"], s.at("domain"), "domain \"" + d.name + "\" is configured twice");
    return;
  }
  Route route = rls_route(d.name, on_store_error);
  std::set<std::string> names{kRlsOverrideLimit};
  const auto rules = s.require("descriptors") ? r.sequence(s["descriptors"], s.at("descriptors"))
                                              : std::vector<YAML::Node>{};
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const std::string at = s.at("descriptors") + "[" + std::to_string(i) + "]";
    Section rs(r, rules[i], at);
    if (!r.map(rules[i], at, {"match", "limits"}) || !rs.require("match")) continue;
    std::vector<RlsEntry> match;
    for (const auto& e : r.sequence(rs["match"], rs.at("match")))
      if (auto entry = read_entry(r, e, rs.at("match"))) match.push_back(std::move(*entry));
    if (match.empty()) {
      r.error(rs["match"], rs.at("match"), "needs at least one entry");
      continue;
    }
    RlsRule rule;
    const auto limits = rs.require("limits") ? r.sequence(rs["limits"], rs.at("limits"))
                                             : std::vector<YAML::Node>{};
    for (std::size_t j = 0; j < limits.size(); ++j) {
      const std::string lat = rs.at("limits") + "[" + std::to_string(j) + "]";
      auto l = read_limit(r, limits[j], lat, LimitUse::rls);
      if (!l) continue;
      if (!names.insert(l->name).second) {
        r.error(limits[j]["name"], lat + ".name",
                l->name == kRlsOverrideLimit
                    ? std::string("\"override\" is reserved: it counts descriptors that carry "
                                  "their own limit")
                    : "limit name \"" + l->name + "\" is used twice in domain \"" + d.name + "\"");
        continue;
      }
      l->key = rls_key(match);
      if (l->lease) check_lease(r, limits[j]["lease"], lat + ".lease", store, *l);
      rule.limits.push_back(route.limits.size());
      route.limits.push_back(std::move(*l));
    }
    if (limits.empty() && rs["limits"].IsSequence())
      r.error(rs["limits"], rs.at("limits"), "needs at least one limit");
    if (auto clash = add_rls_rule(d, match, std::move(rule)))
      r.error(rs["match"], rs.at("match"), *clash);
  }
  add_override_limit(d, route);
  d.route = routes.size();
  routes.push_back(std::move(route));
  out.domains.push_back(std::move(d));
}

}  // namespace

void read_rls(const Section& s, const StoreSettings& store, RlsSettings& out,
              std::vector<Route>& routes) {
  auto& r = s.reader();
  if (!r.map(s.node(), s.path(), {"listen", "on_store_error", "domains", "envoy_config"})) return;
  if (s.require("listen")) {
    const auto items = r.sequence(s["listen"], s.at("listen"));
    for (std::size_t i = 0; i < items.size(); ++i)
      if (auto l = read_listener(r, items[i], s.at("listen") + "[" + std::to_string(i) + "]", true))
        out.listen.push_back(std::move(*l));
    if (out.listen.empty() && s["listen"].IsSequence())
      r.error(s["listen"], s.at("listen"), "needs at least one address");
  }
  s.choice<OnStoreError>("on_store_error", out.on_store_error,
                         {{"fail_open", OnStoreError::fail_open},
                          {"fail_closed", OnStoreError::fail_closed},
                          {"local", OnStoreError::local}});
  if (s.has("domains")) {
    const auto domains = r.sequence(s["domains"], s.at("domains"));
    for (std::size_t i = 0; i < domains.size(); ++i)
      read_domain(r, domains[i], s.at("domains") + "[" + std::to_string(i) + "]", store,
                  out.on_store_error, out, routes);
  }
  if (s.has("envoy_config")) {
    s.string("envoy_config", out.envoy_config);
    out.envoy_config = r.resolve_path(out.envoy_config);
    read_envoy_rls_dir(r, s["envoy_config"], s.at("envoy_config"), out, routes);
  }
}

}  // namespace floodgate::config
