#pragma once
// The rules of Envoy's rate limit service's domains, as a tree per domain (built at load by
// config/rls_rules.cpp, walked per call by rls/rls_call.cpp).

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::config {

// Envoy's rate limit service (SPEC "Envoy's rate limit service (RLS)"). Each domain's limits
// are a Route of Config::routes named "rls:DOMAIN", so that metrics, /top, overrides, store
// keys and replay treat a descriptor's limit as a route's; its rules say which of them a
// descriptor gets.
struct RlsRule {
  std::vector<std::size_t> limits;    // into the domain route's limits
  bool unlimited = false;             // matched, never limited (envoy_config `unlimited: true`)
  std::string name;                   // rate_limit.name: current_limit.name, and `replaces`
  std::vector<std::string> replaces;  // rules of these names are dropped when both match
};

// One level of a domain's rules: a descriptor's entry i is looked up in the node its entries
// before it led to, by key and value first, then by the value patterns (a prefix ending in
// `*`) in config order, then by key for any value (envoyproxy/ratelimit's order). A
// descriptor gets the rule of the node its last entry leads to.
struct RlsNode {
  // (key, value) pairs ordered as views, so that a call's entries are looked up as they are.
  struct EntryLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const std::string_view ak = a.first, bk = b.first;
      return ak != bk ? ak < bk : std::string_view(a.second) < std::string_view(b.second);
    }
  };
  std::map<std::pair<std::string, std::string>, std::size_t, EntryLess> exact;  // -> nodes
  struct Pattern {
    std::string key, prefix;
    std::size_t node = 0;
  };
  std::vector<Pattern> patterns;
  std::map<std::string, std::size_t, std::less<>> any;
  int rule = -1;  // into the domain's rules; -1: none ends here
};

struct RlsDomain {
  std::string name;
  std::size_t route = 0;  // into Config::routes
  // The route's last limit, "override": what a descriptor carrying its own `limit` is
  // counted under (a fixed window of that limit, keyed by the descriptor and its rate).
  std::size_t override_limit = 0;
  std::vector<RlsRule> rules;
  std::vector<RlsNode> nodes{1};  // nodes[0]: the first entry's level
};

}  // namespace floodgate::config
