#include "floodgate/limit/caller_overrides.hpp"

#include <boost/json.hpp>

#include "floodgate/config/bounds.hpp"
#include "floodgate/keys/caller_key.hpp"

namespace floodgate::limit {

namespace json = boost::json;

json::object to_json_object(const CallerOverride& o) {
  json::object j{{"limit", o.limit}, {"key", o.caller}};
  if (o.exempt)
    j["exempt"] = true;
  else
    j["quota"] = o.quota;
  if (o.until != 0) j["until_ms"] = o.until / 1000;
  if (!o.by.empty()) j["by"] = o.by;
  if (o.at != 0) j["at_ms"] = o.at / 1000;
  return j;
}

namespace {

std::optional<CallerOverride> from_object(const json::value& v, std::string& why) {
  const auto* j = v.if_object();
  if (!j) {
    why = "an override must be a JSON object";
    return std::nullopt;
  }
  CallerOverride o;
  auto text = [&](const char* name, std::string& out) {
    const auto* f = j->if_contains(name);
    if (!f) return true;
    if (!f->is_string()) return why = std::string("\"") + name + "\" must be a string", false;
    out = std::string(f->get_string());
    return true;
  };
  auto number = [&](const char* name, std::int64_t& out) {
    const auto* f = j->if_contains(name);
    if (!f) return true;
    if (!f->is_int64() || f->get_int64() < 0)
      return why = std::string("\"") + name + "\" must be a whole number >= 0", false;
    out = f->get_int64();
    return true;
  };
  std::int64_t until_ms = 0, at_ms = 0;
  if (!text("limit", o.limit) || !text("key", o.caller) || !text("by", o.by) ||
      !number("quota", o.quota) || !number("until_ms", until_ms) || !number("at_ms", at_ms))
    return std::nullopt;
  if (const auto* e = j->if_contains("exempt")) {
    if (!e->is_bool()) {
      why = "\"exempt\" must be true or false";
      return std::nullopt;
    }
    o.exempt = e->get_bool();
  }
  if (o.limit.empty() || o.caller.empty()) {
    why = "an override needs \"limit\" and \"key\"";
    return std::nullopt;
  }
  if (o.exempt == (o.quota > 0)) {
    why = "an override is either {\"exempt\": true} or {\"limit\": N} with N >= 1";
    return std::nullopt;
  }
  // As the admin API and the config bound it: one written by an older version, or a file
  // given to replay, must not overflow the buckets' arithmetic either.
  if (o.quota > config::kLargestLimit) {
    why = "\"quota\" must be at most " + std::to_string(config::kLargestLimit);
    return std::nullopt;
  }
  constexpr std::int64_t kLatestMs = 32'503'680'000'000;  // year 3000: no overflow in micros
  if (until_ms > kLatestMs || at_ms > kLatestMs) {
    why = "\"until_ms\" and \"at_ms\" are Unix milliseconds before the year 3000";
    return std::nullopt;
  }
  o.until = until_ms * 1000;
  o.at = at_ms * 1000;
  return o;
}

std::optional<json::value> parsed(std::string_view text, std::string& why) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec) {
    why = "not JSON: " + ec.message();
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::string to_json(const CallerOverride& o) {
  return json::serialize(to_json_object(o));
}

std::string to_json(const OverrideList& list) {
  json::array a;
  for (const auto& o : list) a.push_back(to_json_object(o));
  return json::serialize(json::object{{"overrides", std::move(a)}});
}

std::optional<CallerOverride> override_from_json(std::string_view text, std::string& why) {
  auto v = parsed(text, why);
  if (!v) return std::nullopt;
  return from_object(*v, why);
}

std::optional<OverrideList> overrides_from_json(std::string_view text, std::string& why) {
  auto v = parsed(text, why);
  if (!v) return std::nullopt;
  const auto* j = v->if_object();
  const auto* a = j ? j->if_contains("overrides") : nullptr;
  if (!a || !a->is_array()) {
    why = "expected {\"overrides\": [...]}, as GET /overrides answers";
    return std::nullopt;
  }
  OverrideList out;
  for (const auto& e : a->get_array()) {
    auto o = from_object(e, why);
    if (!o) {
      why = "overrides[" + std::to_string(out.size()) + "]: " + why;
      return std::nullopt;
    }
    out.push_back(std::move(*o));
  }
  return out;
}

Params with_quota(Params p, std::int64_t quota) {
  if (p.capacity > 0) p.per_second *= static_cast<double>(quota) / static_cast<double>(p.capacity);
  p.capacity = quota;
  return p;
}

void OverrideIndex::build(const config::Config& c, const OverrideList& list,
                          keys::KeyHasher& hasher) {
  by_key_.clear();
  for (const auto& o : list)
    for (const auto& route : c.routes)
      for (const auto& limit : route.limits) {
        if (limit.name != o.limit) continue;
        auto k = keys::caller_key(c.store.key_prefix, route, limit, o.caller, hasher);
        if (!k.key.empty()) by_key_[k.key] = &o;  // else: names parts this key does not have
      }
}

const CallerOverride* OverrideIndex::find(const std::string& key, Micros now) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end() || !it->second->live(now)) return nullptr;
  return it->second;
}

void OverrideIndex::apply(Plan& plan, Micros now) const {
  if (by_key_.empty()) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto* o = find(plan.items[i].key, now);
    if (o && o->exempt) continue;
    if (o) {
      plan.items[i].params = with_quota(plan.items[i].params, o->quota);
      plan.items[i].leased = {};
      // A cost the caller's quota can never hold would be refused for ever.
      plan.items[i].cost = std::min(plan.items[i].cost, o->quota);
    }
    if (kept != i) {
      plan.items[kept] = std::move(plan.items[i]);
      plan.limits[kept] = plan.limits[i];
    }
    ++kept;
  }
  plan.items.resize(kept);
  plan.limits.resize(kept);
}

namespace {

// `list` without the override of `limit` for `caller`; whether there was one.
bool drop(OverrideList& list, const std::string& limit, const std::string& caller) {
  return std::erase_if(list, [&](const CallerOverride& o) {
           return o.limit == limit && o.caller == caller;
         }) > 0;
}

}  // namespace

std::string BoardKeeper::put(const CallerOverride& o) {
  std::lock_guard lock(mutex_);
  auto list = *board_.get();
  drop(list, o.limit, o.caller);
  std::erase_if(list, [&](const CallerOverride& x) { return !x.live(o.at); });
  list.push_back(o);
  board_.publish(std::move(list));
  return "";
}

std::string BoardKeeper::remove(const std::string& limit, const std::string& caller, bool& found) {
  std::lock_guard lock(mutex_);
  auto list = *board_.get();
  found = drop(list, limit, caller);
  if (found) board_.publish(std::move(list));
  return "";
}

}  // namespace floodgate::limit
