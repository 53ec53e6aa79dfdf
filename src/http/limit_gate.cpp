#include "limit_gate.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>

#include "floodgate/config/loader.hpp"
#include "floodgate/uri/host.hpp"
#include "pipeline.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

LimitGate::LimitGate(std::unique_ptr<store::LimitStore> store,
                     std::unique_ptr<store::LimitStore> local, metrics::Metrics& metrics,
                     spdlog::logger& log, std::string lease_prefix,
                     const limit::OverrideBoard* overrides)
    : store_(std::move(store)),
      local_(std::move(local)),
      metrics_(metrics),
      log_(log),
      decider_(keys::KeyHasher::Kind::hmac, std::move(lease_prefix)),
      board_(overrides) {}

const LimitGate::Bound& LimitGate::bind(const config::ConfigPtr& c) {
  if (bound_.config == c) return bound_;
  bound_.config = c;
  bound_.routes.clear();
  for (const auto& route : c->routes) bound_.routes.push_back(&metrics_.route(route.name));
  bound_.decision = c->store.backend == config::StoreBackend::memory ? &metrics_.decision_memory
                                                                     : &metrics_.decision_redis;
  bound_.leases.clear();
  bound_.limits.clear();
  for (const auto& route : c->routes) {
    auto& cells = bound_.limits.emplace_back();
    for (const auto& limit : route.limits) cells.push_back(&metrics_.limit(route.name, limit.name));
  }
  std::string leased;  // every leased limit's definition: what the store may hold units of
  for (const auto& route : c->routes) {
    auto& cells = bound_.leases.emplace_back();
    for (const auto& limit : route.limits) {
      const bool leases = limit.lease && c->store.backend != config::StoreBackend::memory;
      cells.push_back(leases ? &metrics_.lease(route.name, limit.name) : nullptr);
      if (leases) leased += config::lease_definition(c->store, route, limit) + "\n";
    }
  }
  store_->reconfigured(leased);
  bound_.top.clear();
  if (c->admin.keeps_top())
    for (const auto& route : c->routes) {
      auto& windows = bound_.top.emplace_back();
      for (const auto& limit : route.limits) windows.push_back(&top_.window(*c, route, limit));
    }
  return bound_;
}

const limit::OverrideIndex& LimitGate::overrides(const config::ConfigPtr& c) {
  auto& o = overrides_;
  const auto version = board_ ? board_->version() : 0;
  if (o.built && o.version == version && o.config == c) return o.index;
  // What the deny cache remembers of a key whose override came or went is no longer true.
  for (const auto& [key, found] : o.index.keys()) deny().forget(key);
  o.built = true;
  o.version = version;
  o.config = c;
  o.list = board_ ? board_->get() : std::make_shared<const limit::OverrideList>();
  o.index.build(*c, *o.list, hasher(*c));
  for (const auto& [key, found] : o.index.keys()) deny().forget(key);
  if (board_)  // keys reset on another instance: what this worker remembers of them is untrue
    for (const auto& key : *board_->resets()) deny().forget(key);
  return o.index;
}

const limit::CallerOverride* LimitGate::override_of(const config::ConfigPtr& c,
                                                    const std::string& key, limit::Micros now) {
  return overrides(c).find(key, now);
}

boost::asio::awaitable<store::AcquireResult> LimitGate::inspect(store::Item item) {
  item.cost = 0;
  item.leased = {};
  item.take_up_to = 0;
  const bool concurrency = item.params.algorithm == config::Algorithm::concurrency;
  std::vector<store::Item> one;  // (GCC 12 takes no braced list inside a co_await)
  one.push_back(item);
  auto result = co_await store_->acquire(std::move(one), boost::asio::use_awaitable);
  // A concurrency probe holds a slot like any request: given back at once.
  if (auto* o = std::get_if<store::Outcome>(&result); o && concurrency && o->admitted)
    store_->release(item);
  co_return result;
}

void LimitGate::reset(const store::Item& item) {
  store_->reset(item);
  deny().forget(item.key);
}

void LimitGate::count_callers(const Exchange& x, const limit::Plan& plan,
                              const keys::RequestFacts& facts, const store::Outcome* outcome,
                              int refused_item) {
  // Bound again: a reload may have come while this request waited for the store.
  const auto& b = bind(x.config);
  if (b.top.empty()) return;
  const auto& route = *x.route;
  const auto& windows = b.top[static_cast<std::size_t>(&route - x.config->routes.data())];
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto& limit = *plan.limits[i];
    auto& window = *windows[static_cast<std::size_t>(&limit - route.limits.data())];
    bool fresh = false;
    auto& e = window.at(x.arrived).add(limit::key_id(plan.items[i].key), 1, fresh);
    if (fresh) keys::append_caller_text(e.caller, limit, facts);
    const bool refused = outcome ? i < outcome->decisions.size() && !outcome->decisions[i].admitted
                                 : static_cast<int>(i) == refused_item;
    if (refused) ++(plan.items[i].enforce ? e.refused : e.shadow_refused);
  }
}

metrics::RouteMetrics& LimitGate::route_cells(const Exchange& x) {
  // Without binding: a request of an older snapshot must not rebuild the gate's tables (and
  // give its leases back) for a count; the registry's lock is taken then, rarely.
  if (x.config == bound_.config)
    return *bound_.routes[static_cast<std::size_t>(x.route - x.config->routes.data())];
  return metrics_.route(x.route->name);
}

void LimitGate::count_ungated(const Exchange& x) {
  route_cells(x).count(metrics::Outcome::unlimited);
}

void LimitGate::count_own_status(const Exchange* x, int status) {
  if (!x || !x->route || !x->config) {
    metrics::count_own_status(metrics_.unrouted_statuses, status);
    return;
  }
  metrics::count_own_status(route_cells(*x).own_statuses, status);
}

void LimitGate::top(const config::Config& current, limit::Micros now,
                    std::vector<limit::LimitTop>& out) {
  if (top_.snapshot(current, now, out)) bound_ = {};  // its window pointers went with them
}

// The route's on_store_error when the store could not decide.
boost::asio::awaitable<std::optional<store::Outcome>> LimitGate::degraded(
    const config::Config& c, const config::Route& route, limit::Plan& plan,
    metrics::RouteMetrics& stats) {
  switch (route.on_store_error) {
    case config::OnStoreError::fail_open:
      stats.count(metrics::Outcome::store_error_open);
      co_return std::nullopt;
    case config::OnStoreError::fail_closed:
      stats.count(metrics::Outcome::store_error_closed);
      co_return std::nullopt;
    case config::OnStoreError::local:  // counted once decided: local, or limited
      for (auto& item : plan.items) {
        item.params = limit::divided(item.params, c.store.instances);
        // A cost the divided share can never hold would be refused for the whole outage.
        item.cost = std::min(item.cost, item.params.capacity);
      }
      {
        auto local = co_await local_->acquire(plan.items, boost::asio::use_awaitable);
        if (auto* o = std::get_if<store::Outcome>(&local)) co_return std::move(*o);
        stats.count(metrics::Outcome::local);
        co_return std::nullopt;  // the in-process store cannot fail; if it did, fail open
      }
  }
  co_return std::nullopt;
}

boost::asio::awaitable<std::optional<Reply>> LimitGate::decide(Exchange& x) {
  const auto& config = *x.config;
  const auto& route = *x.route;
  const auto& bound = bind(x.config);
  auto& stats = *bound.routes[static_cast<std::size_t>(&route - config.routes.data())];
  // Taken now: another request may bind a newer snapshot while this one awaits the store.
  auto* decision_seconds = bound.decision;
  auto& a = x.admission;
  const auto now = x.arrived;
  FieldHeaders headers(*x.fields);
  // Routes compare the host case-insensitively and keys lower-case it: the name part is enough.
  decide::Inquiry q{
      &config, &route,
      keys::RequestFacts{route.name, x.method, uri::host_name(x.host), x.target.path,
                         x.target.query, client_of(x), &headers, &claims_of(x), x.tls_fingerprints},
      now};
  decide::complete(q);
  const auto& facts = q.facts;
  limit::Plan plan;
  switch (decider_.rule(q, plan, board_ ? &overrides(x.config) : nullptr)) {
    case decide::Ruling::denied:
      stats.count(metrics::Outcome::denied);
      a.decision = "denied";
      co_return Reply{403};
    case decide::Ruling::allowed:
      stats.count(metrics::Outcome::allowed);
      a.decision = "allowed";
      co_return std::nullopt;
    case decide::Ruling::exempt:
      stats.count(metrics::Outcome::allowed);
      a.decision = "exempt";
      co_return std::nullopt;
    case decide::Ruling::unlimited:
      stats.count(metrics::Outcome::unlimited);
      co_return std::nullopt;
    case decide::Ruling::rejected:
      if (x.claims && x.claims->error() != keys::JwtError::none)  // why, for whoever debugs it
        log_.debug("route {}: limit {} rejected the request ({}): JWT {}", route.name,
                   plan.rejected_by->name, plan.reject_status, keys::to_string(x.claims->error()));
      stats.count(metrics::Outcome::rejected);
      a.decision = "rejected";
      a.limit = plan.rejected_by->name;
      co_return Reply{plan.reject_status};
    case decide::Ruling::ask:
      break;
  }
  {
    // Pointers to the cells themselves, taken now: `bound` may be rebuilt (a reload, /top)
    // while this request waits for the store.
    const auto ri = static_cast<std::size_t>(&route - config.routes.data());
    for (std::size_t i = 0; i < plan.items.size(); ++i) {
      const auto li = static_cast<std::size_t>(plan.limits[i] - route.limits.data());
      plan.items[i].leased.counters = bound.leases[ri][li];
      plan.items[i].refusals = bound.limits[ri][li];
    }
  }
  auto limit_cell = [&](std::size_t item) -> metrics::LimitCounters& {
    return *plan.items[item].refusals;
  };

  a.key = plan.items.front().key;
  if (auto hit = deny().check(plan.items, now)) {
    stats.count(metrics::Outcome::limited);
    stats.deny_cache_hits.fetch_add(1, std::memory_order_relaxed);
    limit_cell(hit->item).refused.fetch_add(1, std::memory_order_relaxed);
    count_callers(x, plan, facts, nullptr, static_cast<int>(hit->item));
    a.decision = "limited";
    a.limit = plan.limits[hit->item]->name;
    co_return refused(route, *plan.limits[hit->item], plan.items[hit->item].params, hit->decision,
                      now);
  }
  // A place among the requests held (server.max_delayed), taken before the store is asked
  // (a check, then an increment after the answer, would let every request in flight past the
  // bound) and kept only while this one waits; none free: delay limits refuse.
  struct HeldPlace {
    std::atomic<std::int64_t>* held = nullptr;
    ~HeldPlace() {
      if (held) held->fetch_sub(1, std::memory_order_relaxed);
    }
  } place;
  bool no_places = false;  // its answer is not this key's usual one: not for the deny cache
  if (std::any_of(plan.items.begin(), plan.items.end(),
                  [](const store::Item& i) { return i.params.max_delay > 0; })) {
    if (metrics_.delayed_now.fetch_add(1, std::memory_order_relaxed) < config.server.max_delayed) {
      place.held = &metrics_.delayed_now;
    } else {
      metrics_.delayed_now.fetch_sub(1, std::memory_order_relaxed);
      for (auto& item : plan.items) item.params.max_delay = 0;
      no_places = true;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  auto result = co_await store_->acquire(plan.items, boost::asio::use_awaitable);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  decision_seconds->observe(took.count());
  std::optional<store::Outcome> outcome;
  if (auto* e = std::get_if<store::StoreError>(&result)) {
    log_.debug("store error on route {}: {}", route.name, store::to_string(*e));
    metrics_.store_errors[static_cast<std::size_t>(*e)].fetch_add(1, std::memory_order_relaxed);
    a.degraded = true;
    a.decision = to_string(route.on_store_error);
    outcome = co_await degraded(config, route, plan, stats);
    count_callers(x, plan, facts, outcome ? &*outcome : nullptr);
    if (!outcome) {
      if (route.on_store_error == config::OnStoreError::fail_closed) co_return Reply{503, "1"};
      co_return std::nullopt;
    }
  } else {
    outcome = std::get<store::Outcome>(std::move(result));
    count_callers(x, plan, facts, &*outcome);
  }

  const auto conclusion = decide::Decider::conclude(plan, *outcome);
  const auto& v = conclusion.verdict;
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (!plan.items[i].enforce && !outcome->decisions[i].admitted) {
      limit_cell(i).shadow_refused.fetch_add(1, std::memory_order_relaxed);
      if (a.shadow_limit.empty()) a.shadow_limit = plan.limits[i]->name;
      log_.debug("shadow limit {} of route {} would refuse", plan.limits[i]->name, route.name);
    }
  if (v.shown >= 0) a.limit = plan.limits[v.shown]->name;
  // A store that says "refused" without an enforcing refusal is inconsistent: fail safe.
  if (conclusion.inconsistent) {
    stats.count(metrics::Outcome::store_error_closed);
    co_return Reply{503, "1"};
  }
  // Reset times are counted from the store's clock (Redis's TIME), not this PoP's.
  const auto decided_at = outcome->now != 0 ? outcome->now : now;
  if (!v.admitted) {
    stats.count(metrics::Outcome::limited);
    limit_cell(static_cast<std::size_t>(v.shown)).refused.fetch_add(1, std::memory_order_relaxed);
    a.decision = "limited";
    if (!no_places) deny().remember(plan.items[v.shown], v.decision, now);
    co_return refused(route, *plan.limits[v.shown], plan.items[v.shown].params, v.decision,
                      decided_at);
  }
  if (!no_places) deny().admitted(plan.items, outcome->decisions, now);
  // One outcome per request: a degraded admission is its policy's, one a shadow limit would
  // have refused is shadow_limited.
  if (a.degraded) {
    if (route.on_store_error == config::OnStoreError::local) stats.count(metrics::Outcome::local);
  } else {
    stats.count(conclusion.shadow_refused ? metrics::Outcome::shadow_limited
                                          : metrics::Outcome::admitted);
    a.decision = "admitted";
  }
  if (v.shown >= 0)
    a.headers = limit::rate_headers(*plan.limits[v.shown], plan.items[v.shown].params, v.decision,
                                    decided_at);
  limit::after_response(
      plan, *outcome, [&](std::size_t i) { a.leases.push_back(plan.items[i]); },
      [&](std::size_t i) {
        const auto& l = *plan.limits[i];
        a.settles.push_back({plan.items[i], l.settle_header, plan.items[i].cost,
                             l.settle_from_trailer, l.count ? &*l.count : nullptr});
      });
  // Taken into a delay allowance: held until the units have refilled, then forwarded.
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (plan.items[i].enforce) a.delayed = std::max(a.delayed, outcome->decisions[i].delay);
  if (a.delayed > 0) co_await hold(a.delayed);  // `place` is given back after it
  co_return std::nullopt;
}

boost::asio::awaitable<void> LimitGate::hold(limit::Micros delay) {
  metrics_.delayed_total.fetch_add(1, std::memory_order_relaxed);
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                  std::chrono::microseconds(delay));
  co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
}

void LimitGate::settle(Exchange& x, const boost::beast::http::fields& response) {
  if (x.admission.settles.empty()) return;  // most responses: no lookup built for nothing
  settle(x, false, [&](std::string_view name) -> std::optional<std::string_view> {
    auto it = response.find(name);
    if (it == response.end()) return std::nullopt;
    return it->value();
  });
}

void LimitGate::settle(Exchange& x, bool trailers, const FieldLookup& field) {
  const auto& a = x.admission;
  const bool noted = x.config->log.access_log && !x.config->log.replay_fields.empty();
  for (const auto& s : a.settles) {
    if (s.count || s.from_trailer != trailers) continue;  // a count settles at the end
    auto value = field(s.header);
    if (!value) continue;
    if (noted) {
      std::string name = s.header;
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      x.settled.emplace_back(std::move(name), std::string(*value));
    }
    auto actual = limit::settled_cost(*value);
    if (!actual || *actual == s.charged) continue;  // changes nothing
    charged_store(a).adjust(s.item, *actual - s.charged);
    // A refund may make room the deny cache does not know about (it may hold "refused until
    // refill" from this very admission, which took the last unit).
    if (*actual < s.charged) deny().forget(s.item.key);
  }
}

void LimitGate::count_status(Exchange& x) {
  auto& a = x.admission;
  for (auto& s : a.settles) {
    if (!s.count || s.charged == 0) continue;
    const bool counted = s.count->contains(x.status);
    if (counted == s.holding) continue;
    charged_store(a).adjust(s.item, counted ? s.charged : -s.charged);
    s.holding = counted;
  }
}

void LimitGate::finish(Exchange& x) {
  const auto& a = x.admission;
  for (const auto& lease : a.leases) charged_store(a).release(lease);
  count_status(x);
}

}  // namespace floodgate::http
