#pragma once
// The steps of one exchange that do not depend on the front protocol, in the order they run:
//
//   route_exchange -> decide_exchange (decide::Gate) -> a Reply of ours
//                                    or prepare_upstream_head -> (the upstream answers)
//                                       settle_response (decide::Ledger), add_rate_headers
//   -> finish_exchange, log_exchange (however it ended)
//
// A front protocol reads a request's head into an Exchange, calls these, and frames what they
// produce; the fuzz target calls the same ones.

#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>

#include "exchange.hpp"
#include "floodgate/decide/gate.hpp"
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

// Whether a routed request passes the limit gate (decide_exchange): its route has limits,
// or there are allow or deny lists to check.
inline bool gated(const Exchange& x) {
  return !x.route->limits.empty() || !x.route->lists.empty() || !x.config->lists.empty();
}

// The routed, gated(x) request's facts as an Inquiry to `gate` at x.arrived: fills
// x.admission; a reply when the request is answered here instead of forwarded. A rejection
// for a bad token is logged (debug) with why it failed.
boost::asio::awaitable<std::optional<Reply>> decide_exchange(decide::Gate& gate, Exchange& x,
                                                             spdlog::logger& log);
// A routed request that is not gated(x): counted as unlimited.
inline void count_ungated(decide::Gate& gate, const Exchange& x) {
  gate.count_ungated(*x.config, *x.route);
}
// A status floodgate answered itself to `x` (null, or not routed: counted without a route).
inline void count_own_status(decide::Gate& gate, const Exchange* x, int status) {
  gate.count_own_status(x ? x->config.get() : nullptr, x ? x->route : nullptr, status);
}
// The upstream's response head arrived: true costs from its settle fields are settled and
// noted for the access log (decide::Ledger::settle).
void settle_response(decide::Gate& gate, Exchange& x, const Fields& response);
// The same for settles read from trailers (`trailers`) or from the head, by lookup.
void settle_fields(decide::Gate& gate, Exchange& x, bool trailers,
                   const decide::Ledger::FieldLookup& field);
// x.status is known (as its head goes to the client), or changed: a counting limit's charge
// follows it.
inline void count_status(decide::Gate& gate, Exchange& x) {
  gate.ledger().count_status(x.admission, x.status);
}
// The response (or tunnel) ended with x.status (0: none was sent): leases back, counts settled.
inline void finish_exchange(decide::Gate& gate, Exchange& x) {
  gate.ledger().finish(x.admission, x.status);
}

// Ends a request's admission however its handling ends (finish_exchange: concurrency leases
// back, counting limits settled by the status sent). The store is still there when it runs:
// a drain lets every session finish before the worker's services go.
class FinishGuard {
 public:
  FinishGuard(decide::Gate& gate, Exchange& x) : gate_(gate), x_(x) {}
  ~FinishGuard() { finish_exchange(gate_, x_); }
  FinishGuard(const FinishGuard&) = delete;
  FinishGuard& operator=(const FinishGuard&) = delete;

 private:
  decide::Gate& gate_;
  Exchange& x_;
};

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
void prepare_upstream_head(Exchange& x, RequestHead& req, const config::UpstreamServer& u,
                           const UpstreamFraming& framing);

// The admitted request's rate-limit headers onto the upstream's response.
void add_rate_headers(const Exchange& x, Fields& response);

// The exchange's access-log line, when its snapshot asks for one.
void log_exchange(Exchange& x, spdlog::logger& access_log, keys::KeyHasher& hasher);

}  // namespace floodgate::http
