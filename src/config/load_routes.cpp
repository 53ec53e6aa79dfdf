// routes and their limits.
#include <algorithm>
#include <charconv>
#include <set>

#include "floodgate/config/bounds.hpp"
#include "floodgate/uri/path_normalize.hpp"
#include "sections.hpp"

namespace floodgate::config {

std::optional<KeyPart> parse_key_part(std::string_view text) {
  static const std::pair<std::string_view, KeyPart::Kind> plain[] = {
      {"ip", KeyPart::Kind::ip},
      {"route", KeyPart::Kind::route},
      {"method", KeyPart::Kind::method},
      {"host", KeyPart::Kind::host},
      {"path", KeyPart::Kind::path}};
  static const std::pair<std::string_view, KeyPart::Kind> named[] = {
      {"header", KeyPart::Kind::header},
      {"query", KeyPart::Kind::query},
      {"jwt", KeyPart::Kind::jwt},
      {"cookie", KeyPart::Kind::cookie},
      {"tls", KeyPart::Kind::tls}};
  for (auto [word, kind] : plain)
    if (text == word) return KeyPart{kind, "", std::string(text)};
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto prefix = text.substr(0, colon);
  for (auto [word, kind] : named) {
    if (prefix != word) continue;
    KeyPart k{kind, std::string(text.substr(colon + 1)), std::string(text)};
    if (k.name.empty()) return std::nullopt;
    if (kind == KeyPart::Kind::tls && k.name != "ja4" && k.name != "ja3") return std::nullopt;
    if (kind == KeyPart::Kind::header)
      for (auto& ch : k.name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return k;
  }
  return std::nullopt;
}

std::string unknown_key_part(std::string_view text) {
  return "unknown key part \"" + std::string(text) +
         "\" (expected ip, route, method, host, path, header:NAME, query:NAME, jwt:CLAIM, "
         "cookie:NAME, tls:ja4 or tls:ja3)" +
         YamlReader::hint(text, {"ip", "route", "method", "host", "path"});
}

std::optional<KeyPart> read_key_part(YamlReader& r, const YAML::Node& n, const std::string& path) {
  auto text = r.string(n, path);
  if (!text) return std::nullopt;
  auto k = parse_key_part(*text);
  if (!k) r.error(n, path, unknown_key_part(*text));
  return k;
}

namespace {

// Reads the algorithm's parameters from `s` into `p`. `partial` (an override tier) allows any
// subset; otherwise every parameter the algorithm needs is required.
void read_params(const Section& s, Algorithm a, LimitParams& p, bool partial) {
  auto& r = s.reader();
  auto forbid = [&](const char* key) {
    if (s.has(key)) r.error(s[key], s.at(key), std::string("does not apply to ") + to_string(a));
  };
  auto need = [&](const char* key) { return partial ? s.has(key) : s.require(key); };
  if (is_bucket(a)) {
    if (need("capacity")) s.integer("capacity", p.capacity, 1, kLargestLimit);
    if (need("refill_rate") && s.has("refill_rate"))
      if (auto v = r.rate(s["refill_rate"], s.at("refill_rate"))) p.refill_rate = *v;
    forbid("limit");
    forbid("window");
  } else {
    if (need("limit")) s.integer("limit", p.limit, 1, kLargestLimit);
    if (a == Algorithm::concurrency || a == Algorithm::quota) {
      forbid("window");  // a quota's window is its calendar period
    } else if (need("window")) {
      s.duration("window", p.window);
    }
    forbid("capacity");
    forbid("refill_rate");
  }
}

void read_cost(const Section& s, Limit& l) {
  auto& r = s.reader();
  const auto& n = s["cost"];
  std::string path = s.at("cost");
  if (l.algorithm == Algorithm::concurrency) {
    r.error(n, path, "does not apply to concurrency (each request holds one lease)");
    return;
  }
  if (n.IsScalar()) {
    if (auto v = r.integer(n, path, 0, std::int64_t(1) << 50)) l.cost.fixed = *v;
    return;
  }
  Section c(r, n, path);
  if (!r.map(n, path, {"from", "default", "max"})) return;
  if (c.require("from")) {
    if (auto from = r.string(c["from"], c.at("from"))) {
      if (from->rfind("header:", 0) == 0 && from->size() > 7) {
        l.cost.from_header = from->substr(7);
      } else {
        r.error(c["from"], c.at("from"), "expected header:NAME, got \"" + *from + "\"");
      }
    }
  }
  c.integer("default", l.cost.fixed, 0, std::int64_t(1) << 50);
  c.integer("max", l.cost.max, 1, std::int64_t(1) << 50);
}

void check_cost_fits(const Section& s, Limit& l) {
  auto& r = s.reader();
  std::int64_t smallest = ceiling(l.algorithm, l.params);
  std::string smallest_name = "this limit";
  if (l.overrides) {
    for (const auto& [tier, p] : l.overrides->values) {
      if (ceiling(l.algorithm, p) < smallest)
        smallest = ceiling(l.algorithm, p), smallest_name = "tier \"" + tier + "\"";
    }
  }
  if (l.algorithm == Algorithm::concurrency || smallest <= 0) return;
  const char* what = is_bucket(l.algorithm) ? "capacity" : "limit";
  if (l.cost.max == 0) l.cost.max = smallest;
  if (l.cost.max > smallest)
    r.error(s["cost"], s.at("cost"),
            "max " + std::to_string(l.cost.max) + " exceeds the " + what + " of " + smallest_name +
                " (" + std::to_string(smallest) + ")");
  if (l.cost.fixed > smallest)
    r.error(s["cost"], s.at("cost"),
            "cost " + std::to_string(l.cost.fixed) + " exceeds the " + what + " of " +
                smallest_name + " (" + std::to_string(smallest) + ")");
}

}  // namespace

std::optional<Limit> read_limit(YamlReader& r, const YAML::Node& n, const std::string& path,
                                LimitUse use) {
  Section s(r, n, path);
  const bool rls = use == LimitUse::rls;
  // An RLS descriptor's limit is keyed by the descriptor and charged its hits_addend, and
  // nothing follows its decision (no response to settle or count by, no request to hold).
  if (rls ? !r.map(n, path,
                   {"name", "algorithm", "capacity", "refill_rate", "limit", "window", "mode",
                    "rollout", "lease", "period", "timezone", "anchor_day"})
          : !r.map(n, path, {"name",   "algorithm", "capacity",       "refill_rate", "limit",
                             "window", "key",       "on_missing_key", "overrides",   "cost",
                             "settle", "count",     "mode",           "rollout",     "lease",
                             "period", "timezone",  "anchor_day",     "on_exceed",   "max_delay"}))
    return std::nullopt;
  Limit l;
  if (s.require("name")) {
    s.string("name", l.name);
    if (!valid_name(l.name))
      r.error(s["name"], s.at("name"),
              "must be letters, digits, '-', '_' or '.' (it goes into headers)");
  }
  if (!s.require("algorithm")) return std::nullopt;
  auto algo = r.choice<Algorithm>(s["algorithm"], s.at("algorithm"),
                                  {{"token_bucket", Algorithm::token_bucket},
                                   {"gcra", Algorithm::gcra},
                                   {"sliding_window", Algorithm::sliding_window},
                                   {"sliding_log", Algorithm::sliding_log},
                                   {"fixed_window", Algorithm::fixed_window},
                                   {"concurrency", Algorithm::concurrency},
                                   {"quota", Algorithm::quota}});
  if (!algo) return std::nullopt;
  l.algorithm = *algo;
  if (rls && l.algorithm == Algorithm::concurrency)
    r.error(s["algorithm"], s.at("algorithm"),
            "concurrency counts requests until their response ends, and Envoy never tells the "
            "rate limit service when that is; use a rate algorithm");
  read_params(s, l.algorithm, l.params, false);
  l.period = read_period(s, l.algorithm);
  if (rls) {
    s.choice<LimitMode>("mode", l.mode,
                        {{"enforce", LimitMode::enforce}, {"shadow", LimitMode::shadow}});
    if (s.has("rollout")) read_rollout(s, l);
    if (s.has("lease")) read_lease(s, l);
    return l;
  }
  if (s.require("key")) {
    auto parts = r.sequence(s["key"], s.at("key"));
    for (const auto& p : parts)
      if (auto k = read_key_part(r, p, s.at("key"))) l.key.push_back(*k);
    if (parts.empty() && s["key"].IsSequence())
      r.error(s["key"], s.at("key"),
              "needs at least one part (use [route] for one bucket per route)");
  }
  s.choice<OnMissingKey>("on_missing_key", l.on_missing_key,
                         {{"reject", OnMissingKey::reject},
                          {"skip", OnMissingKey::skip},
                          {"shared", OnMissingKey::shared}});
  s.choice<LimitMode>("mode", l.mode,
                      {{"enforce", LimitMode::enforce}, {"shadow", LimitMode::shadow}});
  if (s.has("overrides")) {
    Section o(r, s["overrides"], s.at("overrides"));
    if (r.map(o.node(), o.path(), {"by", "values"}) && o.require("by") && o.require("values")) {
      Overrides ov;
      if (auto by = read_key_part(r, o["by"], o.at("by"))) {
        if (by->kind != KeyPart::Kind::jwt)
          r.error(o["by"], o.at("by"), "tiers are chosen by a verified claim: expected jwt:CLAIM");
        ov.by = *by;
      }
      if (o["values"].IsMap()) {
        for (auto it = o["values"].begin(); it != o["values"].end(); ++it) {
          std::string tier = it->first.Scalar();
          Section t(r, it->second, o.at("values") + "." + tier);
          if (!r.map(t.node(), t.path(), {"capacity", "refill_rate", "limit", "window"})) continue;
          LimitParams p = l.params;
          read_params(t, l.algorithm, p, true);
          ov.values[tier] = p;
        }
      } else {
        r.error(o["values"], o.at("values"), "expected a map of tier names to parameters");
      }
      l.overrides = std::move(ov);
    }
  }
  if (s.has("cost")) read_cost(s, l);
  check_cost_fits(s, l);
  if (s.has("settle")) {
    auto settle = r.string(s["settle"], s.at("settle"));
    if (!settles(l.algorithm)) {
      r.error(s["settle"], s.at("settle"),
              std::string(
                  "settle applies to token_bucket, gcra, sliding_window, fixed_window and quota, "
                  "not ") +
                  to_string(l.algorithm));
    } else if (settle && settle->rfind("response_header:", 0) == 0 && settle->size() > 16) {
      l.settle_header = settle->substr(16);
    } else if (settle && settle->rfind("response_trailer:", 0) == 0 && settle->size() > 17) {
      // Read where a streamed answer (gRPC, a chunked body) reports its true cost: last.
      l.settle_header = settle->substr(17);
      l.settle_from_trailer = true;
    } else if (settle) {
      r.error(s["settle"], s.at("settle"),
              "expected response_header:NAME or response_trailer:NAME, got \"" + *settle + "\"");
    }
  }
  if (s.has("rollout")) read_rollout(s, l);
  if (s.has("count")) {
    if (s.has("settle"))
      r.error(s["count"], s.at("count"),
              "count and settle cannot be combined: a counted response is charged what the "
              "request took");
    else
      read_count(s, l);
  }
  if (s.has("lease")) read_lease(s, l);
  read_on_exceed(s, l);
  return l;
}

namespace {

std::optional<Route> route(YamlReader& r, const YAML::Node& n, const std::string& path) {
  Section s(r, n, path);
  if (!r.map(n, path,
             {"name", "match", "upstream", "on_store_error", "allow_encoded_slashes", "lists",
              "limits", "refusal", "path_template"}))
    return std::nullopt;
  Route rt;
  if (s.require("name")) {
    s.string("name", rt.name);
    if (!valid_name(rt.name))
      r.error(s["name"], s.at("name"), "must be letters, digits, '-', '_' or '.'");
  }
  if (s.require("upstream")) s.string("upstream", rt.upstream);
  s.choice<OnStoreError>("on_store_error", rt.on_store_error,
                         {{"fail_open", OnStoreError::fail_open},
                          {"fail_closed", OnStoreError::fail_closed},
                          {"local", OnStoreError::local}});
  s.boolean("allow_encoded_slashes", rt.allow_encoded_slashes);
  if (s.has("lists")) read_lists(Section(r, s["lists"], s.at("lists")), rt.lists);
  if (s.has("refusal")) rt.refusal = read_refusal(Section(r, s["refusal"], s.at("refusal")));
  if (s.has("path_template")) read_path_templates(s, rt.path_templates);
  if (s.require("match")) {
    Section m(r, s["match"], s.at("match"));
    if (r.map(m.node(), m.path(), {"path_prefix", "path", "methods", "host"})) {
      // Checked after ${VAR} expansion, and only when the expansion succeeded.
      auto read_path = [&](const char* key, std::string& out) {
        if (!m.has(key)) return;
        auto v = r.string(m[key], m.at(key));
        if (!v) return;
        if (v->empty() || v->front() != '/') {
          r.error(m[key], m.at(key), "must start with \"/\"");
          return;
        }
        // Requests are matched by their normalized path, so a path written otherwise
        // ("/api//x", "/api/./x", "%7e") would silently never match.
        auto normal = uri::normalize_path(*v, {.allow_encoded_separators = true});
        if (!normal)
          r.error(m[key], m.at(key), "has a '%' that is not followed by two hex digits");
        else if (normal.path != *v)
          r.error(m[key], m.at(key),
                  "is matched against normalized request paths, so it never matches as "
                  "written; write \"" +
                      normal.path + "\"");
        else
          out = *v;
      };
      read_path("path_prefix", rt.match.path_prefix);
      read_path("path", rt.match.path);
      m.string("host", rt.match.host);
      // As requests' hosts are compared: lower case, "shop.example." as "shop.example".
      if (rt.match.host.size() > 1 && rt.match.host.back() == '.') rt.match.host.pop_back();
      for (auto& ch : rt.match.host)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (m.has("path_prefix") && m.has("path"))
        r.error(m.node(), m.path(), "set either path_prefix or path, not both");
      if (m.has("methods")) {
        for (const auto& e : r.sequence(m["methods"], m.at("methods"))) {
          auto method = r.string(e, m.at("methods"));
          if (!method) continue;
          for (auto& ch : *method)
            ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
          bool token = !method->empty() && std::all_of(method->begin(), method->end(), [](char ch) {
            return std::isalpha(static_cast<unsigned char>(ch)) != 0;
          });
          if (!token)
            r.error(e, m.at("methods"), "\"" + *method + "\" is not an HTTP method");
          else
            rt.match.methods.push_back(*method);
        }
      }
    }
  }
  if (s.has("limits")) {
    auto items = r.sequence(s["limits"], s.at("limits"));
    std::set<std::string> names;
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto l =
          read_limit(r, items[i], s.at("limits") + "[" + std::to_string(i) + "]", LimitUse::route);
      if (!l) {
        // An error was reported, so this config is never used; the placeholder keeps
        // rt.limits[j] and the YAML's limits[j] aligned for cross_check().
        rt.limits.emplace_back();
        continue;
      }
      if (!names.insert(l->name).second)
        r.error(items[i], s.at("limits"),
                "limit name \"" + l->name + "\" is used twice in this route");
      rt.limits.push_back(std::move(*l));
    }
  }
  return rt;
}

}  // namespace

void read_routes(YamlReader& r, const YAML::Node& n, std::vector<Route>& out) {
  auto items = r.sequence(n, "routes");
  std::set<std::string> names;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto rt = route(r, items[i], "routes[" + std::to_string(i) + "]");
    if (!rt) {
      // As above: keeps out[i] and the YAML's routes[i] aligned for cross_check().
      out.emplace_back();
      continue;
    }
    if (!rt->name.empty() && !names.insert(rt->name).second)
      r.error(items[i]["name"], "routes[" + std::to_string(i) + "].name",
              "route name \"" + rt->name + "\" is used twice");
    out.push_back(std::move(*rt));
  }
  if (items.empty() && n.IsSequence()) r.error(n, "routes", "at least one route is required");
}

}  // namespace floodgate::config
