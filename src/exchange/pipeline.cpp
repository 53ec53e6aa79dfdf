#include "pipeline.hpp"

#include "access_log.hpp"
#include "floodgate/decide/router.hpp"
#include "floodgate/keys/client_ip.hpp"
#include "floodgate/uri/host.hpp"
#include "floodgate/uri/target.hpp"
#include "request_id.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

std::optional<Unrouted> route_exchange(Exchange& x) {
  std::string_view raw = x.raw_target;
  // An absolute-form target names the host itself and is rewritten to origin-form for the
  // upstream: its text is kept here, so that the views into it outlive that rewrite.
  if (!raw.empty() && raw.front() != '/') {
    x.target_copy.assign(raw);
    raw = x.target_copy;
  }
  auto target = uri::parse_target(raw);
  if (!target) return Unrouted{400, true};
  x.target = *target;
  x.target_parsed = true;
  x.host = x.target.authority.empty() ? x.host_field : x.target.authority;
  auto normal = uri::normalize_target(x.target, x.normalized);
  if (!normal) return Unrouted{400, false};
  const auto* route = decide::match_route(*x.config, x.method, x.host, x.target.path);
  if (decide::refuses_encoded_separators(normal, route)) return Unrouted{400, false};
  if (!route) return Unrouted{404, false};
  x.route = route;
  return std::nullopt;
}

const config::IpAddress& client_of(Exchange& x) {
  if (!x.client) {
    const auto& settings = x.config->server.client_ip;
    x.client = keys::client_ip(x.peer, joined_values(*x.fields, settings.header, ","), settings);
  }
  return *x.client;
}

const keys::ClaimSource& claims_of(Exchange& x) {
  if (!x.claims)
    x.claims.emplace(*x.fields, *x.config, x.arrived / limit::kMicrosPerSecond, x.jwks);
  return *x.claims;
}

boost::asio::awaitable<std::optional<Reply>> decide_exchange(decide::Gate& gate, Exchange& x,
                                                             spdlog::logger& log) {
  FieldHeaders headers(*x.fields);
  // Routes compare the host case-insensitively and keys lower-case it: the name part is enough.
  decide::Inquiry q{
      x.config.get(), x.route,
      keys::RequestFacts{x.route->name, x.method, uri::host_name(x.host), x.target.path,
                         x.target.query, client_of(x), &headers, &claims_of(x), x.tls_fingerprints},
      x.arrived};
  auto reply = co_await gate.decide(x.config, q, x.admission);
  if (x.admission.decision == "rejected" && x.claims &&
      x.claims->error() != keys::JwtError::none)  // why, for whoever debugs it
    log.debug("route {}: limit {} rejected the request ({}): JWT {}", x.route->name,
              x.admission.limit, reply ? reply->status : 0, keys::to_string(x.claims->error()));
  co_return reply;
}

void settle_response(decide::Gate& gate, Exchange& x, const Fields& response) {
  if (x.admission.settles.empty()) return;  // most responses: no lookup built for nothing
  settle_fields(gate, x, false, [&](std::string_view name) { return response.find(name); });
}

void settle_fields(decide::Gate& gate, Exchange& x, bool trailers,
                   const decide::Ledger::FieldLookup& field) {
  const bool noted = x.config->log.access_log && !x.config->log.replay_fields.empty();
  gate.ledger().settle(x.admission, trailers, field, noted ? &x.settled : nullptr);
}

void prepare_upstream_head(Exchange& x, RequestHead& req, const config::UpstreamServer& u,
                           const UpstreamFraming& framing) {
  // The access log names the client the forwarding header named as received, before it is
  // extended below.
  if (x.config->log.access_log) client_of(x);
  auto& f = req.fields;
  if (!x.target.authority.empty()) f.set("Host", x.target.authority);
  // An HTTP/1.0 client may omit Host; what we send is HTTP/1.1, which must carry one
  // (RFC 9112 section 3.2): the upstream's own authority, as nginx's $proxy_host.
  if (!f.has("host"))
    f.set("Host", (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":" +
                      std::to_string(u.port));
  if (x.target.origin_form != req.target)  // normalized (or absolute-form)
    req.set_target(x.target.origin_form);
  strip_hop_by_hop(f);
  if (framing.upgrade) {  // the one hop-by-hop pair we pass on (RFC 9110 section 7.8)
    f.set("Connection", "Upgrade");
    f.set("Upgrade", "websocket");
  }
  f.erase("expect");  // answered by us, before the body is relayed
  add_forwarding_headers(f, {x.peer_ip, x.tls, x.config->server.pop});
  add_trace_fields(x, f);
  req.version = 11;
  // strip_hop_by_hop dropped both framing fields: exactly one comes back.
  if (framing.content_length)
    f.set("Content-Length", std::to_string(*framing.content_length));
  else if (framing.chunked)
    f.set("Transfer-Encoding", "chunked");
}

void add_rate_headers(const Exchange& x, Fields& response) {
  for (const auto& [name, value] : x.admission.headers) response.set(name, value);
  if (!x.alt_svc.empty()) response.set("Alt-Svc", x.alt_svc);
}

void log_exchange(Exchange& x, spdlog::logger& access_log, keys::KeyHasher& hasher) {
  if (!x.config->log.access_log) return;
  access_log.info("{}", access_line(x, std::chrono::steady_clock::now() - x.started, hasher));
}

}  // namespace floodgate::http
