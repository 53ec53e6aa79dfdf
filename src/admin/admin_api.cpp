#include "admin_api.hpp"

#include <openssl/crypto.h>
#include <spdlog/logger.h>

#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>

#include "floodgate/ascii.hpp"
#include "floodgate/config/bounds.hpp"
#include "floodgate/config/units.hpp"
#include "floodgate/keys/caller_key.hpp"

namespace floodgate::admin {

namespace bhttp = boost::beast::http;
namespace json = boost::json;
namespace urls = boost::urls;

namespace {

Response reply(const Request& req, bhttp::status status, const std::string& body) {
  Response res{status, req.version()};
  res.set(bhttp::field::server, "floodgate-admin");
  res.set(bhttp::field::cache_control, "no-store");
  res.set(bhttp::field::content_type, "application/json");
  res.body() = body;
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

Response failure(const Request& req, bhttp::status status, const std::string& message) {
  return reply(req, status, json::serialize(json::object{{"error", message}}) + "\n");
}

// The name of the token the request carries, or nullptr. Compared in constant time: the
// comparison must not tell an attacker how much of a guess was right.
const config::AdminToken* bearer(const Request& req, const config::Config& c) {
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return nullptr;
  std::string_view v = it->value();
  constexpr std::string_view kScheme = "Bearer ";
  if (v.size() <= kScheme.size() || !iequals(v.substr(0, kScheme.size()), kScheme)) return nullptr;
  v.remove_prefix(kScheme.size());
  const config::AdminToken* found = nullptr;
  for (const auto& t : c.admin.tokens)
    if (t.value.size() == v.size() && CRYPTO_memcmp(t.value.data(), v.data(), v.size()) == 0)
      found = &t;
  return found;
}

std::string param(const urls::url_view& u, std::string_view name) {
  for (auto p : u.params())
    if (p.key == name) return std::string(p.value);
  return "";
}

// Raw control bytes (CR, LF, NUL, ESC, DEL, ...) in a name or key are refused: written to the
// log they could forge a line attributed to another token, and no caller needs them raw, as
// /top writes such bytes of a value as \xHH, which the key text reads back.
bool has_control_byte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

constexpr const char* kNoControlBytes =
    "control bytes (CR, LF, NUL, ESC...) are refused in a route, limit or key; write a byte of "
    "a value as /top shows it, \\xHH";

bool has_limit(const config::Config& c, const std::string& name) {
  for (const auto& r : c.routes)
    for (const auto& l : r.limits)
      if (l.name == name) return true;
  return false;
}

// The reason the caller text fits none of the limit's keys, or "" when it fits one.
std::string fits_a_key(const config::Config& c, const std::string& limit,
                       const std::string& caller) {
  keys::KeyHasher scratch("fit check", keys::KeyHasher::Kind::offline);
  std::string why;
  for (const auto& r : c.routes)
    for (const auto& l : r.limits)
      if (l.name == limit) {
        auto k = keys::caller_key(c.store.key_prefix, r, l, caller, scratch);
        if (!k.key.empty()) return "";
        why = k.error;
      }
  return why;
}

Response keys(const Request& req, const urls::url_view& u, AdminApi& api, Metrics& metrics,
              spdlog::logger& log, const std::string& who) {
  if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::delete_) {
    auto res = failure(req, bhttp::status::method_not_allowed, "GET or DELETE");
    res.set(bhttp::field::allow, "GET, DELETE");
    return res;
  }
  if (!api.workers) return failure(req, bhttp::status::service_unavailable, "no workers to ask");
  decide::KeyRequest k{param(u, "route"), param(u, "limit"), param(u, "key"),
                       req.method() == bhttp::verb::delete_};
  if (has_control_byte(k.route) || has_control_byte(k.limit) || has_control_byte(k.caller))
    return failure(req, bhttp::status::bad_request, kNoControlBytes);
  auto a = api.workers->keys(k, std::chrono::seconds(3));
  if (k.reset && a.status < 300) {
    // The other instances sharing the store forget their refusals of it too.
    if (api.keeper)
      if (auto e = api.keeper->reset(a.store_key); !e.empty())
        log.warn(
            "admin: the reset of {} may reach the other instances only when their refusals "
            "of it lapse: {}",
            a.store_key, e);
    metrics.count(Metrics::AdminChange::key_reset);
    log.info("admin: {} reset key {} of {}/{} ({})", who, k.caller, k.route, k.limit, a.store_key);
  }
  return reply(req, static_cast<bhttp::status>(a.status), a.body);
}

Response overrides(const Request& req, const urls::url_view& u, const config::Config& c,
                   AdminApi& api, Metrics& metrics, spdlog::logger& log, const std::string& who) {
  std::vector<std::string> parts;
  for (auto s : u.segments()) parts.push_back(s);
  if (parts.size() == 1) {  // /overrides
    if (req.method() != bhttp::verb::get) {
      auto res = failure(req, bhttp::status::method_not_allowed,
                         "GET; PUT and DELETE take /overrides/LIMIT/KEY");
      res.set(bhttp::field::allow, "GET");
      return res;
    }
    limit::OverrideList in_force;  // lapsed ones may linger until the list is next changed
    if (api.board)
      for (const auto& o : *api.board->get())
        if (!api.clock || o.live(api.clock->now())) in_force.push_back(o);
    return reply(req, bhttp::status::ok, limit::to_json(in_force) + "\n");
  }
  if (parts.size() < 3)
    return failure(req, bhttp::status::not_found, "expected /overrides/LIMIT/KEY");
  if (req.method() != bhttp::verb::put && req.method() != bhttp::verb::delete_) {
    auto res = failure(req, bhttp::status::method_not_allowed, "PUT or DELETE");
    res.set(bhttp::field::allow, "PUT, DELETE");
    return res;
  }
  if (!api.keeper)
    return failure(req, bhttp::status::service_unavailable, "overrides are not kept here");
  const auto& limit_name = parts[1];
  std::string caller = parts[2];
  for (std::size_t i = 3; i < parts.size(); ++i) caller += "/" + parts[i];  // a path value
  if (has_control_byte(limit_name) || has_control_byte(caller))
    return failure(req, bhttp::status::bad_request, kNoControlBytes);
  // (A DELETE is not checked: an override of a limit a reload renamed must still go.)
  if (req.method() == bhttp::verb::put) {
    if (!has_limit(c, limit_name))
      return failure(req, bhttp::status::not_found, "no limit named \"" + limit_name + "\"");
    if (auto why = fits_a_key(c, limit_name, caller); !why.empty())
      return failure(req, bhttp::status::bad_request, "key: " + why);
  }

  if (req.method() == bhttp::verb::delete_) {
    bool found = false;
    if (auto e = api.keeper->remove(limit_name, caller, found); !e.empty())
      return failure(req, bhttp::status::service_unavailable, e);
    if (!found) return failure(req, bhttp::status::not_found, "no override for that caller");
    metrics.count(Metrics::AdminChange::override_removed);
    log.info("admin: {} removed the override of {} for {}", who, limit_name, caller);
    return reply(req, bhttp::status::ok, "{\"removed\":true}\n");
  }

  boost::system::error_code ec;
  auto body = json::parse(req.body(), ec);
  if (ec || !body.is_object())
    return failure(req, bhttp::status::bad_request,
                   "expected a JSON object: {\"limit\": N} or {\"exempt\": true}, and \"ttl\"");
  const auto& b = body.get_object();
  for (const auto& kv : b)
    if (kv.key() != "limit" && kv.key() != "exempt" && kv.key() != "ttl")
      return failure(req, bhttp::status::bad_request,
                     "unknown field \"" + std::string(kv.key()) + "\" (limit, exempt, ttl)");
  limit::CallerOverride o;
  o.limit = limit_name;
  o.caller = caller;
  o.by = who;
  const auto now = api.clock ? api.clock->now() : 0;
  o.at = now;
  if (const auto* e = b.if_contains("exempt")) {
    if (!e->is_bool()) return failure(req, bhttp::status::bad_request, "exempt: true or false");
    o.exempt = e->get_bool();
  }
  if (const auto* n = b.if_contains("limit")) {
    if (!n->is_int64() || n->get_int64() < 1 || n->get_int64() > config::kLargestLimit)
      return failure(req, bhttp::status::bad_request,
                     "limit: a whole number from 1 to " + std::to_string(config::kLargestLimit) +
                         " (2^50, as in the config)");
    o.quota = n->get_int64();
  }
  if (o.exempt == (o.quota > 0))
    return failure(req, bhttp::status::bad_request,
                   "give either {\"limit\": N} or {\"exempt\": true}");
  if (const auto* t = b.if_contains("ttl")) {
    limit::Micros ttl = 0;
    constexpr std::int64_t kLongestSeconds = 10LL * 366 * 86'400;  // ten years
    std::int64_t seconds = 0;
    if (t->is_int64()) {
      seconds = t->get_int64();
    } else if (t->is_string()) {
      auto d = config::parse_duration(std::string_view(t->get_string()));
      if (auto* ok = std::get_if<config::Duration>(&d))
        seconds = std::min<std::int64_t>(ok->count() / 1000, kLongestSeconds + 1);
    }
    if (seconds <= 0 || seconds > kLongestSeconds)
      return failure(req, bhttp::status::bad_request,
                     "ttl: seconds (a number) or a duration such as \"10m\", at most ten years");
    ttl = seconds * limit::kMicrosPerSecond;
    o.until = now + ttl;
  }
  if (auto e = api.keeper->put(o); !e.empty())
    return failure(req, bhttp::status::service_unavailable, e);
  metrics.count(Metrics::AdminChange::override_set);
  log.info("admin: {} set the override of {} for {}: {}{}", who, limit_name, caller,
           o.exempt ? std::string("exempt") : "limit " + std::to_string(o.quota),
           o.until ? " until " + std::to_string(o.until / limit::kMicrosPerSecond) : std::string());
  return reply(req, bhttp::status::ok, limit::to_json(o) + "\n");
}

}  // namespace

std::optional<Response> answer_api(const Request& req, const config::Config& c, AdminApi& api,
                                   Metrics& metrics, spdlog::logger& log) {
  auto parsed = urls::parse_origin_form(req.target());
  if (!parsed) return std::nullopt;
  const auto& u = *parsed;
  auto segments = u.segments();
  if (segments.empty()) return std::nullopt;
  const std::string first = *segments.begin();
  if (first != "keys" && first != "overrides") return std::nullopt;
  if (first == "keys" && segments.size() != 1) return std::nullopt;
  if (c.admin.tokens.empty())
    return failure(req, bhttp::status::forbidden,
                   "the admin API is off: set admin.token (or admin.tokens) to turn it on");
  const auto* token = bearer(req, c);
  if (!token) {
    metrics.admin_unauthorized.fetch_add(1, std::memory_order_relaxed);
    auto res = failure(req, bhttp::status::unauthorized, "a valid bearer token is required");
    res.set(bhttp::field::www_authenticate, "Bearer realm=\"floodgate-admin\"");
    return res;
  }
  if (first == "keys") return keys(req, u, api, metrics, log, token->name);
  return overrides(req, u, c, api, metrics, log, token->name);
}

}  // namespace floodgate::admin
