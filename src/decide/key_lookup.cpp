#include "floodgate/decide/key_lookup.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>

#include "floodgate/keys/caller_key.hpp"
#include "floodgate/store/limit_store.hpp"

namespace floodgate::decide {

namespace json = boost::json;

namespace {

KeyAnswer error(int status, std::string message) {
  return {status, json::serialize(json::object{{"error", std::move(message)}}) + "\n", ""};
}

std::int64_t seconds_up(limit::Micros us) {
  return (us + limit::kMicrosPerSecond - 1) / limit::kMicrosPerSecond;
}

// A caller's state: a decision of cost 0, never from a lease.
boost::asio::awaitable<store::AcquireResult> inspect(store::LimitStore& store, store::Item item) {
  item.cost = 0;
  item.leased = {};
  item.take_up_to = 0;
  const bool concurrency = item.params.algorithm == config::Algorithm::concurrency;
  std::vector<store::Item> one;  // (GCC 12 takes no braced list inside a co_await)
  one.push_back(item);
  auto result = co_await store.acquire(std::move(one), boost::asio::use_awaitable);
  // A concurrency probe holds a slot like any request: given back at once.
  if (auto* o = std::get_if<store::Outcome>(&result); o && concurrency && o->admitted)
    store.release(item);
  co_return result;
}

}  // namespace

boost::asio::awaitable<KeyAnswer> answer_key_request(Gate& gate, store::LimitStore& store,
                                                     const config::ConfigPtr& c, limit::Micros now,
                                                     const KeyRequest& r) {
  if (r.route.empty() || r.limit.empty() || r.caller.empty())
    co_return error(
        400, "route, limit and key are required: /keys?route=R&limit=L&key=ip%3D203.0.113.7");
  const config::Route* route = nullptr;
  for (const auto& rt : c->routes)
    if (rt.name == r.route) route = &rt;
  if (!route) co_return error(404, "no route named \"" + r.route + "\"");
  const config::Limit* limit = nullptr;
  for (const auto& l : route->limits)
    if (l.name == r.limit) limit = &l;
  if (!limit) co_return error(404, "route " + r.route + " has no limit named \"" + r.limit + "\"");
  auto k = keys::caller_key(c->store.key_prefix, *route, *limit, r.caller, gate.hasher(*c));
  if (k.key.empty()) co_return error(400, "key: " + k.error);

  store::Item item;
  item.key = k.key;
  item.params = limit::Params::from(*limit, limit->params);
  const auto* o = gate.override_of(c, item.key, now);
  if (o && !o->exempt) item.params = limit::with_quota(item.params, o->quota);
  json::object out{{"route", route->name},
                   {"limit", limit->name},
                   {"key", r.caller},
                   {"store_key", item.key},
                   {"algorithm", config::to_string(limit->algorithm)}};
  if (o) out["override"] = limit::to_json_object(*o);
  if (r.reset) {
    // A concurrency count is requests in flight: forgetting them would admit a second full
    // set at once, and their releases would then eat into the new count.
    if (limit->algorithm == config::Algorithm::concurrency)
      co_return error(409,
                      "a concurrency limit counts requests in flight; it frees itself as "
                      "they end and cannot be reset");
    store.reset(item);
    gate.forget(item.key);
    out["reset"] = true;
    co_return KeyAnswer{200, json::serialize(out) + "\n", item.key};
  }
  // A look is a decision of cost 0, which stores the refilled state under the parameters it is
  // given: a tiered limit's would be the caller's tier's, which only its token says.
  if (limit->overrides)
    co_return error(409, "limit " + limit->name + " has tiers chosen by " +
                             limit->overrides->by.text +
                             ": its state is not looked up here (DELETE resets it)");
  item.lease = "admin-probe:" + std::to_string(now);  // concurrency: given back at once
  auto result = co_await inspect(store, item);
  if (auto* e = std::get_if<store::StoreError>(&result))
    co_return error(503, std::string("the store did not answer: ") + store::to_string(*e));
  const auto& outcome = std::get<store::Outcome>(result);
  if (outcome.decisions.empty()) co_return error(503, "the store gave no decision");
  const auto& d = outcome.decisions.front();
  out["quota"] = d.limit;
  out["remaining"] = std::max<std::int64_t>(0, d.remaining);  // as the rate headers show it
  out["reset_seconds"] = seconds_up(d.reset_after);
  co_return KeyAnswer{200, json::serialize(out) + "\n", item.key};
}

}  // namespace floodgate::decide
