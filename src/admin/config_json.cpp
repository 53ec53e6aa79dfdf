// The running config as JSON for GET /config, with every secret replaced.
#include <boost/json.hpp>

#include "admin_server.hpp"
#include "floodgate/config/redact.hpp"

namespace floodgate::admin {

namespace json = boost::json;

namespace {

constexpr const char* kRedacted = "[redacted]";

json::value secret(const std::string& s) {
  return s.empty() ? json::value("") : json::value(kRedacted);
}

// A list's size, not its entries: a deny list may hold 100k addresses, and values such as API
// keys are credentials.
// A route's refusal page: status, content type and size (its text may be long); null: built in.
json::value refusal_json(const config::RefusalPage* page) {
  if (!page) return nullptr;
  return json::object{{"status", page->status},
                      {"content_type", page->content_type},
                      {"body_bytes", page->body_bytes}};
}

json::object lists_json(const config::Lists& lists) {
  json::object out;
  for (auto [name, list] : {std::pair{"deny", &lists.deny}, std::pair{"allow", &lists.allow}}) {
    if (list->empty()) continue;
    json::object values;
    for (const auto& v : list->values) values[v.part.text] = v.values.size();
    out[name] = json::object{
        {"cidrs", list->cidrs.size()}, {"values", std::move(values)}, {"file", list->file}};
  }
  return out;
}

json::object limit_json(const config::Limit& l, const config::StoreSettings& store) {
  json::object o;
  o["name"] = l.name;
  o["algorithm"] = config::to_string(l.algorithm);
  o["capacity"] = l.params.capacity;
  o["refill_rate"] = l.params.refill_rate.text;
  o["limit"] = l.params.limit;
  o["window"] = config::format_duration(l.params.window);
  if (l.period) {
    o["period"] = calendar::to_string(l.period->unit);
    o["anchor_day"] = l.period->anchor;
    o["timezone"] = l.period->zone ? l.period->zone->name() : "UTC";
  }
  json::array key;
  for (const auto& k : l.key) key.push_back(json::value(k.text));
  o["key"] = std::move(key);
  o["on_missing_key"] = l.on_missing_key == config::OnMissingKey::reject ? "reject"
                        : l.on_missing_key == config::OnMissingKey::skip ? "skip"
                                                                         : "shared";
  o["mode"] = l.mode == config::LimitMode::shadow ? "shadow" : "enforce";
  o["on_exceed"] = l.on_exceed == config::OnExceed::delay ? "delay" : "reject";
  if (l.on_exceed == config::OnExceed::delay) o["max_delay"] = config::format_duration(l.max_delay);
  json::object cost;
  cost["from"] = l.cost.from_header.empty() ? "" : "header:" + l.cost.from_header;
  cost["default"] = l.cost.fixed;
  cost["max"] = l.cost.max;
  o["cost"] = std::move(cost);
  if (l.lease) {
    json::object lease;
    lease["size"] = l.lease->size;
    lease["ttl"] = config::format_duration(l.lease->ttl);
    // Null on the memory backend, where a lease has no effect.
    if (store.backend == config::StoreBackend::memory)
      lease["early_refusal_bound"] = nullptr;
    else
      lease["early_refusal_bound"] = l.lease->early_refusal_bound(store.instances, l.algorithm);
    o["lease"] = std::move(lease);
  }
  if (!l.settle_header.empty())
    o["settle"] =
        (l.settle_from_trailer ? "response_trailer:" : "response_header:") + l.settle_header;
  o["rollout"] = config::format_rollout(l.rollout_basis_points);
  if (l.count) {
    json::array statuses;
    for (const auto& w : l.count->written) statuses.emplace_back(w);
    o["count"] = json::object{{"status", std::move(statuses)}};
  }
  if (l.overrides) {
    json::object tiers;
    for (const auto& [name, p] : l.overrides->values) {
      json::object t;
      t["capacity"] = p.capacity;
      t["refill_rate"] = p.refill_rate.text;
      t["limit"] = p.limit;
      t["window"] = config::format_duration(p.window);
      tiers[name] = std::move(t);
    }
    o["overrides"] = json::object{{"by", l.overrides->by.text}, {"values", std::move(tiers)}};
  }
  return o;
}

}  // namespace

std::string redacted_config_json(const config::Config& c) {
  json::object root;
  root["source"] = c.source;
  if (c.version) root["version"] = *c.version;
  root["sha256"] = c.sha256;
  json::array listen;
  for (const auto& l : c.server.listen) {
    json::array protocols;
    for (auto p : l.protocols) protocols.emplace_back(config::to_string(p));
    listen.push_back(json::object{{"address", l.address.to_string()},
                                  {"tls", l.tls.has_value()},
                                  {"protocols", std::move(protocols)}});
  }
  json::array trusted;
  for (const auto& t : c.server.client_ip.trusted_proxies) trusted.emplace_back(t.to_string());
  const auto& to = c.server.timeouts;
  root["server"] = json::object{
      {"listen", std::move(listen)},
      {"threads", c.server.threads},
      {"pop", c.server.pop},
      {"client_ip", json::object{{"header", c.server.client_ip.header},
                                 {"trusted_proxies", std::move(trusted)},
                                 {"ipv6_prefix", c.server.client_ip.ipv6_prefix}}},
      {"timeouts", json::object{{"header_read", config::format_duration(to.header_read)},
                                {"idle", config::format_duration(to.idle)},
                                {"drain", config::format_duration(to.drain)}}},
      {"max_header_bytes", c.server.max_header_bytes},
      {"max_body_bytes", c.server.max_body_bytes},
      {"max_connections", c.server.max_connections}};
  if (c.admin.listen) {
    json::object admin{{"listen", c.admin.listen->to_string()}};
    admin["top"] =
        c.admin.top.enabled
            ? json::value(json::object{{"k", c.admin.top.k},
                                       {"window", config::format_duration(c.admin.top.window)}})
            : json::value("off");
    json::array tokens;  // names only: who may change things, never the tokens themselves
    for (const auto& t : c.admin.tokens) tokens.emplace_back(t.name);
    admin["api_tokens"] = std::move(tokens);
    root["admin"] = std::move(admin);
  }
  json::array upstreams;
  for (const auto& up : c.upstreams) {
    const auto& first = up.servers.front();  // the shared settings are every server's
    json::array servers;
    for (const auto& sv : up.servers)
      servers.push_back(json::object{{"url", sv.url}, {"weight", sv.weight}});
    json::object u{{"name", up.name},
                   {"servers", std::move(servers)},
                   {"balance", up.balance == config::Balance::least_requests ? "least_requests"
                                                                             : "round_robin"},
                   {"protocol", first.protocol == config::UpstreamProtocol::h2 ? "h2" : "http1"},
                   {"connect_timeout", config::format_duration(first.connect_timeout)},
                   {"response_timeout", config::format_duration(first.response_timeout)},
                   {"max_idle_connections", first.max_idle_connections}};
    if (up.health_check)
      u["health_check"] =
          json::object{{"path", up.health_check->path},
                       {"interval", config::format_duration(up.health_check->interval)},
                       {"timeout", config::format_duration(up.health_check->timeout)},
                       {"healthy", up.health_check->healthy},
                       {"unhealthy", up.health_check->unhealthy}};
    u["ejection"] = up.ejection.consecutive_failures > 0
                        ? json::value(json::object{
                              {"consecutive_failures", up.ejection.consecutive_failures},
                              {"cool_down", config::format_duration(up.ejection.cool_down)}})
                        : json::value("off");
    upstreams.push_back(std::move(u));
  }
  root["upstreams"] = std::move(upstreams);
  json::object store{{"backend", config::to_string(c.store.backend)},
                     {"key_prefix", c.store.key_prefix},
                     {"key_secret", secret(c.store.key_secret)},
                     {"instances", c.store.instances}};
  if (c.store.backend == config::StoreBackend::memory) {
    store["max_keys"] = c.store.max_keys;
  } else {  // (the memory backend has no server to show)
    if (c.store.backend == config::StoreBackend::redis_cluster) {
      json::array nodes;
      for (const auto& n : c.store.redis.nodes) nodes.emplace_back(n.to_string());
      store["nodes"] = std::move(nodes);
    } else if (!c.store.redis.sentinels.empty()) {
      json::array sentinels;
      for (const auto& n : c.store.redis.sentinels) sentinels.emplace_back(n.to_string());
      store["sentinels"] = std::move(sentinels);
      store["master_name"] = c.store.redis.master_name;
      store["sentinel_username"] = c.store.redis.sentinel_username;
      store["sentinel_password"] = secret(c.store.redis.sentinel_password);
    } else {
      store["address"] = c.store.redis.address.to_string();
    }
    store["username"] = c.store.redis.username;
    store["password"] = secret(c.store.redis.password);
    store["timeout"] = config::format_duration(c.store.redis.timeout);
    if (const auto& t = c.store.redis.tls) {
      store["tls"] = json::object{{"ca_file", t->ca_file},
                                  {"cert", t->cert},
                                  {"key", t->key},
                                  {"server_name", t->server_name}};
    }
  }
  root["store"] = std::move(store);
  if (c.jwt) {
    json::array algorithms;
    for (auto a : c.jwt->algorithms)
      algorithms.emplace_back(a == config::JwtAlgorithm::hs256   ? "HS256"
                              : a == config::JwtAlgorithm::rs256 ? "RS256"
                              : a == config::JwtAlgorithm::es256 ? "ES256"
                                                                 : "EdDSA");
    json::array keys;
    for (const auto& k : c.jwt->public_keys) keys.emplace_back(k);  // file paths, not keys
    root["jwt"] = json::object{{"header", c.jwt->header},
                               {"algorithms", std::move(algorithms)},
                               {"hs256_secret", secret(c.jwt->hs256_secret)},
                               {"public_keys", std::move(keys)},
                               {"issuer", c.jwt->issuer},
                               {"audience", c.jwt->audience},
                               {"leeway", config::format_duration(c.jwt->leeway)}};
    if (c.jwt->jwks)
      root["jwt"].as_object()["jwks"] =
          json::object{{"url", config::redacted_url(c.jwt->jwks->url)},
                       {"refresh", config::format_duration(c.jwt->jwks->refresh)},
                       {"ca_file", c.jwt->jwks->ca_file}};
  }
  json::array routes;
  for (const auto& r : c.routes) {
    json::array limits;
    for (const auto& l : r.limits) limits.push_back(limit_json(l, c.store));
    json::array methods;
    for (const auto& m : r.match.methods) methods.push_back(json::value(m));
    json::array templates;
    for (const auto& t : r.path_templates) templates.push_back(json::value(t.text));
    routes.push_back(json::object{{"name", r.name},
                                  {"match", json::object{{"path_prefix", r.match.path_prefix},
                                                         {"path", r.match.path},
                                                         {"methods", std::move(methods)},
                                                         {"host", r.match.host}}},
                                  {"upstream", r.upstream},
                                  {"on_store_error", config::to_string(r.on_store_error)},
                                  {"allow_encoded_slashes", r.allow_encoded_slashes},
                                  {"lists", lists_json(r.lists)},
                                  {"refusal", refusal_json(r.refusal.get())},
                                  {"path_template", std::move(templates)},
                                  {"limits", std::move(limits)}});
  }
  root["lists"] = lists_json(c.lists);
  root["routes"] = std::move(routes);
  return json::serialize(root) + "\n";
}

}  // namespace floodgate::admin
