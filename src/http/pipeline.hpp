#pragma once
// The steps of one exchange that do not depend on the front protocol, in the order they run:
//
//   route_exchange -> LimitGate::decide -> a Reply of ours
//                                       or prepare_upstream_head -> (the upstream answers)
//                                          LimitGate::settle, add_rate_headers
//   -> log_exchange (however it ended)
//
// A front protocol reads a request's head into an Exchange, calls these, and frames what they
// produce; the fuzz target calls the same ones.

#include <spdlog/logger.h>

#include <boost/beast/http/message.hpp>

#include <cstdint>
#include <optional>

#include "exchange.hpp"
#include "floodgate/keys/key_builder.hpp"

namespace floodgate::http {

// A request answered before any limit: 400 (a target that cannot be accepted; `close` when
// its framing cannot be trusted either) or 404 (no route).
struct Unrouted {
  int status = 400;
  bool close = false;
};

// Parses the target, puts its path in the one form it is routed, keyed, logged and forwarded
// in (uri/target.hpp), names the host (an absolute-form target's authority overrides
// Host) and matches the route.
std::optional<Unrouted> route_exchange(Exchange& x);

// Whether a routed request passes the limit gate (LimitGate::decide): its route has limits,
// or there are allow or deny lists to check.
inline bool gated(const Exchange& x) {
  return !x.route->limits.empty() || !x.route->lists.empty() || !x.config->lists.empty();
}

// The client address (behind trusted proxies, from the forwarding header as received),
// worked out on first use.
const config::IpAddress& client_of(Exchange& x);
// The verified JWT's claims, verified on the first claim asked for.
const keys::ClaimSource& claims_of(Exchange& x);

// How the request's body travels to the upstream.
struct UpstreamFraming {
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool upgrade = false;  // an admitted WebSocket upgrade: its Connection/Upgrade pair goes on
};

// Rewrites the request's head in place for upstream `u`: Host, the normalized origin-form
// target, hop-by-hop fields out, forwarding fields in, HTTP/1.1 with exactly one framing.
void prepare_upstream_head(Exchange& x, boost::beast::http::request_header<>& req,
                           const config::UpstreamServer& u, const UpstreamFraming& framing);

// The admitted request's rate-limit headers onto the upstream's response.
void add_rate_headers(const Exchange& x, boost::beast::http::fields& response);

// The exchange's access-log line, when its snapshot asks for one.
void log_exchange(Exchange& x, spdlog::logger& access_log, keys::KeyHasher& hasher);

}  // namespace floodgate::http
