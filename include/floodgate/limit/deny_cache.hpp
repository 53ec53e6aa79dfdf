#pragma once
// Callers already refused, remembered by one worker until their Retry-After passes, so a
// flood from one key costs the store nothing. It can refuse a little early (a smaller cost
// might have fit), never admit too much. Entries carry a fingerprint of the limit's
// parameters: a reload that changes the limit makes them stale.

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "floodgate/store/item.hpp"

namespace floodgate::limit {

class DenyCache {
 public:
  DenyCache() = default;
  explicit DenyCache(std::size_t max_entries) : max_entries_(max_entries) {}

  struct Hit {
    std::size_t item = 0;  // which of the items is refused
    Decision decision;     // with retry_after and reset_after counted from `now`
    // `now` on the store's clock (Redis's TIME) as it stood against this PoP's when the
    // refusal was learnt: what the reset headers count from, as for the store's own answers.
    Micros store_now = 0;
  };
  // When a remembered refusal runs out, exactly one request (the probe) goes to the store;
  // the others keep being refused until its answer arrives or kProbeWindow passes, so a flood
  // whose Retry-After just ended does not become a stampede of store calls.
  std::optional<Hit> check(const std::vector<store::Item>& items, Micros now);
  // `store_now`: the store's clock at the decision (Outcome::now; 0: this PoP's `now`).
  void remember(const store::Item& item, const Decision& d, Micros now, Micros store_now = 0);
  // The store admitted these items: their probes (if any) are over. An item whose decision
  // carries a retry_after (the admission took its last unit) is remembered as refused until
  // then, so the requests right behind it do not all go to the store to learn that.
  void admitted(const std::vector<store::Item>& items, const std::vector<Decision>& decisions,
                Micros now, Micros store_now = 0);
  static constexpr Micros kProbeWindow = 100'000;
  std::uint64_t hits() const { return hits_; }
  // A refusal that is no longer true (a settlement refunded what the request was refused
  // for): the next request goes to the store.
  void forget(const std::string& key);
  std::size_t size() const { return map_.size(); }

 private:
  struct Entry {
    Micros until = 0;
    Micros reset_at = 0;
    Decision decision;
    std::uint64_t fingerprint = 0;
    Micros probe_until = 0;  // a probe is in flight until then
    Micros store_ahead = 0;  // the store's clock less this PoP's, when it was learnt
  };
  static std::uint64_t fingerprint(const store::Item& item);

  std::size_t max_entries_ = 100'000;
  using Map = std::unordered_map<std::string, Entry>;
  Map map_;
  std::uint64_t hits_ = 0;
};

}  // namespace floodgate::limit
