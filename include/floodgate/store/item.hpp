#pragma once
// The values a store decision is made of: what is asked (Item), what is answered (Outcome),
// and how asking can fail (StoreError). Plain data, no Asio: limit/ builds and reads these
// without depending on the asynchronous interface in limit_store.hpp.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "floodgate/limit/algorithm.hpp"

namespace floodgate::metrics {
struct LeaseCounters;
struct LimitCounters;
}  // namespace floodgate::metrics

namespace floodgate::store {

// A leased limit's terms (SPEC "Leased decisions"); size 0: decided by the store per request.
struct LeaseTerms {
  std::int64_t size = 0;
  limit::Micros ttl = 0;
  metrics::LeaseCounters* counters = nullptr;  // the limit's, in metrics::Metrics; may be null
  // Set by the leasing store on what it sends (lua/prelude.lua): the instance holding the
  // units, the units of its earlier leases it has spent since it last said so, and whether an
  // adjustment gives unused units back.
  std::string holder;
  std::int64_t settled = 0;
  bool returning = false;
};

struct Item {
  std::string key;  // the full store key (prefix, route, limit, hashed caller)
  limit::Params params;
  std::int64_t cost = 1;
  bool enforce = true;  // shadow limits are decided and charged when they admit, never refuse
  std::string lease;    // concurrency / sliding_log: unique per request (Redis lease and log ids)
  LeaseTerms leased;    // decided from units taken in advance (store/leased_store.hpp)
  // Taking a lease: as many units as are free, up to this many, provided `cost` are; the
  // decision's `granted` says how many were taken. 0: an ordinary decision of `cost`.
  // (Redis stores send it only with a holder, `leased.holder`: a lease is always someone's.)
  std::int64_t take_up_to = 0;
  // Its limit's refusal counters (metrics::Metrics; stable): the request counts a refusal in
  // them after the store answered, when the gate's own tables may have been rebuilt.
  metrics::LimitCounters* refusals = nullptr;
  // A counting limit's (`count:`): what it holds may be given back by any response, on any
  // worker, so a refusal of it is never cached (limit::DenyCache).
  bool refundable = false;
  // Whose it is among the items of one decision (an RLS call: the descriptor's index); the
  // store does not read it.
  std::uint32_t tag = 0;
};

struct Outcome {
  bool admitted = false;                   // every enforcing item admitted
  limit::Micros now = 0;                   // the store's clock at the decision
  std::vector<limit::Decision> decisions;  // one per item, in order
};

enum class StoreError { timeout, unavailable, protocol };
const char* to_string(StoreError e);

using AcquireResult = std::variant<Outcome, StoreError>;

}  // namespace floodgate::store
