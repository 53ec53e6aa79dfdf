#include "floodgate/keys/caller_key.hpp"

#include <map>

#include "floodgate/ascii.hpp"

namespace floodgate::keys {

namespace {

using Kind = config::KeyPart::Kind;

// \xHH back to its byte; anything else as it is.
std::string unescaped(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x' && hex_value(s[i + 2]) >= 0 &&
        hex_value(s[i + 3]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 2]) * 16 + hex_value(s[i + 3]));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The parts' values as the text gives them, by part text ("ip", "jwt:tenant").
class GivenValues final : public HeaderSource, public ClaimSource {
 public:
  std::map<std::string, std::string, std::less<>> values;
  std::optional<std::string_view> header(std::string_view name) const override {
    auto it = values.find("header:" + std::string(name));
    if (it == values.end()) return std::nullopt;
    return std::string_view(it->second);
  }
  std::optional<std::string> claim(std::string_view name) const override {
    auto it = values.find("jwt:" + std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string_view> cookie(std::string_view name) const override {
    auto it = values.find("cookie:" + std::string(name));
    if (it == values.end()) return std::nullopt;
    return std::string_view(it->second);
  }
  const std::string* find(const std::string& part) const {
    auto it = values.find(part);
    return it == values.end() ? nullptr : &it->second;
  }
};

constexpr std::string_view kShared = "(missing: shared)";

// How GivenValues files a part's value: headers by their lower-case name, as looked up.
std::string id_of(const config::KeyPart& part) {
  if (part.kind == Kind::header) return "header:" + part.name;
  if (part.kind == Kind::jwt) return "jwt:" + part.name;
  return part.text;
}

}  // namespace

CallerKey caller_key(std::string_view prefix, const config::Route& route,
                     const config::Limit& limit, std::string_view caller, KeyHasher& hasher) {
  // The parts the text names, in the limit's order; each value runs to the next " PART=".
  std::vector<const config::KeyPart*> named;
  for (const auto& part : limit.key)
    if (part.kind != Kind::route && part.kind != Kind::method) named.push_back(&part);
  for (const auto& part : limit.key)
    if (part.kind == Kind::method) named.push_back(&part);  // given last, if at all
  GivenValues given;
  bool shared = false;
  if (caller != "(everyone)") {
    std::size_t at = 0;
    for (std::size_t i = 0; i < named.size(); ++i) {
      const auto label = named[i]->text + "=";
      if (caller.substr(at, label.size()) != label) {
        if (named[i]->kind == Kind::method && at >= caller.size()) break;
        return {"", "expected \"" + label + "\" at byte " + std::to_string(at) + " of the caller"};
      }
      at += label.size();
      auto end = caller.size();
      for (std::size_t j = i + 1; j < named.size(); ++j) {
        const auto next = caller.find(" " + named[j]->text + "=", at);
        if (next != std::string_view::npos) {
          end = next;
          break;
        }
      }
      const auto value = caller.substr(at, end - at);
      if (value == kShared)
        shared = true;
      else
        given.values[id_of(*named[i])] = unescaped(value);
      at = end == caller.size() ? end : end + 1;
    }
    if (at < caller.size())
      return {"", "unexpected \"" + std::string(caller.substr(at)) + "\" after the key's parts"};
  }
  // The rest of a request: what the key parts read.
  RequestFacts facts;
  tls::Fingerprints tls;
  facts.route = route.name;
  facts.headers = &given;
  facts.claims = &given;
  std::string query;
  std::vector<std::string_view> descriptor(limit.key.size());  // an RLS limit's entries
  for (const auto& part : limit.key) {
    const auto* value = given.find(id_of(part));
    switch (part.kind) {
      case Kind::ip:
        if (value) {
          auto ip = config::parse_ip(*value);
          if (!ip) return {"", "\"" + *value + "\" is not an IP address"};
          facts.client = *ip;
        }
        break;
      case Kind::method:
        if (value) facts.method = *value;
        break;
      case Kind::host:
        if (value) facts.host = *value;
        break;
      case Kind::path:
        if (value) facts.path = *value;
        break;
      case Kind::query:
        if (value) query += (query.empty() ? "" : "&") + part.name + "=" + *value;
        break;
      case Kind::tls:
        if (value) (part.name == "ja3" ? tls.ja3 : tls.ja4) = *value;
        facts.tls = &tls;
        break;
      case Kind::descriptor:  // by position ("0", "1", ...: config/rls_rules.cpp)
        if (value) descriptor[static_cast<std::size_t>(&part - limit.key.data())] = *value;
        break;
      case Kind::route:
      case Kind::header:
      case Kind::jwt:
      case Kind::cookie:
        break;
    }
    if (!value && part.kind != Kind::route && !shared)
      return {"", "the caller does not name " + part.text};
  }
  facts.query = query;
  facts.descriptor = descriptor;
  // As the proxy keys it: a path matching one of the route's templates by the template.
  facts.path_template = matching_template(route, facts.path);
  auto built = build_key(prefix, route, limit, facts, hasher);
  if (built.missing && limit.on_missing_key != config::OnMissingKey::shared)
    return {"", "the caller does not name every part of the key"};
  return {std::move(built.key), ""};
}

}  // namespace floodgate::keys
