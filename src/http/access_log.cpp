#include "access_log.hpp"

#include <boost/beast/http/field.hpp>

#include <cstdio>
#include <ctime>

#include "floodgate/http/path_normalize.hpp"
#include "floodgate/keys/client_ip.hpp"
#include "floodgate/limit/utc_time.hpp"
#include "forwarding.hpp"
#include "request_sources.hpp"

namespace floodgate::http {

namespace bhttp = boost::beast::http;

void append_json_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
}

namespace {

void append_pair(std::string& out, bool& first, std::string_view name, std::string_view value) {
  out += first ? "\"" : ",\"";
  first = false;
  append_json_escaped(out, name);
  out += "\":\"";
  append_json_escaped(out, value);
  out += '"';
}

// What the request was routed by: an absolute-form target ("GET http://h/p") names host and
// path itself, overriding Host, as it did for routing, and the path is the normalized one
// routing and keys saw (a refused request still has its target as received; a forwarded one
// has been rewritten to the normalized origin-form by now), so that a replay of the line
// routes and keys it as it was. `storage` owns the normalized text.
struct RequestLine {
  std::string_view host;
  std::string_view path;
  std::string_view query;
};

RequestLine request_line_of(const bhttp::request_header<>& req, std::string& storage) {
  std::string_view raw = req.target();
  if (auto t = parse_target(raw)) {
    std::string_view host =
        t->authority.empty() ? std::string_view(req[bhttp::field::host]) : t->authority;
    normalize_target(*t, storage);  // a path refused for a bad escape is logged as received
    return {host, t->path, t->query};
  }
  auto q = raw.find('?');
  return {req[bhttp::field::host], raw.substr(0, q),
          q == std::string_view::npos ? std::string_view() : raw.substr(q + 1)};
}

// The replay inputs of log.replay_fields that this request has (an absent header, parameter
// or claim is left out, as a missing key part).
void append_replay_fields(std::string& out, const AccessEntry& e, const RequestLine& line,
                          keys::KeyHasher& hasher) {
  const auto& fields = e.request;
  FieldHeaders headers(fields);
  LazyClaims claims(fields, e.config, e.arrived / limit::kMicrosPerSecond);
  out += ",\"fields\":{";
  bool first = true;
  for (const auto& f : e.config.log.replay_fields) {
    std::optional<std::string> value;
    switch (f.kind) {
      case config::ReplayField::Kind::ip: {
        const auto& settings = e.config.server.client_ip;
        value = keys::client_ip(e.peer, joined_values(fields, settings.header, ","), settings)
                    .to_string();
        break;
      }
      case config::ReplayField::Kind::host:
        value = std::string(host_name(line.host));  // keys lower-case it
        break;
      case config::ReplayField::Kind::header:
        if (auto v = headers.header(f.name)) value = std::string(*v);
        break;
      case config::ReplayField::Kind::query:
        if (auto v = keys::query_param(line.query, f.name)) value = std::string(*v);
        break;
      case config::ReplayField::Kind::jwt:
        value = claims.claim(f.name);
        break;
    }
    if (!value) continue;
    auto name = f.text();
    if (f.hashed) *value = "#" + hasher.hex("replay-field\n" + name + "\n" + *value);
    append_pair(out, first, name, *value);
  }
  out += '}';
  if (!e.settled.empty()) {
    out += ",\"settle\":{";
    first = true;
    for (const auto& [name, value] : e.settled) append_pair(out, first, name, value);
    out += '}';
  }
}

}  // namespace

std::string access_line(const AccessEntry& e, keys::KeyHasher& hasher) {
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::string normalized;
  const auto request_line = request_line_of(e.request, normalized);
  const auto path = request_line.path;
  std::string line;
  line.reserve(320);
  line += "{\"type\":\"access\",\"ts\":\"";
  line += limit::format_utc(e.arrived);
  line += "\",\"pop\":\"";
  append_json_escaped(line, e.config.server.pop);
  line += "\",\"peer\":\"";
  line += e.peer_ip;
  line += "\",\"method\":\"";
  append_json_escaped(line, e.request.method_string());
  line += "\",\"path\":\"";
  append_json_escaped(line, path);
  line += "\",\"route\":\"";
  append_json_escaped(line, e.route);
  line += "\",\"status\":" + std::to_string(e.status);
  if (!e.decision.empty()) {
    line += ",\"decision\":\"";
    line += e.decision;
    line += "\",\"limit\":\"";
    append_json_escaped(line, e.limit);
    line += "\",\"key\":\"";
    append_json_escaped(line, e.key);
    line += '"';
  }
  char timing[96];
  std::snprintf(timing, sizeof timing, ",\"duration_ms\":%.3f,\"upstream_ms\":%.3f", ms(e.took),
                ms(e.upstream_took));
  line += timing;
  if (!e.config.log.replay_fields.empty()) append_replay_fields(line, e, request_line, hasher);
  line += '}';
  return line;
}

}  // namespace floodgate::http
