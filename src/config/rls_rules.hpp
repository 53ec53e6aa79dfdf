#pragma once
// What floodgate's `rls.domains` and envoyproxy/ratelimit's files share: a domain's route, a
// rule's place in the domain's tree, its limits' key (the descriptor's entries).

#include <optional>
#include <string>
#include <vector>

#include "yaml_reader.hpp"

namespace floodgate::config {

// One entry of a rule: the key, and a value (`any`: every value; a value ending in `*`: that
// prefix).
struct RlsEntry {
  std::string key;
  std::string value;
  bool any = true;
};

// A domain names a route ("rls:DOMAIN"), a metrics label and a store key's part.
bool valid_rls_domain(std::string_view name);
std::string rls_domain_rule();
// The route a domain's limits live in.
Route rls_route(const std::string& domain, OnStoreError on_store_error);
// The name of the limit a descriptor's own `limit` is counted under (reserved in a domain).
inline constexpr const char* kRlsOverrideLimit = "override";
// Appends that limit to `d`'s route, once its rules are read.
void add_override_limit(RlsDomain& d, Route& route);
// A rule's limits are keyed by the descriptor's entries (each by position: a rule fixes the keys).
std::vector<KeyPart> rls_key(const std::vector<RlsEntry>& match);
// Adds `rule` at the end of `match`'s path through `d`'s tree; an error message when another
// rule is there already.
std::optional<std::string> add_rls_rule(RlsDomain& d, const std::vector<RlsEntry>& match,
                                        RlsRule rule);

// `rls.envoy_config` (load_envoy_rls.cpp): every *.yaml / *.yml file under `dir`, read as
// envoyproxy/ratelimit reads it; their domains added to `out` (merged with `rls.domains`: a
// domain in both is an error), their limits as routes.
void read_envoy_rls_dir(YamlReader& r, const YAML::Node& at, const std::string& path,
                        RlsSettings& out, std::vector<Route>& routes);

}  // namespace floodgate::config
