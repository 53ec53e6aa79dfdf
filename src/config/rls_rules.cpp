#include "rls_rules.hpp"

#include "sections.hpp"

namespace floodgate::config {

bool valid_rls_domain(std::string_view name) {
  return !name.empty() && name.size() <= 128 && valid_name(name);
}

std::string rls_domain_rule() {
  return "a domain must be 1-128 letters, digits, '-', '_' or '.' (it names metrics and store "
         "keys)";
}

Route rls_route(const std::string& domain, OnStoreError on_store_error) {
  Route route;
  route.name = "rls:" + domain;
  route.rls = true;
  route.on_store_error = on_store_error;
  return route;
}

void add_override_limit(RlsDomain& d, Route& route) {
  Limit l;
  l.name = kRlsOverrideLimit;
  l.algorithm = Algorithm::fixed_window;
  l.params.limit = 1;  // each call's own: requests_per_unit per unit
  l.params.window = std::chrono::seconds(1);
  d.override_limit = route.limits.size();
  route.limits.push_back(std::move(l));
}

std::vector<KeyPart> rls_key(const std::vector<RlsEntry>& match) {
  std::vector<KeyPart> key;
  for (std::size_t i = 0; i < match.size(); ++i)
    key.push_back({KeyPart::Kind::descriptor, std::to_string(i), "descriptor:" + match[i].key});
  return key;
}

std::optional<std::string> add_rls_rule(RlsDomain& d, const std::vector<RlsEntry>& match,
                                        RlsRule rule) {
  std::size_t at = 0;
  std::string path;
  for (const auto& e : match) {
    path += (path.empty() ? "" : ", ") + e.key + (e.any ? "" : "=" + e.value);
    std::size_t next = d.nodes.size();
    auto& node = d.nodes[at];
    if (e.any) {
      auto [it, added] = node.any.try_emplace(e.key, next);
      next = it->second;
      if (!added) {
        at = next;
        continue;
      }
    } else if (!e.value.empty() && e.value.back() == '*') {
      const std::string prefix = e.value.substr(0, e.value.size() - 1);
      bool found = false;
      for (const auto& p : node.patterns)
        if (p.key == e.key && p.prefix == prefix) next = p.node, found = true;
      if (found) {
        at = next;
        continue;
      }
      node.patterns.push_back({e.key, prefix, next});
    } else {
      auto [it, added] = node.exact.try_emplace({e.key, e.value}, next);
      next = it->second;
      if (!added) {
        at = next;
        continue;
      }
    }
    d.nodes.emplace_back();  // `node` is not used past here: emplace_back may move it
    at = next;
  }
  if (d.nodes[at].rule >= 0)
    return "the same descriptor [" + path + "] as an earlier rule of domain \"" + d.name + "\"";
  d.nodes[at].rule = static_cast<int>(d.rules.size());
  d.rules.push_back(std::move(rule));
  return std::nullopt;
}

}  // namespace floodgate::config
