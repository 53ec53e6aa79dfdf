#include "rls_call.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "floodgate/config/bounds.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/policy.hpp"
#include "rls/rls.pb.h"

namespace floodgate::rls {
namespace {

using Response = wire::RateLimitResponse;
using Unit = wire::RateLimitResponse::RateLimit::Unit;

std::int64_t override_seconds(wire::OverrideUnit u) {
  switch (u) {
    case wire::OVERRIDE_SECOND:
      return 1;
    case wire::OVERRIDE_MINUTE:
      return 60;
    case wire::OVERRIDE_HOUR:
      return 3600;
    case wire::OVERRIDE_DAY:
      return 86400;
    case wire::OVERRIDE_MONTH:
      return 30 * 86400;
    case wire::OVERRIDE_YEAR:
      return 365 * 86400;
    default:
      return 0;
  }
}

// Why `req` cannot be decided (INVALID_ARGUMENT), or empty.
std::string invalid(const wire::RateLimitRequest& req) {
  if (req.domain().empty()) return "domain must not be empty";
  if (req.descriptors_size() == 0) return "descriptors must not be empty";
  for (int i = 0; i < req.descriptors_size(); ++i) {
    const auto& d = req.descriptors(i);
    const std::string at = "descriptors[" + std::to_string(i) + "]";
    if (d.entries_size() == 0) return at + " has no entries";
    for (int j = 0; j < d.entries_size(); ++j)
      if (d.entries(j).key().empty())
        return at + ".entries[" + std::to_string(j) + "] has an empty key";
    // An enum keeps any number it was sent: every value but the six units is refused.
    if (d.has_limit() && override_seconds(d.limit().unit()) == 0)
      return at + ".limit has no unit of second, minute, hour, day, month or year";
  }
  return "";
}

// The rule `desc` gets in `d` (-1: none): each entry looked up by key and value, then by the
// value patterns in order, then by key; the rule of the node the last entry leads to.
int match(const config::RlsDomain& d, const wire::RateLimitDescriptor& desc) {
  std::size_t at = 0;
  for (const auto& e : desc.entries()) {
    const auto& node = d.nodes[at];
    std::optional<std::size_t> next;
    if (!node.exact.empty())
      if (auto it = node.exact.find({e.key(), e.value()}); it != node.exact.end())
        next = it->second;
    for (std::size_t p = 0; !next && p < node.patterns.size(); ++p)
      if (node.patterns[p].key == e.key() && e.value().starts_with(node.patterns[p].prefix))
        next = node.patterns[p].node;
    if (!next)
      if (auto it = node.any.find(e.key()); it != node.any.end()) next = it->second;
    if (!next) return -1;
    at = *next;
  }
  return d.nodes[at].rule;
}

// A descriptor's cost: its hits_addend, else the request's, else 1 (0 is Envoy's "unset").
std::int64_t hits_of(const wire::RateLimitRequest& req, const wire::RateLimitDescriptor& d) {
  std::uint64_t h = 1;
  if (d.has_hits_addend() && d.hits_addend().value() > 0)
    h = d.hits_addend().value();
  else if (req.hits_addend() > 0)
    h = req.hits_addend();
  return static_cast<std::int64_t>(std::min<std::uint64_t>(h, config::kLargestLimit));
}

struct UnitLength {
  Unit unit;
  std::int64_t seconds;
};
// The units a rate is stated in, shortest first (a week only when it is exactly one).
constexpr UnitLength kUnits[] = {
    {Response::RateLimit::SECOND, 1},         {Response::RateLimit::MINUTE, 60},
    {Response::RateLimit::HOUR, 3600},        {Response::RateLimit::DAY, 86400},
    {Response::RateLimit::MONTH, 30 * 86400}, {Response::RateLimit::YEAR, 365 * 86400}};

// A limit's rate as `current_limit` states it: in the unit its window is, else the shortest
// unit that holds a whole number of requests, else the unit nearest its window.
void state_rate(const limit::Params& p, limit::Micros now, Response::RateLimit& out) {
  double count = static_cast<double>(p.capacity);
  double window = static_cast<double>(p.window) / 1e6;  // seconds
  if (p.algorithm == config::Algorithm::token_bucket || p.algorithm == config::Algorithm::gcra) {
    count = p.per_second;
    window = 1;
  } else if (p.algorithm == config::Algorithm::quota) {
    const auto span = p.span_at(now);
    window = static_cast<double>(span.end - span.start) / 1e6;
  }
  auto put = [&](Unit unit, double n) {
    out.set_unit(unit);
    out.set_requests_per_unit(
        static_cast<std::uint32_t>(std::clamp(std::llround(n), 0LL, 4294967295LL)));
  };
  if (window <= 0) return put(Response::RateLimit::SECOND, count);
  if (window == 604800) return put(Response::RateLimit::WEEK, count);
  for (const auto& u : kUnits)
    if (window == static_cast<double>(u.seconds)) return put(u.unit, count);
  const double per_second = count / window;
  for (const auto& u : kUnits) {
    const double n = per_second * static_cast<double>(u.seconds);
    if (n >= 1 && std::abs(n - std::round(n)) < 1e-9) return put(u.unit, n);
  }
  const UnitLength* nearest = &kUnits[0];
  for (const auto& u : kUnits)
    if (std::abs(std::log(static_cast<double>(u.seconds) / window)) <
        std::abs(std::log(static_cast<double>(nearest->seconds) / window)))
      nearest = &u;
  put(nearest->unit, per_second * static_cast<double>(nearest->seconds));
}

void set_duration(wire::Duration& d, limit::Micros micros) {
  d.set_seconds(micros / 1'000'000);
  d.set_nanos(static_cast<std::int32_t>(micros % 1'000'000) * 1000);
}

// What each descriptor is: not limited, unlimited, or limited by items of the plan.
enum class Kind { none, unlimited, limited };

// Descriptor `i`'s status from its items' decisions: refused when an enforcing one refused;
// the limit shown is the refusing one with the longest wait, else the one closest to refusal.
void status_of(std::uint32_t i, const limit::Plan& plan, const store::Outcome& outcome,
               limit::Micros now, Response::DescriptorStatus& st) {
  int shown = -1;
  bool refused = false;
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    if (plan.items[k].tag != i) continue;
    const auto& item = plan.items[k];
    if (k >= outcome.decisions.size()) {  // the store failed open: the limit, no numbers
      if (shown < 0) shown = static_cast<int>(k);
      continue;
    }
    const auto& dk = outcome.decisions[k];
    const bool refuses = item.enforce && !dk.admitted;
    if (shown < 0) {
      shown = static_cast<int>(k), refused = refuses;
      continue;
    }
    const auto& ds = outcome.decisions[static_cast<std::size_t>(shown)];
    const bool better = refuses ? (!refused || dk.retry_after > ds.retry_after)
                                : (!refused && item.enforce &&
                                   (!plan.items[static_cast<std::size_t>(shown)].enforce ||
                                    dk.remaining < ds.remaining));
    if (better) shown = static_cast<int>(k), refused = refuses;
  }
  st.set_code(refused ? Response::OVER_LIMIT : Response::OK);
  if (shown < 0) return;
  const auto& item = plan.items[static_cast<std::size_t>(shown)];
  auto& limit = *st.mutable_current_limit();
  state_rate(item.params, now, limit);
  limit.set_name(plan.limits[static_cast<std::size_t>(shown)]->name);
  if (static_cast<std::size_t>(shown) >= outcome.decisions.size()) return;
  const auto& d = outcome.decisions[static_cast<std::size_t>(shown)];
  st.set_limit_remaining(static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(refused ? 0 : d.remaining, 0, 4294967295LL)));
  const auto until = refused ? d.retry_after : d.reset_after;
  if (until > 0) set_duration(*st.mutable_duration_until_reset(), until);
}

}  // namespace

boost::asio::awaitable<Answer> should_rate_limit(decide::Gate& gate,
                                                 const config::ConfigPtr& snapshot,
                                                 std::string_view message, limit::Micros now,
                                                 CallRecord& record) {
  wire::RateLimitRequest req;
  if (!req.ParseFromArray(message.data(), static_cast<int>(message.size())))
    co_return Answer{GrpcCode::invalid_argument, "the message is not a RateLimitRequest", {}};
  if (auto why = invalid(req); !why.empty())
    co_return Answer{GrpcCode::invalid_argument, std::move(why), {}};
  record.domain = req.domain();
  const auto n = static_cast<std::size_t>(req.descriptors_size());
  Response res;
  res.set_overall_code(Response::OK);
  for (std::size_t i = 0; i < n; ++i) res.add_statuses()->set_code(Response::OK);
  const auto& config = *snapshot;
  const auto* domain = config.rls.domain(req.domain());
  if (!domain) {  // as envoyproxy/ratelimit: an unknown domain limits nothing
    Answer a;
    res.SerializeToString(&a.body);
    co_return a;
  }
  const auto& route = config.routes[domain->route];
  record.route = &route;

  // Each descriptor's rule, then `replaces` across the call's matched rules.
  std::vector<int> rules(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    if (!req.descriptors(static_cast<int>(i)).has_limit())
      rules[i] = match(*domain, req.descriptors(static_cast<int>(i)));
  std::set<std::string_view> replaced;
  for (int r : rules)
    if (r >= 0)
      for (const auto& name : domain->rules[static_cast<std::size_t>(r)].replaces)
        replaced.insert(name);
  for (auto& r : rules)
    if (r >= 0 && !domain->rules[static_cast<std::size_t>(r)].name.empty() &&
        replaced.count(domain->rules[static_cast<std::size_t>(r)].name))
      r = -1;

  // The plan: every limited descriptor's items, keyed by its entries (an override: by its
  // keys, values and rate, so that it never shares a counter with a configured limit).
  auto& hasher = gate.hasher(config);
  std::vector<std::vector<std::string_view>> values(n);
  std::vector<std::string> rates(n);
  std::vector<keys::RequestFacts> facts(n);
  std::vector<Kind> kinds(n, Kind::none);
  limit::Plan plan;
  const auto& ov_limit = route.limits[domain->override_limit];
  config::Limit keyed_override;  // the override limit with a key for this call's entries
  for (std::size_t i = 0; i < n; ++i) {
    const auto& d = req.descriptors(static_cast<int>(i));
    facts[i].route = route.name;
    const auto hits = hits_of(req, d);
    auto add = [&](const config::Limit& keyed, const config::Limit& counted,
                   const config::LimitParams& params) {
      auto& item = plan.items.emplace_back();
      keys::build_key_into(item.key, config.store.key_prefix, route, keyed, facts[i], hasher);
      limit::fill_item(item, counted, params, hits);
      item.tag = static_cast<std::uint32_t>(i);
      plan.limits.push_back(&counted);
    };
    if (d.has_limit()) {
      for (const auto& e : d.entries()) values[i].insert(values[i].end(), {e.key(), e.value()});
      rates[i] = std::to_string(d.limit().requests_per_unit()) + "/" +
                 std::to_string(override_seconds(d.limit().unit()));
      values[i].push_back(rates[i]);
      facts[i].descriptor = values[i];
      keyed_override.name = ov_limit.name;
      keyed_override.key.clear();
      for (std::size_t k = 0; k < values[i].size(); ++k)
        keyed_override.key.push_back({config::KeyPart::Kind::descriptor, std::to_string(k), {}});
      config::LimitParams params;
      params.limit = d.limit().requests_per_unit();
      params.window = std::chrono::seconds(override_seconds(d.limit().unit()));
      add(keyed_override, ov_limit, params);
      kinds[i] = Kind::limited;
      continue;
    }
    if (rules[i] < 0) continue;
    const auto& rule = domain->rules[static_cast<std::size_t>(rules[i])];
    if (rule.unlimited) {
      kinds[i] = Kind::unlimited;
      continue;
    }
    for (const auto& e : d.entries()) values[i].push_back(e.value());
    facts[i].descriptor = values[i];
    for (auto li : rule.limits) add(route.limits[li], route.limits[li], route.limits[li].params);
    kinds[i] = rule.limits.empty() ? Kind::none : Kind::limited;
  }

  store::Outcome outcome;
  bool over = false;
  if (!plan.items.empty() && gate.ready(snapshot, plan, now) == decide::Ruling::ask) {
    auto reply =
        co_await gate.decide_plan(snapshot, route, plan, now, facts, record.admission, &outcome);
    if (reply && reply->status != 429)
      co_return Answer{GrpcCode::unavailable,
                       "the limit store cannot decide (rls.on_store_error: fail_closed)",
                       {}};
    over = reply.has_value();
  }
  record.over_limit = over;
  const auto decided_at = outcome.now != 0 ? outcome.now : now;
  for (std::size_t i = 0; i < n; ++i) {
    auto& st = *res.mutable_statuses(static_cast<int>(i));
    if (kinds[i] == Kind::unlimited) st.set_limit_remaining(4294967295u);
    if (kinds[i] == Kind::limited)
      status_of(static_cast<std::uint32_t>(i), plan, outcome, decided_at, st);
  }
  res.set_overall_code(over ? Response::OVER_LIMIT : Response::OK);
  Answer a;
  res.SerializeToString(&a.body);
  co_return a;
}

}  // namespace floodgate::rls
