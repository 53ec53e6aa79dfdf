#include "forwarding.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include "floodgate/ascii.hpp"

namespace floodgate::http {

namespace bhttp = boost::beast::http;

namespace {

// Calls fn(token) for each element of a comma-separated list header, over every occurrence
// of it, trimmed of blanks; stops when fn returns true.
template <typename Fn>
bool any_token(const bhttp::fields& fields, bhttp::field name, Fn&& fn) {
  for (auto it = fields.find(name); it != fields.end() && it->name() == name; ++it) {
    std::string_view v = it->value();
    while (!v.empty()) {
      auto comma = v.find(',');
      auto token = v.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
        token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      if (!token.empty() && fn(token)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

bool has_token(const bhttp::fields& fields, bhttp::field name, std::string_view wanted) {
  return any_token(fields, name, [&](std::string_view t) { return iequals(t, wanted); });
}

// Names a Connection list may not take away (RFC 9110 section 7.6.1 lets a sender list any
// field, so "Connection: Host" would otherwise drop Host from the upstream request): the
// message's routing and framing, and the forwarding fields an origin reads to know who
// called (a client naming X-Forwarded-For would erase the chain a trusted proxy in front of
// us built, leaving only that proxy's address). Framing is re-established by the caller.
bool is_protected(std::string_view name) {
  static constexpr std::string_view kProtected[] = {
      "host", "content-length", "transfer-encoding", "x-forwarded-for", "x-forwarded-proto",
      "via",  "forwarded",      "x-real-ip"};
  return std::any_of(std::begin(kProtected), std::end(kProtected),
                     [&](std::string_view p) { return iequals(p, name); });
}

}  // namespace

std::optional<std::uint64_t> content_length_of(const bhttp::fields& fields) {
  auto it = fields.find(bhttp::field::content_length);
  if (it == fields.end()) return std::nullopt;
  std::string_view v = it->value();
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || p != v.data() + v.size()) return std::nullopt;
  return n;
}

bool asks_for_trailers(const bhttp::fields& fields) {
  auto it = fields.find(bhttp::field::te);
  return it != fields.end() && iequals(it->value(), "trailers");
}

void strip_hop_by_hop(bhttp::fields& fields) {
  // Collect the names listed in Connection before erasing it: "Connection: close, X-Foo"
  // makes X-Foo hop-by-hop too.
  std::vector<std::string> named;
  any_token(fields, bhttp::field::connection, [&](std::string_view t) {
    if (!is_protected(t)) named.emplace_back(t);
    return false;
  });
  // One pass over the fields (a lookup per hop-by-hop name would walk the index ten times).
  for (auto it = fields.begin(); it != fields.end();) {
    switch (it->name()) {
      case bhttp::field::connection:
      case bhttp::field::keep_alive:
      case bhttp::field::proxy_connection:
      case bhttp::field::te:
      case bhttp::field::trailer:
      case bhttp::field::transfer_encoding:
      case bhttp::field::upgrade:
      case bhttp::field::proxy_authenticate:
      case bhttp::field::proxy_authorization:
      case bhttp::field::content_length:
        it = fields.erase(it);
        break;
      default:
        ++it;
    }
  }
  for (const auto& name : named) fields.erase(name);
}

bool is_websocket_upgrade(const bhttp::request_header<>& req) {
  return req.method() == bhttp::verb::get && req.version() == 11 &&
         has_token(req, bhttp::field::upgrade, "websocket") &&
         has_token(req, bhttp::field::connection, "upgrade");
}

std::string joined_values(const bhttp::fields& fields, std::string_view name,
                          std::string_view separator) {
  std::string out;
  auto range = fields.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) {
    if (!out.empty()) out += separator;
    out += it->value();
  }
  return out;
}

bool valid_host(std::string_view host) {
  if (host.empty()) return true;  // "Host:" with an empty value is allowed (RFC 9112 3.2)
  std::string_view name = host;
  if (name.front() == '[') {
    auto close = name.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : name.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    name.remove_prefix(close + 1);
    if (name.empty()) return true;
    if (name.front() != ':') return false;
  } else {
    auto colon = name.rfind(':');
    auto reg = name.substr(0, colon);
    if (reg.empty()) return false;
    // RFC 3986 reg-name: unreserved, pct-encoded, sub-delims (a table: this runs on every
    // request, and isalnum is a call into the C locale per character).
    static constexpr auto allowed = [] {
      std::array<bool, 256> t{};
      for (int c = 0; c < 256; ++c)
        t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      for (char c : std::string_view("-._~%!$&'()*+,;=")) t[static_cast<unsigned char>(c)] = true;
      return t;
    }();
    for (char c : reg)
      if (!allowed[static_cast<unsigned char>(c)]) return false;
    if (colon == std::string_view::npos) return true;
    name.remove_prefix(colon);
  }
  name.remove_prefix(1);  // the ':'
  if (name.size() > 5) return false;
  for (char c : name)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool framing_is_safe(const bhttp::request_header<>& req, bool chunked) {
  bool has_te = req.find(bhttp::field::transfer_encoding) != req.end();
  if (has_te &&
      (req.version() < 11 || !chunked || req.count(bhttp::field::transfer_encoding) != 1 ||
       !iequals(req[bhttp::field::transfer_encoding], "chunked")))
    return false;
  auto hosts = req.count(bhttp::field::host);
  if (hosts > 1 || (hosts == 0 && req.version() >= 11)) return false;
  if (hosts == 1 && !valid_host(req[bhttp::field::host])) return false;
  return true;
}

namespace {

void append_to_list(bhttp::fields& fields, std::string_view name, std::string_view value) {
  std::string list = joined_values(fields, name);
  if (!list.empty()) list += ", ";
  list += value;
  fields.set(name, list);
}

}  // namespace

void add_forwarding_headers(bhttp::fields& fields, const ForwardedFor& info) {
  append_to_list(fields, "X-Forwarded-For", info.peer_ip);
  fields.set("X-Forwarded-Proto", info.tls ? "https" : "http");
  std::string via = "1.1 ";
  via += info.pop;
  append_to_list(fields, "Via", via);
}

}  // namespace floodgate::http
