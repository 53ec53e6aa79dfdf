#pragma once
// Decides logged requests under one config, offline: the config's own router, key builder
// and limit policy, the embedded store, and a virtual clock set to each request's time.
// Nothing is slept or waited for; a day of traffic takes seconds.

#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/decide/decider.hpp"
#include "floodgate/decide/descriptor_plan.hpp"
#include "floodgate/decide/top_board.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/limit/policy.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/memory_store.hpp"
#include "log_record.hpp"
#include "top_keys.hpp"

namespace floodgate::replay {

class LeaseFleet;

// `--lease`: how requests reach the simulated instances.
enum class Spread {
  client,   // by the client's address: a caller stays at one instance (as anycast routes it)
  request,  // one request to each in turn: every key at every instance, the worst case
  log,      // the i-th log given is instance i (mod the number of instances)
};
const char* to_string(Spread s);

struct LeaseSimulation {
  std::size_t instances = 0;  // 0: leases ignored, every limit decided exactly
  Spread spread = Spread::client;
};

// `--lease`, a leased limit: what the simulated instances did with it.
struct LeaseReport {
  std::int64_t size = 0;
  std::int64_t bound = 0;     // the published early-refusal bound for these instances
  std::string terms;          // how it is made up: "(3 - 1) x 50 + 3 x 50"
  std::uint64_t refused = 0;  // requests a lease refused (enforced or shadow)
  // The most units the exact limit had free, given every request the leases admitted, when a
  // lease refused: the early refusal, at most `bound`.
  std::int64_t most_free_at_refusal = 0;
  // Requests admitted that the exact limit, given every admission, would refuse: 0 by design.
  std::uint64_t over_admitted = 0;
  // Grants, units granted and returned, requests decided from units in hand.
  std::shared_ptr<metrics::LeaseCounters> counters = std::make_shared<metrics::LeaseCounters>();
};

struct LimitReport {
  std::string route;
  std::string limit;
  bool shadow = false;
  std::uint64_t seen = 0;            // requests this limit was applied to
  std::uint64_t refused = 0;         // requests refused because of it
  std::uint64_t shadow_refused = 0;  // shadow mode: would have refused
  std::vector<std::uint32_t> refused_by_minute;
  TopCounter refused_keys{512};
  TopCounter shadow_refused_keys{512};  // shadow mode: callers it would have refused
  TopPeaks closest;                     // peak share of the quota in use, among admitted requests
  // The heaviest callers by requests, with their refusals: the view /top gives live.
  limit::HeavyHitters callers;
  std::optional<LeaseReport> lease;  // --lease, a leased limit
  // `rollout: P%`: refusals (enforced or shadowed) by the key's rollout bucket, one slot per
  // percent (limit::rollout_bucket / 100), so that the refusals at any share are a prefix sum.
  int rollout_basis_points = 10000;
  std::vector<std::uint64_t> refused_by_rollout_percent;
  // What enforcing it for `percent` of its keys would have refused (1-100).
  std::uint64_t refused_at(int percent) const {
    std::uint64_t n = 0;
    for (int i = 0; i < percent && i < static_cast<int>(refused_by_rollout_percent.size()); ++i)
      n += refused_by_rollout_percent[static_cast<std::size_t>(i)];
    return n;
  }
  // The busiest callers' summary sized as /top's (decide::TopBoard): `top` sets how many are
  // shown, not how right they are.
  explicit LimitReport(std::size_t top) : closest(top), callers(decide::TopBoard::counters(top)) {}
};

struct ConfigReport {
  std::string label;  // "candidate" / "baseline"
  std::string file;
  LeaseSimulation simulation;  // --lease: the instances this config was decided by
  std::uint64_t requests = 0;
  std::uint64_t unmatched = 0;    // no route: a 404 under this config
  std::uint64_t rejected = 0;     // 401/400 before any limit (missing key part, bad cost)
  std::uint64_t denied = 0;       // 403: on a deny list
  std::uint64_t allowed = 0;      // on an allow list, or exempt: admitted without the limits
  std::uint64_t refused = 0;      // 429
  std::uint64_t shadow_only = 0;  // admitted, but a shadow limit would have refused
  std::vector<std::uint32_t> refused_by_minute;
  std::vector<std::vector<LimitReport>> limits;  // [route][limit], config order
  std::vector<std::string> missing_inputs;       // inputs the limits need, absent from the log
};

enum class Verdict { admitted, refused, rejected, denied, unmatched };

struct Decision {
  Verdict verdict = Verdict::admitted;
  const config::Route* route = nullptr;
  const config::Limit* limit = nullptr;  // the refusing (or rejecting) limit
  std::string key;                       // its caller, as text (only when refused)
};

// Store keys by a fast hash: a replay's keys never leave it. But a limit being rolled out places
// a key by its store key (limit::rollout_bucket), which live holds the caller's HMAC under
// store.key_secret: to pick the very callers the proxy picked, a run with a rollout in any of
// its configs keys them all as the proxy does.
keys::KeyHasher::Kind key_hash_for(const std::vector<const config::Config*>& configs);

class Replayer {
 public:
  // With `lease.instances` > 0, leased limits are decided by that many simulated instances
  // (lease_fleet.hpp); otherwise every limit exactly.
  // `key_hash`: how store keys are hashed (key_hash_for: the same for every config of a run,
  // so that a store's evictions follow the same keys).
  Replayer(config::ConfigPtr config, std::string label, std::string file, std::size_t top,
           LeaseSimulation lease = {},
           keys::KeyHasher::Kind key_hash = keys::KeyHasher::Kind::offline);
  ~Replayer();

  // Decides `r` at `now` (monotonic across calls). `minute` indexes the per-minute series.
  Decision decide(const LogRecord& r, limit::Micros now, std::size_t minute);
  // Which inputs the limits read that no logged request carried (call at the end).
  void finish(std::uint64_t lines_with_fields, const std::vector<std::string>& inputs_seen);
  // Per-caller overrides (the admin API's), applied to every request from now on.
  void set_overrides(limit::OverrideList list);
  const ConfigReport& report() const { return report_; }
  const config::Config& config() const { return *config_; }
  std::size_t live_keys() const { return state_.size(); }

 private:
  struct Release {
    limit::Micros at;
    store::Item item;
    bool operator>(const Release& o) const { return at > o.at; }
  };
  static std::string caller_text(const config::Limit& l, const keys::RequestFacts& facts);
  // The simulated instance a request reaches.
  std::size_t instance_of(const LogRecord& r);
  // An RLS call's line (fields rls:domain, rls:N...): its descriptors planned as the RLS
  // listener plans them (decide/descriptor_plan.hpp).
  Decision decide_call(const LogRecord& r, std::string_view domain, limit::Micros now,
                       std::size_t minute);
  // The store's decision on `plan` (the lease fleet's under --lease) and the report's
  // counts; `facts` are the request's (one) or each descriptor's (items' tags).
  Decision charge(const LogRecord& r, const config::Route& route, limit::Plan& plan,
                  std::span<const keys::RequestFacts> facts, limit::Micros now, std::size_t minute);
  // --lease: a decided request's leased items held against the exact limit (check_).
  void check_leases(const limit::Plan& plan, std::vector<LimitReport>& limits,
                    const config::Route& route, std::size_t instance);

  config::ConfigPtr config_;
  limit::OverrideList override_list_;
  limit::OverrideIndex overrides_;  // points into override_list_
  limit::FakeClock clock_;          // the virtual clock: set to each request's time before deciding
  store::MemoryState state_;
  decide::Decider decider_;  // offline keys (a fast hash) but for rollouts, lease ids "replay:N"
  std::priority_queue<Release, std::vector<Release>, std::greater<>> releases_;
  ConfigReport report_;
  std::string query_;            // scratch: a query string rebuilt from logged query: fields
  std::string path_;             // scratch: a logged path in normal form
  limit::Plan plan_;             // scratch, reused by every decision: no allocation per request
  decide::DescriptorCall call_;  // scratch: an RLS line's descriptors
  std::string call_text_;        // their decoded domain, keys and values
  struct LoggedDescriptor {      // an RLS line's rls:N, rls:N:hits, rls:N:limit
    std::optional<std::string_view> entries, hits, own;
  };
  std::vector<LoggedDescriptor> logged_;
  decide::DescriptorPlan planned_;  // scratch: their plan
  store::Outcome outcome_;
  // --lease: the instances, and an exact store that decides only what the leases admitted.
  std::unique_ptr<LeaseFleet> fleet_;
  std::unique_ptr<store::MemoryState> check_;
  std::uint64_t dealt_ = 0;  // Spread::request's turn
};

// Adds `n` at `minute` of a per-minute series, growing it as needed (bounded by the caller).
void bump(std::vector<std::uint32_t>& series, std::size_t minute, std::uint32_t n = 1);

}  // namespace floodgate::replay
