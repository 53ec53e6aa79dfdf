#pragma once
// What an admitted request owes the store once its response is known, paid on the store that
// charged it (the in-process one when the route's on_store_error: local took over): true costs
// from the response's settle fields, a counting limit's charge by the final status, and the
// concurrency leases when the response ends.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/decide/admission.hpp"
#include "floodgate/limit/deny_cache.hpp"
#include "floodgate/store/limit_store.hpp"

namespace floodgate::decide {

class Ledger {
 public:
  Ledger(store::LimitStore& store, store::LimitStore& local, limit::DenyCache& deny)
      : store_(store), local_(local), deny_(deny) {}

  // The response's field named `name` (any case), or nothing.
  using FieldLookup = std::function<std::optional<std::string_view>(std::string_view name)>;
  // The settle fields of the response's head (`trailers` false) or trailers: each true cost
  // is settled, and a refund forgets what the deny cache held of that key. Each value found
  // is appended to `noted` (lower-case name, value) when it is not null, for the access log.
  void settle(Admission& a, bool trailers, const FieldLookup& field,
              std::vector<std::pair<std::string, std::string>>* noted);

  // The response's status is known (`status`, as its head goes to the client): what a counting
  // limit took is given back unless it counts that status. Called again when the status
  // changes (an answer of ours after all, or 0 for none), it charges or refunds the difference.
  void count_status(Admission& a, int status);
  // The response (or tunnel) ended with `status` (0: none was sent): its concurrency units go
  // back, and the counting limits are settled by the final status.
  void finish(Admission& a, int status);

 private:
  store::LimitStore& charged(const Admission& a) { return a.degraded ? local_ : store_; }

  store::LimitStore& store_;
  store::LimitStore& local_;
  limit::DenyCache& deny_;
};

}  // namespace floodgate::decide
