#pragma once
// What the gate decided for one admitted request, and what the request owes the store after
// its response (settlement, leases, a counting limit's charge): filled by decide::Gate,
// paid by decide::Ledger, read by the access log. No protocol's types.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/limit/policy.hpp"
#include "floodgate/store/item.hpp"

namespace floodgate::decide {

struct Admission {
  // For the access log: what was decided, by which limit, for which (hashed) key.
  std::string_view decision = "none";
  std::string limit;
  std::string key;
  std::string_view shadow_limit;  // the first shadow limit that would have refused, if any
  limit::Micros delayed = 0;      // held by an on_exceed: delay limit before forwarding
  // The store could not decide and the route's on_store_error took over: what was charged
  // (under `local`) was charged to the in-process store, and is returned and settled there.
  bool degraded = false;
  limit::HeaderList headers;  // for the response: the limit closest to refusal
  // Whether an admitted request's `headers` are rendered: an RLS call answers its statuses
  // instead (2.4 k instructions a call saved).
  bool wants_headers = true;
  std::vector<store::Item> leases;  // concurrency leases to return when the response ends
  struct Settle {
    store::Item item;
    std::string header;  // response header (or trailer) carrying the true cost
    std::int64_t charged = 0;
    bool from_trailer = false;  // read from the response's trailers, once they arrive
    // A counting limit's statuses (the snapshot's, which the exchange holds): `charged` is
    // given back once the response's status is known to be another (`header` is then empty).
    const config::StatusSet* count = nullptr;
    bool holding = true;  // a count's charge is still in the store
  };
  std::vector<Settle> settles;
};

}  // namespace floodgate::decide
