#pragma once
// The decision with no I/O and no protocol: what a request's facts (an Inquiry) and a config
// snapshot make of it before any store is asked, and what the store's answer means after.
// The proxy (decide::Gate) and `floodgate replay` decide through it, so a replayed line and
// a live request take the same steps; Envoy's RLS and HTTP/3 will fill an Inquiry too.

#include <cstdint>
#include <memory>
#include <string>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/deny_cache.hpp"
#include "floodgate/limit/policy.hpp"
#include "floodgate/store/item.hpp"

namespace floodgate::decide {

// A request as the decision sees it, filled once by whoever asks (a front from its headers,
// replay from a logged line): no HTTP library's types.
struct Inquiry {
  const config::Config* config = nullptr;
  const config::Route* route = nullptr;  // the route it matched (decide::match_route)
  // Route name, method, host name (no port), normalized path, query, client address, header,
  // claim and TLS sources. complete() fills the rest.
  keys::RequestFacts facts;
  limit::Micros now = 0;  // when it arrived (Unix microseconds; replay: the logged time)
};

// The facts the route and the config decide: the path template the path matches (keyed in
// its place) and the IPv6 prefix an `ip` key part keeps.
void complete(Inquiry& q);

// Where the steps before the store end.
enum class Ruling {
  denied,     // on a deny list: answered 403
  allowed,    // on an allow list: forwarded without its limits
  exempt,     // an override exempts it from every limit it had
  unlimited,  // no limit applies: the route has none, or every one skipped it
  rejected,   // a limit cannot key it: plan.reject_status (400 or 401), plan.rejected_by
  ask,        // plan.items are for the store to decide, all at once
};

// What the store's outcome means for the request.
struct Conclusion {
  limit::Verdict verdict;       // admitted or refused, and the limit whose numbers are shown
  bool shadow_refused = false;  // a shadow limit would have refused it
  // Refused with no enforcing limit refusing: a store contradicting itself (fail safe: 503).
  bool inconsistent = false;
};

class Decider {
 public:
  // `kind`: HMAC keys (the proxy) or a fast hash (replay, whose keys never leave it).
  // `lease_prefix` makes the ids of requests needing one (concurrency, sliding_log refunds)
  // unique across instances and workers: "<instance>:<worker>:".
  Decider(keys::KeyHasher::Kind kind, std::string lease_prefix);

  // The lists, then the route's limits planned under the snapshot's key secret, then the
  // caller's overrides (null: none). `ask` leaves in `plan` what the store is to decide.
  Ruling rule(const Inquiry& q, limit::Plan& plan, const limit::OverrideIndex* overrides);
  // A plan's last steps before the store (rule()'s, and an RLS call's): the caller's
  // overrides (null: none) applied at `now`, a lease id when one is needed.
  Ruling ready(limit::Plan& plan, const limit::OverrideIndex* overrides, limit::Micros now);
  static Conclusion conclude(const limit::Plan& plan, const store::Outcome& outcome);

  // The key hasher under `c`'s key_secret (a built-in one when unset), rebuilt when it changes.
  keys::KeyHasher& hasher(const config::Config& c);
  // Keys refused until a known time: asked before the store by whoever owns one (the proxy;
  // replay asks its exact store every time).
  limit::DenyCache& deny_cache() { return deny_; }

 private:
  keys::KeyHasher::Kind kind_;
  std::unique_ptr<keys::KeyHasher> hasher_;
  std::string lease_prefix_;
  std::uint64_t lease_seq_ = 0;
  limit::DenyCache deny_;
};

}  // namespace floodgate::decide
