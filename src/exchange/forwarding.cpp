#include "forwarding.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include "floodgate/ascii.hpp"

namespace floodgate::http {

namespace {

// Calls fn(token) for each element of a comma-separated list header, over every occurrence
// of it, trimmed of blanks; stops when fn returns true.
template <typename Fn>
bool any_token(const Fields& fields, std::string_view name, Fn&& fn) {
  for (const auto& field : fields) {
    if (!Fields::named(field, name)) continue;
    std::string_view v = field.value;
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

bool has_token(const Fields& fields, std::string_view name, std::string_view wanted) {
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

std::optional<std::uint64_t> content_length_of(const Fields& fields) {
  auto found = fields.find("content-length");
  if (!found) return std::nullopt;
  std::string_view v = *found;
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || p != v.data() + v.size()) return std::nullopt;
  return n;
}

bool asks_for_trailers(const Fields& fields) {
  auto te = fields.find("te");
  return te && iequals(*te, "trailers");
}

void strip_hop_by_hop(Fields& fields) {
  // Collect the names listed in Connection before erasing it: "Connection: close, X-Foo"
  // makes X-Foo hop-by-hop too.
  boost::container::small_vector<std::string_view, 4> named;  // views into the fields' text
  any_token(fields, "connection", [&](std::string_view t) {
    if (!is_protected(t)) named.push_back(t);
    return false;
  });
  static constexpr std::string_view kHopByHop[] = {"connection",
                                                   "keep-alive",
                                                   "proxy-connection",
                                                   "te",
                                                   "trailer",
                                                   "transfer-encoding",
                                                   "upgrade",
                                                   "proxy-authenticate",
                                                   "proxy-authorization",
                                                   "content-length"};
  // One pass over the fields (a lookup per hop-by-hop name would walk them ten times).
  for (std::size_t i = 0; i < fields.size();) {
    const auto& f = fields[i];
    const bool hop = std::any_of(std::begin(kHopByHop), std::end(kHopByHop),
                                 [&](std::string_view h) { return Fields::named(f, h); }) ||
                     std::any_of(named.begin(), named.end(),
                                 [&](std::string_view n) { return Fields::named(f, n); });
    if (hop)
      fields.erase_at(i);
    else
      ++i;
  }
}

bool is_websocket_upgrade(const RequestHead& req) {
  return req.method == "GET" && req.version == 11 &&
         has_token(req.fields, "upgrade", "websocket") &&
         has_token(req.fields, "connection", "upgrade");
}

std::string joined_values(const Fields& fields, std::string_view name, std::string_view separator) {
  std::string out;
  fields.each(name, [&](std::string_view value) {
    if (!out.empty()) out += separator;
    out += value;
  });
  return out;
}

int refused_stream_head(std::string_view method, bool extended_connect, std::string_view authority,
                        const Fields& f, std::size_t header_bytes, std::size_t max_header_bytes) {
  if (header_bytes > max_header_bytes) return 431;
  if (method == "CONNECT" || extended_connect) return 400;
  auto host = f.find("host");
  if (!valid_host(authority) || f.count("host") > 1 || (host && !valid_host(*host))) return 400;
  if (host && !authority.empty() && !iequals(*host, authority)) return 400;
  return 0;
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

bool framing_is_safe(const RequestHead& req, bool chunked) {
  const auto& f = req.fields;
  if (auto te = f.find("transfer-encoding");
      te && (req.version < 11 || !chunked || f.count("transfer-encoding") != 1 ||
             !iequals(*te, "chunked")))
    return false;
  auto hosts = f.count("host");
  if (hosts > 1 || (hosts == 0 && req.version >= 11)) return false;
  if (hosts == 1 && !valid_host(f.get("host"))) return false;
  return true;
}

namespace {

void append_to_list(Fields& fields, std::string_view name, std::string_view value) {
  std::string list = joined_values(fields, name);
  if (!list.empty()) list += ", ";
  list += value;
  fields.set(name, list);
}

}  // namespace

void add_forwarding_headers(Fields& fields, const ForwardedFor& info) {
  append_to_list(fields, "X-Forwarded-For", info.peer_ip);
  fields.set("X-Forwarded-Proto", info.tls ? "https" : "http");
  std::string via = "1.1 ";
  via += info.pop;
  append_to_list(fields, "Via", via);
}

}  // namespace floodgate::http
