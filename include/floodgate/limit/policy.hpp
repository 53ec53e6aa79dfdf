#pragma once
// A route's limits applied to one request: which store items to acquire (keys, parameters,
// costs), and what the store's answer means for the client (admitted or refused, and the
// limit whose numbers go into the headers).

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/store/item.hpp"

namespace floodgate::limit {

struct Plan {
  std::vector<const config::Limit*> limits;  // parallel to items
  std::vector<store::Item> items;
  int reject_status = 0;  // 400 (a bad cost header) or 401 (a missing key part): answer at once
  const config::Limit* rejected_by = nullptr;
};

// Builds the items for `route`: keys (or on_missing_key), tier parameters, costs. Limits
// skipped by on_missing_key: skip do not appear.
Plan plan(const config::Config& config, const config::Route& route,
          const keys::RequestFacts& request, keys::KeyHasher& hasher);
// The same into `out`, reusing its storage (a replay plans millions of requests).
void plan_into(Plan& out, const config::Config& config, const config::Route& route,
               const keys::RequestFacts& request, keys::KeyHasher& hasher);

// An item of limit `l` under `params` (its own, or a tier's) costing `cost`, its key already
// built: the parameters, the rollout, the lease terms.
void fill_item(store::Item& item, const config::Limit& l, const config::LimitParams& params,
               std::int64_t cost);

// `divisor` > 1 gives each instance ceil(limit / divisor), for the `local` fallback.
Params divided(const Params& p, int divisor);

struct Verdict {
  bool admitted = true;
  int shown = -1;  // index into the plan's items of the limit whose headers are sent; -1: none
  Decision decision;
};

// Refused: the enforcing limit that refused with the longest wait. Admitted: the enforcing
// limit closest to refusal (least remaining, then the longest until whole). Shadow limits
// never appear.
Verdict verdict(const Plan& plan, const store::Outcome& outcome);

// A request whose concurrency unit must be returned, or whose sliding_log entry may be
// refunded, needs an id of its own that its items share (Redis lease and log member ids).
bool needs_lease(const Plan& plan);
void set_lease(Plan& plan, const std::string& id);

// A store key's place in a limit's rollout, 0-9999, the same in every instance and run (the key
// carries the keyed hash of the caller): `rollout: P%` enforces the keys below P x 100, so
// raising P only adds keys.
int rollout_bucket(std::string_view key);
inline bool enforced(const config::Limit& l, std::string_view key) {
  return l.mode == config::LimitMode::enforce &&
         (l.rollout_basis_points >= 10000 || rollout_bucket(key) < l.rollout_basis_points);
}

// The charged items an admitted request still owes something after its response: `release`
// gets each concurrency item (its unit returns when the response ends), `settle` each item of
// a limit with a settle_header (its true cost comes in the response) or a count (it is
// charged only if the response's status is one it counts).
template <typename Release, typename Settle>
void after_response(const Plan& plan, const store::Outcome& outcome, Release&& release,
                    Settle&& settle) {
  for (std::size_t i = 0; i < plan.items.size() && i < outcome.decisions.size(); ++i) {
    if (!outcome.decisions[i].admitted) continue;  // not charged: nothing to return or settle
    if (plan.items[i].params.algorithm == config::Algorithm::concurrency) release(i);
    if (!plan.limits[i]->settle_header.empty() || plan.limits[i]->count) settle(i);
  }
}

// A settle header's value: the true cost, a non-negative integer and nothing else. Anything
// else changes nothing.
std::optional<std::int64_t> settled_cost(std::string_view value);

// Response header fields a decision adds, in order: every name and value in one buffer, so
// the five rate-limit headers of an admitted request cost one allocation, not ten.
class HeaderList {
 public:
  using value_type = std::pair<std::string_view, std::string_view>;
  void add(std::string_view name, std::string_view value);
  std::size_t size() const { return at_.size(); }
  bool empty() const { return at_.empty(); }
  value_type operator[](std::size_t i) const {
    const auto& a = at_[i];
    return {std::string_view(text_).substr(a.name, a.name_len),
            std::string_view(text_).substr(a.value, a.value_len)};
  }
  class iterator {
   public:
    iterator(const HeaderList& h, std::size_t i) : h_(&h), i_(i) {}
    value_type operator*() const { return (*h_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const HeaderList* h_;
    std::size_t i_;
  };
  iterator begin() const { return {*this, 0}; }
  iterator end() const { return {*this, size()}; }

 private:
  struct At {
    std::uint32_t name, name_len, value, value_len;  // offsets into text_
  };
  std::string text_;
  boost::container::small_vector<At, 6> at_;
};

// X-RateLimit-Limit/-Remaining/-Reset, RateLimit-Policy, RateLimit, and Retry-After when
// refused. `now` is the Unix time of the decision.
HeaderList rate_headers(const config::Limit& limit, const Params& params, const Decision& d,
                        Micros now);
// The same headers, handed one by one to `emit` (no list is built).
using HeaderSink = std::function<void(std::string_view name, std::string_view value)>;
void rate_headers(const config::Limit& limit, const Params& params, const Decision& d, Micros now,
                  const HeaderSink& emit);

// {"error":"rate_limited","limit":"...","retry_after":N}
std::string refusal_body(const config::Limit& limit, const Decision& d);

// Whole seconds a client is told to wait: at least 1.
std::int64_t retry_after_seconds(const Decision& d);

}  // namespace floodgate::limit
