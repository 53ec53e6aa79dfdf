#pragma once
// Between routing and forwarding: applies a route's limits to one exchange. Either the
// request is answered here (400 / 401 / 429 / 503, as a Reply) or admitted, with the headers
// the response will carry and what it owes the store afterwards (settlement, lease release).
// One per worker, built with everything it uses; nothing on the request path looks anything
// up by name.

#include <spdlog/logger.h>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/fields.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exchange.hpp"
#include "floodgate/decide/decider.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/limit/deny_cache.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/limit_store.hpp"
#include "reply.hpp"
#include "top_board.hpp"

namespace floodgate::http {

class LimitGate {
 public:
  // `store`: the configured backend; `local`: the in-process one, for on_store_error: local.
  // `lease_prefix` ("<instance>:<worker>:") makes lease ids unique across instances.
  // `overrides`: the instance's per-caller overrides (admin API), or null.
  LimitGate(std::unique_ptr<store::LimitStore> store, std::unique_ptr<store::LimitStore> local,
            metrics::Metrics& metrics, spdlog::logger& log, std::string lease_prefix,
            const limit::OverrideBoard* overrides = nullptr);
  LimitGate(const LimitGate&) = delete;
  LimitGate& operator=(const LimitGate&) = delete;

  // Decides `x` (routed, gated(x)) at x.arrived: its lists, then its limits; fills
  // x.admission. A reply when the request is answered here instead of forwarded.
  boost::asio::awaitable<std::optional<Reply>> decide(Exchange& x);

  // The upstream's response head arrived: true costs from its settle headers are settled
  // (and cached refusals a refund made untrue forgotten), and noted for the access log.
  void settle(Exchange& x, const boost::beast::http::fields& response);
  // The same for the settles read from trailers (`trailers`) or from the head, with the
  // response's field named `name` (any case) looked up by `field`.
  using FieldLookup = std::function<std::optional<std::string_view>(std::string_view name)>;
  void settle(Exchange& x, bool trailers, const FieldLookup& field);

  // A routed request no limit or list applies to (not gated(x)): counted as unlimited.
  void count_ungated(const Exchange& x);
  // A status floodgate answered itself to `x` (null, or not routed: counted without a route).
  void count_own_status(const Exchange* x, int status);

  // The response's status is known (x.status, as its head goes to the client): what a counting
  // limit took is given back unless it counts that status. Called again when the status
  // changes (an answer of ours after all, or 0 for none), it charges or refunds the difference.
  void count_status(Exchange& x);
  // The response (or tunnel) ended, with x.status (0: none was sent): its concurrency units go
  // back, and the counting limits are settled by the final status (count_status).
  void finish(Exchange& x);

  // The key hasher under the snapshot's key_secret (rebuilt when the secret changes).
  keys::KeyHasher& hasher(const config::Config& c) { return decider_.hasher(c); }

  bool store_healthy() const { return store_->healthy(); }
  // Drain: leased units go back to the store; `done` once they reached it.
  void close_store(std::function<void()> done) { store_->close(std::move(done)); }

  // The admin API's /keys: a caller's state in the store (a decision of cost 0, never from a
  // lease), or its state reset; `forget` drops a key from this worker's deny cache.
  boost::asio::awaitable<store::AcquireResult> inspect(store::Item item);
  void reset(const store::Item& item);
  void forget(const std::string& key) { deny().forget(key); }
  // The override `c`'s requests under `key` get now, or null.
  const limit::CallerOverride* override_of(const config::ConfigPtr& c, const std::string& key,
                                           limit::Micros now);

  // This worker's top offenders of `current`'s limits at `now`, appended to `out` (on the
  // worker's loop).
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
  // x's route's counters, bound or not (never rebinds).
  metrics::RouteMetrics& route_cells(const Exchange& x);
  // Counts the request's callers in their limits' top offenders: refused by the limits whose
  // decision in `outcome` refused, or (a deny cache answer, no outcome) by item `refused_item`.
  // Holds a request an on_exceed: delay limit admitted into its allowance for `delay`.
  boost::asio::awaitable<void> hold(limit::Micros delay);
  void count_callers(const Exchange& x, const limit::Plan& plan, const keys::RequestFacts& facts,
                     const store::Outcome* outcome, int refused_item = -1);
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
  store::LimitStore& charged_store(const Admission& a) { return a.degraded ? *local_ : *store_; }
  boost::asio::awaitable<std::optional<store::Outcome>> degraded(const config::Config& c,
                                                                 const config::Route& route,
                                                                 limit::Plan& plan,
                                                                 metrics::RouteMetrics& stats);

  std::unique_ptr<store::LimitStore> store_;
  std::unique_ptr<store::LimitStore> local_;
  metrics::Metrics& metrics_;
  spdlog::logger& log_;
  limit::DenyCache& deny() { return decider_.deny_cache(); }

  decide::Decider decider_;
  Bound bound_;
  TopBoard top_;
  const limit::OverrideBoard* board_ = nullptr;
  Overrides overrides_;
};

}  // namespace floodgate::http
