#pragma once
// Rate-limit algorithms as pure math over (parameters, state, now, cost). No clock, no I/O:
// the memory store calls these under its shard locks, and lua/ mirrors them for Redis (a
// differential test holds both to the same table of cases).
//
// Time is integer microseconds since the Unix epoch. A state that is std::monostate is
// neutral (a key never seen, or idle long enough to have forgotten).

#include <cmath>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include "floodgate/config/config.hpp"

namespace floodgate::limit {

using Micros = std::int64_t;
constexpr Micros kMicrosPerSecond = 1'000'000;

struct Params {
  config::Algorithm algorithm = config::Algorithm::token_bucket;
  std::int64_t capacity = 0;                       // buckets: burst; windows and concurrency: limit
  double per_second = 0;                           // buckets: refill rate
  Micros window = 0;                               // windows
  std::shared_ptr<const calendar::Period> period;  // quota: its calendar (config::Limit's)
  // token_bucket and gcra with `on_exceed: delay`: how long a request may wait for its units
  // (0: refuse). Kept as a time, not as units, so that a rate changed per caller (overrides)
  // or per instance (on_store_error: local) keeps the wait within it.
  Micros max_delay = 0;
  // The units a request may take beyond what is there: max_delay's worth of refill.
  std::int64_t delay_allowance() const {
    return max_delay > 0
               ? static_cast<std::int64_t>(std::floor(
                     static_cast<double>(max_delay) * per_second / kMicrosPerSecond + 1e-9))
               : 0;
  }

  static Params from(const config::Limit& l, const config::LimitParams& p);
  std::int64_t quota() const { return capacity; }  // what X-RateLimit-Limit shows
  // fixed_window and quota: the window holding `now` (a quota's is its calendar period).
  calendar::Span span_at(Micros now) const;
};

struct BucketState {
  double tokens = 0;
  Micros updated = 0;
};
// GCRA's theoretical arrival time, kept as the debt it implies (tat - now, in requests) at
// `updated`: the same decisions, but small numbers, so no precision is lost at Unix-epoch
// microseconds (a TAT near 1.8e15 us would round to 0.25 us and drift over a long burst).
struct GcraState {
  double debt = 0;
  Micros updated = 0;
};
struct WindowState {  // fixed_window and quota use start and current only
  Micros start = 0;
  std::int64_t current = 0;
  std::int64_t previous = 0;
};
struct LogEntry {
  Micros at = 0;
  std::int64_t cost = 0;
};
struct LogState {
  std::vector<LogEntry> entries;  // oldest first
};
struct ConcurrencyState {
  std::int64_t in_flight = 0;
};

using State =
    std::variant<std::monostate, BucketState, GcraState, WindowState, LogState, ConcurrencyState>;

struct Decision {
  bool admitted = false;
  std::int64_t limit = 0;      // X-RateLimit-Limit
  std::int64_t remaining = 0;  // after this request (0 when refused)
  Micros reset_after = 0;      // until the quota is whole again
  Micros retry_after = 0;      // refused: until the same request would pass. From a store,
                               // also set when admitted with nothing remaining: until the
                               // same request would pass again (0: at once)
  std::int64_t granted = 0;    // from a store, admitted: the units taken (the cost, or a lease)
  Micros delay = 0;  // admitted into a delay allowance: how long until its units are there
};

struct Evaluation {
  Decision decision;
  State next;  // the state to store if the request is admitted and charged
};

// Decides one request of `cost` at `now`. Never mutates: the caller commits `next` only when
// every enforcing limit of the route admits (all-or-nothing).
// `held`: units leasing instances hold on a token_bucket or gcra key (a store's record of who
// holds what, SPEC "Leased decisions"): they count against the burst until spent or returned,
// so a bucket refills only to capacity - held and a gcra debt stays at least held.
Evaluation evaluate(const Params& p, const State& s, Micros now, std::int64_t cost,
                    std::int64_t held = 0);

// `evaluate` for a store item: with `up_to` > 0 (a lease being taken) the cost is as many
// units as are free, up to `up_to`, provided at least `cost` are. Sets `granted` (the cost
// charged) when admitted.
Evaluation take(const Params& p, const State& s, Micros now, std::int64_t cost, std::int64_t up_to,
                std::int64_t held = 0);

// Charges (delta > 0) or refunds (delta < 0) after the fact: post-response settlement and
// cross-slot refunds. Debt is bounded by one capacity (or one limit); `held` as for evaluate.
State adjust(const Params& p, const State& s, Micros now, std::int64_t delta,
             std::int64_t held = 0);

// A token_bucket or gcra state brought up to `now` under `held` units held since it was last
// written: what refilled meanwhile is capped as if it had been decided at every instant (a
// lower hold later never credits a refill from before it). Other algorithms: `s` unchanged.
State hold(const Params& p, const State& s, Micros now, std::int64_t held);

// When a token_bucket or gcra state was last written (null: neutral, or another algorithm).
const Micros* updated_at(const State& s);

// Concurrency: one lease returned.
State release(const Params& p, const State& s);

// How long until `s` is neutral again (0: already neutral, may be forgotten now). Stores use
// it as the key's expiry, so idle callers cost no memory.
Micros time_to_neutral(const Params& p, const State& s, Micros now);

}  // namespace floodgate::limit
