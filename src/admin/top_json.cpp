// GET /top: each limit's heaviest callers of the last window, every worker's summaries merged.
#include <boost/json.hpp>

#include <algorithm>
#include <charconv>

#include "floodgate/keys/key_builder.hpp"
#include "live_view.hpp"

namespace floodgate::admin {

namespace json = boost::json;

namespace {

// The value of `name` in a query string (keys::query_param), %XX decoded; "" when absent.
std::string query_value(std::string_view query, std::string_view name) {
  const auto raw = keys::query_param(query, name).value_or("");
  std::string out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    unsigned value = 0;
    if (raw[i] == '%' && i + 2 < raw.size() &&
        std::from_chars(raw.data() + i + 1, raw.data() + i + 3, value, 16).ptr ==
            raw.data() + i + 3) {
      out += static_cast<char>(value);
      i += 2;
    } else {
      out += raw[i] == '+' ? ' ' : raw[i];
    }
  }
  return out;
}

JsonAnswer error(int status, const std::string& message) {
  return {status, json::serialize(json::object{{"error", message}}) + "\n"};
}

}  // namespace

JsonAnswer top_json(const std::vector<limit::LimitTop>& parts, std::string_view query) {
  const auto only = query_value(query, "limit");
  const auto k_text = query_value(query, "k");
  std::size_t k_asked = 0;
  if (!k_text.empty()) {
    auto [end, ec] = std::from_chars(k_text.data(), k_text.data() + k_text.size(), k_asked);
    if (ec != std::errc() || end != k_text.data() + k_text.size() || k_asked == 0)
      return error(400, "k must be a whole number of at least 1, not \"" + k_text + "\"");
  }
  // Each limit once, in the order the first worker listed them (config order).
  std::vector<std::pair<const limit::LimitTop*, std::vector<const limit::HeavyHitters*>>> limits;
  for (const auto& p : parts) {
    if (!only.empty() && only != p.limit && only != p.route + "/" + p.limit) continue;
    auto same = [&](const auto& l) {
      return l.first->route == p.route && l.first->limit == p.limit && l.first->key == p.key;
    };
    auto it = std::find_if(limits.begin(), limits.end(), same);
    if (it == limits.end()) it = limits.insert(limits.end(), {&p, {}});
    for (const auto& h : p.slices) it->second.push_back(&h);
  }
  if (!only.empty() && limits.empty()) {
    std::string names;
    for (const auto& p : parts)
      if (names.find(p.route + "/" + p.limit) == std::string::npos)
        names += (names.empty() ? "" : ", ") + p.route + "/" + p.limit;
    return error(404, "no limit \"" + only + "\" keeps top offenders" +
                          (names.empty() ? std::string() : " (limits: " + names + ")"));
  }
  json::array out;
  for (const auto& [names, slices] : limits) {
    const std::size_t k = k_asked == 0 ? names->k : std::min(k_asked, names->k);
    auto merged = limit::merge(slices, k);
    json::array top;
    for (const auto& e : merged.entries)
      top.push_back(json::object{{"caller", e.caller},
                                 {"requests", e.count},
                                 {"refused", e.refused},
                                 {"shadow_refused", e.shadow_refused},
                                 {"error", e.error}});
    out.push_back(json::object{{"route", names->route},
                               {"limit", names->limit},
                               {"key", names->key},
                               {"window_seconds", names->window / limit::kMicrosPerSecond},
                               {"requests", merged.total},
                               {"unlisted_at_most", merged.floor},
                               {"top", std::move(top)}});
  }
  return {200, json::serialize(json::object{{"limits", std::move(out)}}) + "\n"};
}

}  // namespace floodgate::admin
