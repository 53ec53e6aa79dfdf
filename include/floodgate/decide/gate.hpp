#pragma once
// Between routing and forwarding: a route's lists and limits applied to one Inquiry. The
// Decider rules what needs no store; the rest is asked of the store at once, the route's
// on_store_error taking over when the store cannot answer, and an on_exceed: delay admission
// held here until its allowance. The answer is a Reply (403 / 400 / 401 / 429 / 503) or an
// admission, with what the request then owes the store (paid by the Ledger). One per worker,
// on its loop; protocol-free, so every front (and Envoy's RLS) decides through it.

#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "floodgate/decide/admission.hpp"
#include "floodgate/decide/decider.hpp"
#include "floodgate/decide/ledger.hpp"
#include "floodgate/decide/reply.hpp"
#include "floodgate/decide/top_board.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/limit_store.hpp"

namespace floodgate::decide {

class Gate {
 public:
  // `store`: the configured backend; `local`: the in-process one, for on_store_error: local;
  // both outlive the gate. `lease_prefix` ("<instance>:<worker>:") makes lease ids unique
  // across instances. `overrides`: the instance's per-caller overrides (admin API), or null.
  Gate(store::LimitStore& store, store::LimitStore& local, metrics::Metrics& metrics,
       spdlog::logger& log, std::string lease_prefix,
       const limit::OverrideBoard* overrides = nullptr);
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Decides `q` (q.config is `snapshot`'s, q.route set, q.facts filled; complete() is done
  // here): its lists, then its limits; fills `a`. A reply when the request is answered
  // instead of forwarded.
  boost::asio::awaitable<std::optional<Reply>> decide(const config::ConfigPtr& snapshot, Inquiry& q,
                                                      Admission& a);
  // A plan made elsewhere (an RLS call's descriptors: each item tagged with the index of its
  // facts in `facts`), decided on `route` as decide() decides a route's: the deny cache, the
  // store, on_store_error, the counts. The answer is decide()'s; `decided` (when given) gets
  // each item's decision (none when the store failed open or closed).
  boost::asio::awaitable<std::optional<Reply>> decide_plan(
      const config::ConfigPtr& snapshot, const config::Route& route, limit::Plan& plan,
      limit::Micros now, std::span<const keys::RequestFacts> facts, Admission& a,
      store::Outcome* decided = nullptr);
  // A plan made elsewhere readied as a route's is (Decider::ready): the caller overrides of
  // `c` (admin API) applied, a lease id when one is needed. `ask` when the store is to decide.
  Ruling ready(const config::ConfigPtr& c, limit::Plan& plan, limit::Micros now) {
    return decider_.ready(plan, board_ ? &overrides(c) : nullptr, now);
  }
  // Settles what admitted requests owe.
  Ledger& ledger() { return ledger_; }

  // A routed request no limit or list applies to: counted as unlimited.
  void count_ungated(const config::Config& c, const config::Route& route);
  // A status floodgate answered itself on `route` of `c` (either null: counted without one).
  void count_own_status(const config::Config* c, const config::Route* route, int status);

  // The key hasher under the snapshot's key_secret (rebuilt when the secret changes).
  keys::KeyHasher& hasher(const config::Config& c) { return decider_.hasher(c); }
  // The admin API's: drops a key from this worker's deny cache (reset here or elsewhere).
  void forget(const std::string& key) { decider_.deny_cache().forget(key); }
  // The override `c`'s requests under `key` get now, or null.
  const limit::CallerOverride* override_of(const config::ConfigPtr& c, const std::string& key,
                                           limit::Micros now);
  // This worker's top offenders of `current`'s limits at `now`, appended to `out`.
  void top(const config::Config& current, limit::Micros now, std::vector<limit::LimitTop>& out);

 private:
  // The metric cells of one config snapshot's routes, resolved when a request first brings
  // that snapshot (the registry's lock is taken then, never per request).
  struct Bound {
    config::ConfigPtr config;  // held, so that a new snapshot is never mistaken for this one
    std::vector<metrics::RouteMetrics*> routes;  // by route index
    metrics::Histogram* decision = nullptr;      // seconds per store decision, by backend
    // By route index, then limit index: each limit's top offenders; empty when none are kept.
    std::vector<std::vector<limit::TopWindow*>> top;
    // By route index, then limit index: each leased limit's counters (null: not leased).
    std::vector<std::vector<metrics::LeaseCounters*>> leases;
    // By route index, then limit index: each limit's refusals.
    std::vector<std::vector<metrics::LimitCounters*>> limits;
  };
  const Bound& bind(const config::ConfigPtr& c);
  // A route's counters, bound or not (never rebinds).
  metrics::RouteMetrics& route_cells(const config::Config& c, const config::Route& route);

  // The answer of a ruling that needs no store.
  std::optional<Reply> ruled(Ruling ruling, const limit::Plan& plan, metrics::RouteMetrics& stats,
                             Admission& a);
  // The store's outcome made an answer, or an admission (with a.delayed to hold for).
  std::optional<Reply> concluded(const config::Route& route, limit::Micros now,
                                 const limit::Plan& plan, const store::Outcome& outcome,
                                 metrics::RouteMetrics& stats, bool cacheable, Admission& a);
  void admitted(const limit::Plan& plan, const store::Outcome& outcome, const limit::Verdict& v,
                limit::Micros decided_at, Admission& a);
  // The route's on_store_error when the store could not decide.
  boost::asio::awaitable<std::optional<store::Outcome>> degraded(const config::Config& c,
                                                                 const config::Route& route,
                                                                 limit::Plan& plan,
                                                                 metrics::RouteMetrics& stats);
  // Holds a request an on_exceed: delay limit admitted into its allowance for `delay`.
  boost::asio::awaitable<void> hold(limit::Micros delay);
  // Counts the request's callers in their limits' top offenders: refused by the limits whose
  // decision in `outcome` refused, or (a deny cache answer, no outcome) by item `refused_item`.
  // Whose items a plan's are: the facts of item i are facts[tag] (one: every item's).
  struct Callers {
    const config::ConfigPtr& snapshot;
    const config::Route& route;
    limit::Micros now;
    std::span<const keys::RequestFacts> facts;
  };
  void count_callers(const Callers& c, const limit::Plan& plan, const store::Outcome* outcome,
                     int refused_item = -1);

  // The overrides by store key under one snapshot and one version of the board: rebuilt when
  // either changes (keys depend on the routes and the key secret).
  struct Overrides {
    bool built = false;
    std::uint64_t version = 0;
    config::ConfigPtr config;
    std::shared_ptr<const limit::OverrideList> list;  // what `index` points into
    limit::OverrideIndex index;
  };
  const limit::OverrideIndex& overrides(const config::ConfigPtr& c);
  limit::DenyCache& deny() { return decider_.deny_cache(); }

  store::LimitStore& store_;
  store::LimitStore& local_;
  metrics::Metrics& metrics_;
  spdlog::logger& log_;
  Decider decider_;
  Ledger ledger_;
  Bound bound_;
  TopBoard top_;
  const limit::OverrideBoard* board_ = nullptr;
  Overrides overrides_;
};

}  // namespace floodgate::decide
