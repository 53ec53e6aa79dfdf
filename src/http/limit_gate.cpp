#include "limit_gate.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/field.hpp>

#include <charconv>

#include "floodgate/keys/client_ip.hpp"
#include "forwarding.hpp"
#include "request_sources.hpp"

namespace floodgate::http {

namespace bhttp = boost::beast::http;

namespace {

Answer refusal(const config::Limit& l, const limit::Params& p, const limit::Decision& d,
               limit::Micros now, const GateInput& in) {
  AnswerWriter w(429, in.version, in.keep_alive);
  limit::rate_headers(
      l, p, d, now, [&w](std::string_view name, std::string_view value) { w.header(name, value); });
  return std::move(w).finish("application/json", limit::refusal_body(l, d) + "\n");
}

// The route's on_store_error when the store could not decide.
boost::asio::awaitable<std::optional<store::Outcome>> degraded(WorkerContext& w,
                                                               const config::Config& c,
                                                               const config::Route& route,
                                                               limit::Plan& plan,
                                                               admin::RouteMetrics& stats) {
  switch (route.on_store_error) {
    case config::OnStoreError::fail_open:
      stats.count(admin::Outcome::store_error_open);
      co_return std::nullopt;
    case config::OnStoreError::fail_closed:
      stats.count(admin::Outcome::store_error_closed);
      co_return std::nullopt;
    case config::OnStoreError::local:
      stats.count(admin::Outcome::local);
      for (auto& item : plan.items) {
        item.params = limit::divided(item.params, c.store.instances);
        // A cost the divided share can never hold would be refused for the whole outage.
        item.cost = std::min(item.cost, item.params.capacity);
      }
      {
        auto local = co_await w.local->acquire(plan.items, boost::asio::use_awaitable);
        if (auto* o = std::get_if<store::Outcome>(&local)) co_return std::move(*o);
        co_return std::nullopt;  // the in-process store cannot fail; if it did, fail open
      }
  }
  co_return std::nullopt;
}

}  // namespace

keys::KeyHasher& hasher_for(WorkerContext& w, const config::Config& c) {
  static constexpr std::string_view kBuiltInSecret =
      "floodgate built-in key secret: set store.key_secret";
  std::string_view secret = c.store.key_secret.empty() ? kBuiltInSecret : c.store.key_secret;
  if (!w.hasher || w.hasher->secret() != secret)
    w.hasher = std::make_unique<keys::KeyHasher>(secret);
  return *w.hasher;
}

boost::asio::awaitable<GateResult> apply_limits(WorkerContext& w, const config::Config& config,
                                                const config::Route& route, const GateInput& in) {
  GateResult out;
  auto& stats = w.route_stats(route.name);
  FieldHeaders headers(in.fields);
  const auto now = w.clock.now();
  LazyClaims claims(in.fields, config, now / limit::kMicrosPerSecond);
  const auto& ip = config.server.client_ip;
  keys::RequestFacts facts{
      route.name, in.method, in.host,
      in.path,    in.query,  keys::client_ip(in.peer, joined_values(in.fields, ip.header, ","), ip),
      &headers,   &claims};
  auto plan = limit::plan(config, route, facts, hasher_for(w, config));
  if (plan.reject_status != 0) {
    stats.count(admin::Outcome::rejected);
    out.admission.decision = "rejected";
    out.admission.limit = plan.rejected_by->name;
    auto status =
        plan.reject_status == 401 ? bhttp::status::unauthorized : bhttp::status::bad_request;
    out.answer = error_response(status, in.version, in.keep_alive);
    co_return out;
  }
  if (plan.items.empty()) co_return out;
  for (auto& item : plan.items)
    if (item.params.algorithm == config::Algorithm::concurrency ||
        item.params.algorithm == config::Algorithm::sliding_log) {
      auto lease = w.lease_prefix + std::to_string(++w.lease_seq);
      for (auto& i : plan.items) i.lease = lease;
      break;
    }

  out.admission.key = plan.items.front().key;
  if (auto hit = w.deny.check(plan.items, now)) {
    stats.count(admin::Outcome::limited);
    stats.deny_cache_hits.fetch_add(1, std::memory_order_relaxed);
    out.admission.decision = "limited";
    out.admission.limit = plan.limits[hit->item]->name;
    out.answer =
        refusal(*plan.limits[hit->item], plan.items[hit->item].params, hit->decision, now, in);
    co_return out;
  }
  const auto started = std::chrono::steady_clock::now();
  auto result = co_await w.store->acquire(plan.items, boost::asio::use_awaitable);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  (config.store.backend == config::StoreBackend::memory ? w.metrics.decision_memory
                                                        : w.metrics.decision_redis)
      .observe(took.count());
  std::optional<store::Outcome> outcome;
  out.admission.store = w.store.get();
  if (auto* e = std::get_if<store::StoreError>(&result)) {
    w.log.debug("store error on route {}: {}", route.name, store::to_string(*e));
    w.metrics.store_errors[static_cast<std::size_t>(*e)].fetch_add(1, std::memory_order_relaxed);
    out.admission.store = w.local.get();
    out.admission.decision = to_string(route.on_store_error);
    outcome = co_await degraded(w, config, route, plan, stats);
    if (!outcome) {
      if (route.on_store_error == config::OnStoreError::fail_closed) {
        out.answer =
            error_response(bhttp::status::service_unavailable, in.version, in.keep_alive, "1");
      }
      co_return out;
    }
  } else {
    outcome = std::get<store::Outcome>(std::move(result));
  }

  auto v = limit::verdict(plan, *outcome);
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (!plan.items[i].enforce && !outcome->decisions[i].admitted) {
      stats.count(admin::Outcome::shadow_limited);
      w.log.debug("shadow limit {} of route {} would refuse", plan.limits[i]->name, route.name);
    }
  if (v.shown >= 0) out.admission.limit = plan.limits[v.shown]->name;
  if (!v.admitted && v.shown < 0) {
    // A store that says "refused" without an enforcing refusal is inconsistent: fail safe.
    out.answer = error_response(bhttp::status::service_unavailable, in.version, in.keep_alive, "1");
    co_return out;
  }
  if (!v.admitted) {
    stats.count(admin::Outcome::limited);
    out.admission.decision = "limited";
    w.deny.remember(plan.items[v.shown], v.decision, now);
    out.answer = refusal(*plan.limits[v.shown], plan.items[v.shown].params, v.decision,
                         outcome->now != 0 ? outcome->now : now, in);
    co_return out;
  }
  w.deny.admitted(plan.items, outcome->decisions, now);
  if (route.on_store_error != config::OnStoreError::local || out.admission.store != w.local.get()) {
    stats.count(admin::Outcome::admitted);
    out.admission.decision = "admitted";
  }
  // Reset times are counted from the store's clock (Redis's TIME), not this PoP's.
  const auto decided_at = outcome->now != 0 ? outcome->now : now;
  if (v.shown >= 0)
    out.admission.headers = limit::rate_headers(*plan.limits[v.shown], plan.items[v.shown].params,
                                                v.decision, decided_at);
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    if (!outcome->decisions[i].admitted) continue;  // not charged: nothing to return or settle
    if (plan.items[i].params.algorithm == config::Algorithm::concurrency)
      out.admission.leases.push_back(plan.items[i]);
    if (!plan.limits[i]->settle_header.empty())
      out.admission.settles.push_back(
          {plan.items[i], plan.limits[i]->settle_header, plan.items[i].cost});
  }
  co_return out;
}

void settle_from_response(const Admission& a, const bhttp::fields& response,
                          limit::DenyCache& deny) {
  for (const auto& s : a.settles) {
    auto it = response.find(s.header);
    if (it == response.end()) continue;
    std::string_view v = it->value();
    std::int64_t actual = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), actual);
    if (ec != std::errc{} || p != v.data() + v.size() || actual < 0) continue;  // changes nothing
    if (actual == s.charged || !a.store) continue;
    a.store->adjust(s.item, actual - s.charged);
    // A refund may make room the deny cache does not know about (it may hold "refused until
    // refill" from this very admission, which took the last unit).
    if (actual < s.charged) deny.forget(s.item.key);
  }
}

}  // namespace floodgate::http
