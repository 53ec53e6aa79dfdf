#include <sstream>
#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "floodgate/config/redact.hpp"

namespace floodgate::config {
namespace {

std::string describe(const Limit& l, const StoreSettings& store) {
  std::ostringstream o;
  o << l.name << ": " << to_string(l.algorithm) << " ";
  switch (l.algorithm) {
    case Algorithm::token_bucket:
    case Algorithm::gcra:
      o << "capacity " << l.params.capacity << ", refill " << l.params.refill_rate.text;
      break;
    case Algorithm::concurrency:
      o << l.params.limit << " in flight";
      break;
    case Algorithm::quota:
      o << l.params.limit << " per " << (l.period ? l.period->describe() : std::string("period"));
      break;
    default:
      o << l.params.limit << " per " << format_duration(l.params.window);
  }
  o << ", key [";
  for (std::size_t i = 0; i < l.key.size(); ++i) o << (i ? ", " : "") << l.key[i].text;
  o << "]";
  if (!l.cost.from_header.empty())
    o << ", cost from " << l.cost.from_header;
  else if (l.cost.fixed != 1)
    o << ", cost " << l.cost.fixed;
  if (!l.settle_header.empty())
    o << ", settled from response " << (l.settle_from_trailer ? "trailer " : "header ")
      << l.settle_header;
  if (l.count) {
    o << ", counts only responses ";
    for (std::size_t i = 0; i < l.count->written.size(); ++i)
      o << (i ? ", " : "") << l.count->written[i];
  }
  if (l.overrides) o << ", " << l.overrides->values.size() << " tiers by " << l.overrides->by.text;
  if (l.on_exceed == OnExceed::delay)
    o << ", over it held up to " << format_duration(l.max_delay) << " (on_exceed: delay)";
  if (l.mode == LimitMode::shadow) o << " (shadow)";
  if (l.rollout_basis_points < 10000)
    o << " (rollout: enforced for " << format_rollout(l.rollout_basis_points)
      << " of keys, shadow for the rest)";
  if (l.lease) {
    o << "\n        leased: " << l.lease->size << " units per lease, returned after "
      << format_duration(l.lease->ttl);
    if (store.backend == StoreBackend::memory)
      o << " (no effect on the memory backend)";
    else
      o << "; early refusals at most " << l.lease->early_refusal_bound(store.instances, l.algorithm)
        << " units = (" << store.instances << " - 1) x " << l.lease->size
        << " held by the other instances"
        << (LeaseSettings::lingers(l.algorithm)
                ? " + " + std::to_string(store.instances) + " x " + std::to_string(l.lease->size) +
                      " spent or lapsed that the store still counts"
                : std::string())
        << ", never an over-admission";
  }
  return o.str();
}

// "deny 3 (2 CIDRs, 1 value, from deny.txt); allow 1 (1 CIDR)", or "" without lists.
std::string describe(const Lists& lists) {
  std::string out;
  for (auto [name, list] : {std::pair{"deny", &lists.deny}, std::pair{"allow", &lists.allow}}) {
    if (list->empty()) continue;
    const auto cidrs = list->cidrs.size();
    const auto values = list->entries() - cidrs;
    if (!out.empty()) out += "; ";
    out += std::string(name) + " " + std::to_string(list->entries()) + " (";
    out += std::to_string(cidrs) + (cidrs == 1 ? " CIDR, " : " CIDRs, ");
    out += std::to_string(values) + (values == 1 ? " value" : " values");
    if (!list->file.empty()) out += ", from " + list->file;
    out += ")";
  }
  return out;
}

}  // namespace

std::string early_refusal_terms(int instances, const Limit& l) {
  const auto n = std::to_string(std::max(1, instances));
  const auto size = std::to_string(l.lease ? l.lease->size : 0);
  auto out = "(" + n + " - 1) x " + size;
  if (LeaseSettings::lingers(l.algorithm)) out += " + " + n + " x " + size;
  return out;
}

std::string lease_definition(const StoreSettings& store, const Route& route, const Limit& l) {
  std::ostringstream o;
  o << store.key_prefix << ":" << route.name << ":" << l.name << " " << to_string(l.algorithm)
    << " " << l.params.capacity << " " << l.params.refill_rate.per_second << " " << l.params.limit
    << " " << l.params.window.count();
  if (l.overrides)
    for (const auto& [tier, p] : l.overrides->values)
      o << " " << tier << "=" << p.capacity << "/" << p.refill_rate.per_second << "/" << p.limit
        << "/" << p.window.count();
  if (l.lease) o << " lease " << l.lease->size << " " << l.lease->ttl.count();
  return o.str();
}

std::string summarize(const Config& c) {
  std::ostringstream o;
  o << c.source << ": OK\n";
  if (c.feed) {
    o << "  config_source: " << redacted_url(c.feed->url) << " (signature at the url + .sig, "
      << "checked with " << c.feed->public_key << "), polled every "
      << format_duration(c.feed->poll) << "\n  cache: "
      << (c.feed->cache.empty() ? "none: a start with the url down fails" : c.feed->cache) << "\n";
    return o.str();
  }
  if (c.version) o << "  version: " << *c.version << "\n";
  o << "  listen:";
  for (const auto& l : c.server.listen) {
    o << " " << l.address.to_string() << " (" << (l.tls ? "tls: " : "");
    for (std::size_t i = 0; i < l.protocols.size(); ++i)
      o << (i ? " " : "") << to_string(l.protocols[i]);
    o << ")";
  }
  o << "\n  threads: "
    << (c.server.threads == 0 ? "one per core" : std::to_string(c.server.threads))
    << ", pop: " << c.server.pop << ", max_connections: "
    << (c.server.max_connections == 0 ? "no limit" : std::to_string(c.server.max_connections))
    << "\n";
  if (c.admin.listen) {
    o << "  admin: " << c.admin.listen->to_string() << " (/, /top";
    if (c.admin.top.enabled)
      o << ": " << c.admin.top.k << " heaviest callers per limit over "
        << format_duration(c.admin.top.window);
    else
      o << " off";
    o << ")\n";
  }
  o << "  store: " << to_string(c.store.backend);
  if (c.store.backend == StoreBackend::redis && c.store.redis.sentinels.empty())
    o << " at " << c.store.redis.address.to_string();
  if (c.store.backend == StoreBackend::redis && !c.store.redis.sentinels.empty())
    o << ", master " << c.store.redis.master_name << " as " << c.store.redis.sentinels.size()
      << " sentinel(s) name it";
  if (c.store.backend != StoreBackend::memory) {
    o << ", timeout " << format_duration(c.store.redis.timeout);
    if (c.store.redis.tls) o << ", TLS";
  }
  o << "\n  upstreams:";
  for (const auto& up : c.upstreams) {
    o << " " << up.name << "=";
    for (std::size_t i = 0; i < up.servers.size(); ++i) {
      const auto& sv = up.servers[i];
      o << (i ? "," : "") << sv.url;
      if (sv.weight != 1) o << "*" << sv.weight;
    }
    std::vector<std::string> notes;
    if (!up.servers.empty() && up.servers.front().protocol == UpstreamProtocol::h2)
      notes.emplace_back("h2");
    if (up.servers.size() > 1)
      notes.emplace_back(up.balance == Balance::least_requests ? "least_requests" : "round_robin");
    if (up.health_check) notes.push_back("checked: GET " + up.health_check->path);
    for (std::size_t i = 0; i < notes.size(); ++i)
      o << (i ? ", " : " (") << notes[i] << (i + 1 == notes.size() ? ")" : "");
  }
  if (!c.lists.empty()) o << "\n  lists: " << describe(c.lists);
  o << "\n  routes:\n";
  for (const auto& r : c.routes) {
    o << "    " << r.name << ": ";
    if (!r.match.methods.empty()) {
      for (std::size_t i = 0; i < r.match.methods.size(); ++i)
        o << (i ? "|" : "") << r.match.methods[i];
      o << " ";
    }
    if (!r.match.host.empty()) o << r.match.host;
    if (!r.match.path.empty())
      o << r.match.path << " (exact)";
    else
      o << (r.match.path_prefix.empty() ? "/" : r.match.path_prefix) << "*";
    o << " -> " << r.upstream << ", on_store_error " << to_string(r.on_store_error)
      << (r.allow_encoded_slashes ? ", allow_encoded_slashes" : "") << "\n";
    if (!r.lists.empty()) o << "      lists: " << describe(r.lists) << "\n";
    if (!r.path_templates.empty()) {
      o << "      path keyed by template:";
      for (const auto& t : r.path_templates) o << " " << t.text;
      o << "\n";
    }
    if (r.refusal)
      o << "      refusal: " << r.refusal->status << " " << r.refusal->content_type << ", "
        << r.refusal->body_bytes << " bytes of text\n";
    for (const auto& l : r.limits) o << "      " << describe(l, c.store) << "\n";
  }
  return o.str();
}

}  // namespace floodgate::config
