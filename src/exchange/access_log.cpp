#include "access_log.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "floodgate/keys/client_ip.hpp"
#include "floodgate/limit/utc_time.hpp"
#include "floodgate/uri/host.hpp"
#include "floodgate/uri/target.hpp"
#include "pipeline.hpp"
#include "request_sources.hpp"

namespace floodgate::http {

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

// What the request was routed by: the host and the normalized path routing and keys saw (a
// target refused for a bad escape as received), so that a replay of the line routes and keys
// it as it was. A target that could not be parsed at all is logged as it came.
struct RequestLine {
  std::string_view host;
  std::string_view path;
  std::string_view query;
};

RequestLine request_line_of(const Exchange& x) {
  if (x.target_parsed) return {x.host, x.target.path, x.target.query};
  auto q = x.raw_target.find('?');
  return {x.host_field, x.raw_target.substr(0, q),
          q == std::string_view::npos ? std::string_view() : x.raw_target.substr(q + 1)};
}

// The client as logged: whole, as the lists matched it (a replay folds it for keys as its
// config says). Hashed, it is the address folded to ipv6_prefix that is hashed: the hash
// cannot be folded later, and a replay must still count one /64 as the proxy's keys did.
std::string logged_client(Exchange& x, bool hashed, keys::KeyHasher& hasher) {
  if (!hashed) return client_of(x).to_string();
  const auto folded = keys::fold_ipv6(client_of(x), x.config->server.client_ip.ipv6_prefix);
  return "#" + hasher.hex("replay-field\nip\n" + folded.to_string());
}

// The replay inputs of log.replay_fields that this request has (an absent header, parameter
// or claim is left out, as a missing key part).
void append_replay_fields(std::string& out, Exchange& x, const RequestLine& line,
                          keys::KeyHasher& hasher) {
  FieldHeaders headers(*x.fields);
  out += ",\"fields\":{";
  bool first = true;
  for (const auto& f : x.config->log.replay_fields) {
    std::optional<std::string> value;
    switch (f.kind) {
      case config::ReplayField::Kind::ip:
        // Hashed here already: the same value as the line's "client".
        append_pair(out, first, f.text(), logged_client(x, f.hashed, hasher));
        continue;
      case config::ReplayField::Kind::host:
        value = std::string(uri::host_name(line.host));  // keys lower-case it
        break;
      case config::ReplayField::Kind::header:
        if (auto v = headers.header(f.name)) value = std::string(*v);
        break;
      case config::ReplayField::Kind::query:
        if (auto v = keys::query_param(line.query, f.name)) value = std::string(*v);
        break;
      case config::ReplayField::Kind::jwt:
        value = claims_of(x).claim(f.name);
        break;
      case config::ReplayField::Kind::cookie:
        if (auto v = headers.cookie(f.name)) value = std::string(*v);
        break;
      case config::ReplayField::Kind::tls:
        if (x.tls_fingerprints)
          value = f.name == "ja3" ? x.tls_fingerprints->ja3 : x.tls_fingerprints->ja4;
        if (value && value->empty()) value.reset();
        break;
      case config::ReplayField::Kind::descriptors:
        break;  // the service's own, below
    }
    if (!value) continue;
    auto name = f.text();
    if (f.hashed) *value = "#" + hasher.hex("replay-field\n" + name + "\n" + *value);
    append_pair(out, first, name, *value);
  }
  if (!x.service_fields.empty()) {
    if (!first) out += ',';
    out += x.service_fields;
  }
  out += '}';
  if (!x.settled.empty()) {
    out += ",\"settle\":{";
    first = true;
    for (const auto& [name, value] : x.settled) append_pair(out, first, name, value);
    out += '}';
  }
}

// What the lists and limits decided: the decision, the deciding limit and its hashed key, how
// long an on_exceed: delay limit held the request, the shadow limit that would have refused.
void append_decision(std::string& line, const Admission& a) {
  line += ",\"decision\":\"";
  line += a.decision;
  line += "\",\"limit\":\"";
  append_json_escaped(line, a.limit);
  line += "\",\"key\":\"";
  append_json_escaped(line, a.key);
  line += '"';
  if (a.delayed > 0) {
    char ms[32];
    std::snprintf(ms, sizeof ms, ",\"delayed_ms\":%.3f", static_cast<double>(a.delayed) / 1000.0);
    line += ms;
  }
  if (!a.shadow_limit.empty()) {
    line += ",\"shadow_limit\":\"";
    append_json_escaped(line, a.shadow_limit);
    line += '"';
  }
}

}  // namespace

std::string access_line(Exchange& x, std::chrono::steady_clock::duration took,
                        keys::KeyHasher& hasher) {
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const auto request_line = request_line_of(x);
  std::string line;
  line.reserve(320);
  line += "{\"type\":\"access\",\"ts\":\"";
  line += limit::format_utc(x.arrived);
  line += "\",\"pop\":\"";
  append_json_escaped(line, x.config->server.pop);
  line += "\",\"request_id\":\"";
  line += x.request_id;  // a sane token or hex (request_id.hpp): nothing to escape
  line += "\",\"peer\":\"";
  line += x.peer_ip;
  if (x.fields) {
    line += "\",\"client\":\"";  // behind trusted proxies; hashed when replay_hashed says so
    const auto& fields = x.config->log.replay_fields;
    const bool hashed = std::any_of(fields.begin(), fields.end(), [](const config::ReplayField& f) {
      return f.kind == config::ReplayField::Kind::ip && f.hashed;
    });
    line += logged_client(x, hashed, hasher);
    line += "\",\"user_agent\":\"";
    append_json_escaped(line, x.fields->get("user-agent"));
  }
  line += "\",\"protocol\":\"";
  line += x.protocol;
  line += "\",\"method\":\"";
  append_json_escaped(line, x.method);
  line += "\",\"path\":\"";
  append_json_escaped(line, request_line.path);
  line += "\",\"route\":\"";
  if (x.route) append_json_escaped(line, x.route->name);
  line += "\",\"status\":" + std::to_string(x.status);
  if (x.route && gated(x)) append_decision(line, x.admission);  // lists or limits consulted
  line += ",\"bytes_in\":" + std::to_string(x.bytes_in);
  line += ",\"bytes_out\":" + std::to_string(x.bytes_out);
  char timing[96];
  std::snprintf(timing, sizeof timing, ",\"duration_ms\":%.3f,\"upstream_ms\":%.3f", ms(took),
                ms(x.upstream_took));
  line += timing;
  if (!x.config->log.replay_fields.empty()) append_replay_fields(line, x, request_line, hasher);
  line += '}';
  return line;
}

}  // namespace floodgate::http
