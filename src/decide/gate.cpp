#include "floodgate/decide/gate.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>

#include "floodgate/config/loader.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see http/h2_stream.cpp
#endif

namespace floodgate::decide {

namespace {

std::size_t index_of(const config::Config& c, const config::Route& route) {
  return static_cast<std::size_t>(&route - c.routes.data());
}

// A place among the requests held (server.max_delayed), taken before the store is asked (a
// check, then an increment after the answer, would let every request in flight past the
// bound) and kept only while this one waits.
class HeldPlace {
 public:
  HeldPlace() = default;
  HeldPlace(const HeldPlace&) = delete;
  HeldPlace& operator=(const HeldPlace&) = delete;
  ~HeldPlace() {
    if (held_) held_->fetch_sub(1, std::memory_order_relaxed);
  }
  // False when the plan may delay and no place is free: its delay limits then refuse
  // (max_delay 0), an answer that is not the key's usual one.
  bool take(limit::Plan& plan, std::atomic<std::int64_t>& held, std::int64_t bound) {
    if (std::none_of(plan.items.begin(), plan.items.end(),
                     [](const store::Item& i) { return i.params.max_delay > 0; }))
      return true;
    if (held.fetch_add(1, std::memory_order_relaxed) < bound) {
      held_ = &held;
      return true;
    }
    held.fetch_sub(1, std::memory_order_relaxed);
    for (auto& item : plan.items) item.params.max_delay = 0;
    return false;
  }

 private:
  std::atomic<std::int64_t>* held_ = nullptr;
};

// What a deny-cache answer tells a caller that wants every item's decision: item `refused`
// refused as remembered, the others not asked (nothing was charged).
store::Outcome cached_refusal(std::size_t items, std::size_t refused, const limit::Decision& d,
                              limit::Micros now) {
  store::Outcome o;
  o.now = now;
  o.decisions.assign(items, {});
  for (std::size_t i = 0; i < items; ++i) o.decisions[i].admitted = i != refused;
  o.decisions[refused] = d;
  return o;
}

}  // namespace

Gate::Gate(store::LimitStore& store, store::LimitStore& local, metrics::Metrics& metrics,
           spdlog::logger& log, std::string lease_prefix, const limit::OverrideBoard* overrides)
    : store_(store),
      local_(local),
      metrics_(metrics),
      log_(log),
      decider_(keys::KeyHasher::Kind::hmac, std::move(lease_prefix)),
      ledger_(store, local, decider_.deny_cache()),
      board_(overrides) {}

const Gate::Bound& Gate::bind(const config::ConfigPtr& c) {
  if (bound_.config == c) return bound_;
  bound_.config = c;
  bound_.routes.clear();
  for (const auto& route : c->routes) bound_.routes.push_back(&metrics_.route(route.name));
  bound_.decision = c->store.backend == config::StoreBackend::memory ? &metrics_.decision_memory
                                                                     : &metrics_.decision_redis;
  bound_.leases.clear();
  bound_.limits.clear();
  std::string leased;  // every leased limit's definition: what the store may hold units of
  for (const auto& route : c->routes) {
    auto& refusals = bound_.limits.emplace_back();
    auto& leases = bound_.leases.emplace_back();
    for (const auto& limit : route.limits) {
      refusals.push_back(&metrics_.limit(route.name, limit.name));
      const bool leases_units = limit.lease && c->store.backend != config::StoreBackend::memory;
      leases.push_back(leases_units ? &metrics_.lease(route.name, limit.name) : nullptr);
      if (leases_units) leased += config::lease_definition(c->store, route, limit) + "\n";
    }
  }
  store_.reconfigured(leased);
  bound_.top.clear();
  if (c->admin.keeps_top())
    for (const auto& route : c->routes) {
      auto& windows = bound_.top.emplace_back();
      for (const auto& limit : route.limits) windows.push_back(&top_.window(*c, route, limit));
    }
  return bound_;
}

const limit::OverrideIndex& Gate::overrides(const config::ConfigPtr& c) {
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

const limit::CallerOverride* Gate::override_of(const config::ConfigPtr& c, const std::string& key,
                                               limit::Micros now) {
  return overrides(c).find(key, now);
}

void Gate::count_callers(const Callers& c, const limit::Plan& plan, const store::Outcome* outcome,
                         int refused_item) {
  // Bound again: a reload may have come while this request waited for the store.
  const auto& b = bind(c.snapshot);
  if (b.top.empty()) return;
  const auto& route = c.route;
  const auto& windows = b.top[index_of(*c.snapshot, route)];
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto& limit = *plan.limits[i];
    auto& window = *windows[static_cast<std::size_t>(&limit - route.limits.data())];
    bool fresh = false;
    auto& e = window.at(c.now).add(limit::key_id(plan.items[i].key), 1, fresh);
    const auto& facts = c.facts.size() > 1 ? c.facts[plan.items[i].tag] : c.facts.front();
    if (fresh) keys::append_caller_text(e.caller, limit, facts);
    const bool refused = outcome ? i < outcome->decisions.size() && !outcome->decisions[i].admitted
                                 : static_cast<int>(i) == refused_item;
    if (refused) ++(plan.items[i].enforce ? e.refused : e.shadow_refused);
  }
}

metrics::RouteMetrics& Gate::route_cells(const config::Config& c, const config::Route& route) {
  // Without binding: a request of an older snapshot must not rebuild the gate's tables (and
  // give its leases back) for a count; the registry's lock is taken then, rarely.
  if (&c == bound_.config.get()) return *bound_.routes[index_of(c, route)];
  return metrics_.route(route.name);
}

void Gate::count_ungated(const config::Config& c, const config::Route& route) {
  route_cells(c, route).count(metrics::Outcome::unlimited);
}

void Gate::count_own_status(const config::Config* c, const config::Route* route, int status) {
  if (!c || !route) {
    metrics::count_own_status(metrics_.unrouted_statuses, status);
    return;
  }
  metrics::count_own_status(route_cells(*c, *route).own_statuses, status);
}

void Gate::top(const config::Config& current, limit::Micros now,
               std::vector<limit::LimitTop>& out) {
  if (top_.snapshot(current, now, out)) bound_ = {};  // its window pointers went with them
}

boost::asio::awaitable<std::optional<store::Outcome>> Gate::degraded(const config::Config& c,
                                                                     const config::Route& route,
                                                                     limit::Plan& plan,
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
        auto local = co_await local_.acquire(plan.items, boost::asio::use_awaitable);
        if (auto* o = std::get_if<store::Outcome>(&local)) co_return std::move(*o);
        stats.count(metrics::Outcome::local);
        co_return std::nullopt;  // the in-process store cannot fail; if it did, fail open
      }
  }
  co_return std::nullopt;
}

std::optional<Reply> Gate::ruled(Ruling ruling, const limit::Plan& plan,
                                 metrics::RouteMetrics& stats, Admission& a) {
  switch (ruling) {
    case Ruling::denied:
      stats.count(metrics::Outcome::denied);
      a.decision = "denied";
      return Reply{403};
    case Ruling::allowed:
      stats.count(metrics::Outcome::allowed);
      a.decision = "allowed";
      return std::nullopt;
    case Ruling::exempt:
      stats.count(metrics::Outcome::allowed);
      a.decision = "exempt";
      return std::nullopt;
    case Ruling::unlimited:
      stats.count(metrics::Outcome::unlimited);
      return std::nullopt;
    case Ruling::rejected:
      stats.count(metrics::Outcome::rejected);
      a.decision = "rejected";
      a.limit = plan.rejected_by->name;
      return Reply{plan.reject_status};
    case Ruling::ask:
      break;
  }
  return std::nullopt;
}

boost::asio::awaitable<std::optional<Reply>> Gate::decide(const config::ConfigPtr& snapshot,
                                                          Inquiry& q, Admission& a) {
  complete(q);
  const auto& route = *q.route;
  limit::Plan plan;
  const auto ruling = decider_.rule(q, plan, board_ ? &overrides(snapshot) : nullptr);
  if (ruling != Ruling::ask)
    co_return ruled(ruling, plan, *bind(snapshot).routes[index_of(*snapshot, route)], a);
  co_return co_await decide_plan(snapshot, route, plan, q.now, {&q.facts, 1}, a);
}

boost::asio::awaitable<std::optional<Reply>> Gate::decide_plan(
    const config::ConfigPtr& snapshot, const config::Route& route, limit::Plan& plan,
    limit::Micros now, std::span<const keys::RequestFacts> facts, Admission& a,
    store::Outcome* decided) {
  const auto& config = *snapshot;
  const auto& bound = bind(snapshot);
  const auto ri = index_of(config, route);
  auto& stats = *bound.routes[ri];
  // Taken now: another request may bind a newer snapshot while this one awaits the store.
  auto* decision_seconds = bound.decision;
  const Callers callers{snapshot, route, now, facts};
  // Pointers to the cells themselves, taken now: `bound` may be rebuilt (a reload, /top)
  // while this request waits for the store.
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto li = static_cast<std::size_t>(plan.limits[i] - route.limits.data());
    plan.items[i].leased.counters = bound.leases[ri][li];
    plan.items[i].refusals = bound.limits[ri][li];
  }
  a.key = plan.items.front().key;
  if (auto hit = deny().check(plan.items, now)) {
    stats.count(metrics::Outcome::limited);
    stats.deny_cache_hits.fetch_add(1, std::memory_order_relaxed);
    plan.items[hit->item].refusals->refused.fetch_add(1, std::memory_order_relaxed);
    count_callers(callers, plan, nullptr, static_cast<int>(hit->item));
    a.decision = "limited";
    a.limit = plan.limits[hit->item]->name;
    if (decided)
      *decided = cached_refusal(plan.items.size(), hit->item, hit->decision, hit->store_now);
    co_return refused(route, *plan.limits[hit->item], plan.items[hit->item].params, hit->decision,
                      hit->store_now);
  }
  HeldPlace place;
  // No place to wait: the answer is not this key's usual one, and not for the deny cache.
  const bool cacheable = place.take(plan, metrics_.delayed_now, config.server.max_delayed);
  const auto started = std::chrono::steady_clock::now();
  auto result = co_await store_.acquire(plan.items, boost::asio::use_awaitable);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  decision_seconds->observe(took.count());
  std::optional<store::Outcome> outcome;
  if (auto* e = std::get_if<store::StoreError>(&result)) {
    log_.debug("store error on route {}: {}", route.name, store::to_string(*e));
    metrics_.store_errors[static_cast<std::size_t>(*e)].fetch_add(1, std::memory_order_relaxed);
    a.degraded = true;
    a.decision = to_string(route.on_store_error);
    outcome = co_await degraded(config, route, plan, stats);
    count_callers(callers, plan, outcome ? &*outcome : nullptr);
    if (!outcome && route.on_store_error == config::OnStoreError::fail_closed)
      co_return Reply{503, "1"};
    if (!outcome) co_return std::nullopt;
  } else {
    outcome = std::get<store::Outcome>(std::move(result));
    count_callers(callers, plan, &*outcome);
  }
  auto reply = concluded(route, now, plan, *outcome, stats, cacheable, a);
  if (decided) *decided = *outcome;
  if (!reply && a.delayed > 0) co_await hold(a.delayed);  // `place` is given back after it
  co_return reply;
}

std::optional<Reply> Gate::concluded(const config::Route& route, limit::Micros now,
                                     const limit::Plan& plan, const store::Outcome& outcome,
                                     metrics::RouteMetrics& stats, bool cacheable, Admission& a) {
  const auto conclusion = Decider::conclude(plan, outcome);
  const auto& v = conclusion.verdict;
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (!plan.items[i].enforce && !outcome.decisions[i].admitted) {
      plan.items[i].refusals->shadow_refused.fetch_add(1, std::memory_order_relaxed);
      if (a.shadow_limit.empty()) a.shadow_limit = plan.limits[i]->name;
      log_.debug("shadow limit {} of route {} would refuse", plan.limits[i]->name, route.name);
    }
  if (v.shown >= 0) a.limit = plan.limits[v.shown]->name;
  // A store that says "refused" without an enforcing refusal is inconsistent: fail safe.
  if (conclusion.inconsistent) {
    stats.count(metrics::Outcome::store_error_closed);
    return Reply{503, "1"};
  }
  // Reset times are counted from the store's clock (Redis's TIME), not this PoP's.
  const auto decided_at = outcome.now != 0 ? outcome.now : now;
  if (!v.admitted) {
    stats.count(metrics::Outcome::limited);
    plan.items[v.shown].refusals->refused.fetch_add(1, std::memory_order_relaxed);
    a.decision = "limited";
    if (cacheable) deny().remember(plan.items[v.shown], v.decision, now, decided_at);
    return refused(route, *plan.limits[v.shown], plan.items[v.shown].params, v.decision,
                   decided_at);
  }
  if (cacheable) deny().admitted(plan.items, outcome.decisions, now, decided_at);
  // One outcome per request: a degraded admission is its policy's, one a shadow limit would
  // have refused is shadow_limited.
  if (a.degraded) {
    if (route.on_store_error == config::OnStoreError::local) stats.count(metrics::Outcome::local);
  } else {
    stats.count(conclusion.shadow_refused ? metrics::Outcome::shadow_limited
                                          : metrics::Outcome::admitted);
    a.decision = "admitted";
  }
  admitted(plan, outcome, v, decided_at, a);
  return std::nullopt;
}

void Gate::admitted(const limit::Plan& plan, const store::Outcome& outcome, const limit::Verdict& v,
                    limit::Micros decided_at, Admission& a) {
  if (v.shown >= 0 && a.wants_headers)
    a.headers = limit::rate_headers(*plan.limits[v.shown], plan.items[v.shown].params, v.decision,
                                    decided_at);
  limit::after_response(
      plan, outcome, [&](std::size_t i) { a.leases.push_back(plan.items[i]); },
      [&](std::size_t i) {
        const auto& l = *plan.limits[i];
        a.settles.push_back({plan.items[i], l.settle_header, plan.items[i].cost,
                             l.settle_from_trailer, l.count ? &*l.count : nullptr});
      });
  // Taken into a delay allowance: held until the units have refilled, then forwarded.
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (plan.items[i].enforce) a.delayed = std::max(a.delayed, outcome.decisions[i].delay);
}

boost::asio::awaitable<void> Gate::hold(limit::Micros delay) {
  metrics_.delayed_total.fetch_add(1, std::memory_order_relaxed);
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                  std::chrono::microseconds(delay));
  co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
}

}  // namespace floodgate::decide
