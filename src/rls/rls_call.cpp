#include "rls_call.hpp"

#include <algorithm>
#include <cmath>

#include "floodgate/config/bounds.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/policy.hpp"
#include "rls/rls.pb.h"

namespace floodgate::rls {
namespace {

using Response = wire::RateLimitResponse;
using Unit = wire::RateLimitResponse::RateLimit::Unit;

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
    if (d.has_limit() && decide::override_unit_seconds(d.limit().unit()) == 0)
      return at + ".limit has no unit of second, minute, hour, day, month or year";
  }
  return "";
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
// unit that holds a whole number of requests, else the unit nearest its window; a bucket's by
// its refill rate.
void state_rate(const limit::Params& p, limit::Micros now, Response::RateLimit& out) {
  auto put = [&](Unit unit, double n) {
    out.set_unit(unit);
    out.set_requests_per_unit(
        static_cast<std::uint32_t>(std::clamp(std::llround(n), 0LL, 4294967295LL)));
  };
  double count = static_cast<double>(p.capacity);
  double window = static_cast<double>(p.window) / 1e6;  // seconds
  if (p.algorithm == config::Algorithm::token_bucket || p.algorithm == config::Algorithm::gcra) {
    // A refill rate: the shortest unit holding a whole number of refills (1/h is 1 per HOUR,
    // not 0 per SECOND), else the shortest holding one at least.
    for (const auto& u : kUnits) {
      const double n = p.per_second * static_cast<double>(u.seconds);
      if (n >= 1 && std::abs(n - std::round(n)) < 1e-9) return put(u.unit, n);
    }
    for (const auto& u : kUnits)
      if (p.per_second * static_cast<double>(u.seconds) >= 1)
        return put(u.unit, p.per_second * static_cast<double>(u.seconds));
    return put(Response::RateLimit::YEAR, p.per_second * 365 * 86400);
  }
  if (p.algorithm == config::Algorithm::quota) {
    const auto span = p.span_at(now);
    window = static_cast<double>(span.end - span.start) / 1e6;
  }
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

// `req`'s descriptors as views into it.
void read_call(const wire::RateLimitRequest& req, decide::DescriptorCall& call) {
  call.clear();
  call.domain = req.domain();
  for (const auto& d : req.descriptors()) {
    auto& c = call.descriptors.emplace_back();
    c.first = static_cast<std::uint32_t>(call.entries.size());
    c.count = static_cast<std::uint32_t>(d.entries_size());
    for (const auto& e : d.entries()) call.entries.push_back({e.key(), e.value()});
    c.hits = hits_of(req, d);
    if (d.has_limit()) {
      c.own_limit = d.limit().requests_per_unit();
      c.own_seconds = decide::override_unit_seconds(d.limit().unit());
    }
  }
}

// The response: every descriptor's status from the plan's decisions (`over`: refused).
void answer(const decide::DescriptorPlan& planned, const store::Outcome& outcome, bool over,
            limit::Micros now, Response& res) {
  for (std::size_t i = 0; i < planned.kinds.size(); ++i) {
    auto& st = *res.add_statuses();
    st.set_code(Response::OK);
    if (planned.kinds[i] == decide::DescriptorKind::unlimited) st.set_limit_remaining(4294967295u);
    if (planned.kinds[i] == decide::DescriptorKind::limited)
      status_of(static_cast<std::uint32_t>(i), planned.plan, outcome, now, st);
  }
  res.set_overall_code(over ? Response::OVER_LIMIT : Response::OK);
}

}  // namespace

CallScratch::CallScratch()
    : request(std::make_unique<wire::RateLimitRequest>()),
      response(std::make_unique<wire::RateLimitResponse>()) {}
CallScratch::~CallScratch() = default;

boost::asio::awaitable<Answer> should_rate_limit(decide::Gate& gate,
                                                 const config::ConfigPtr& snapshot,
                                                 std::string_view message, limit::Micros now,
                                                 CallScratch& scratch, CallRecord& record) {
  auto& req = *scratch.request;
  if (!req.ParseFromArray(message.data(), static_cast<int>(message.size())))
    co_return Answer{GrpcCode::invalid_argument, "the message is not a RateLimitRequest", {}};
  if (auto why = invalid(req); !why.empty())
    co_return Answer{GrpcCode::invalid_argument, std::move(why), {}};
  record.domain = req.domain();
  read_call(req, scratch.call);
  record.read = true;
  auto& res = *scratch.response;
  res.Clear();
  const auto& config = *snapshot;
  const auto* domain = config.rls.domain(req.domain());
  if (!domain) {  // as envoyproxy/ratelimit: an unknown domain limits nothing
    for (int i = 0; i < req.descriptors_size(); ++i) res.add_statuses()->set_code(Response::OK);
    res.set_overall_code(Response::OK);
    Answer a;
    res.SerializeToString(&a.body);
    co_return a;
  }
  const auto& route = config.routes[domain->route];
  record.route = &route;
  auto& planned = scratch.planned;
  decide::plan_descriptors(config, *domain, route, scratch.call, gate.hasher(config), planned);

  record.admission.wants_headers = false;  // the statuses say it
  auto& outcome = scratch.outcome;
  outcome.decisions.clear();
  outcome.now = 0;
  bool over = false;
  if (!planned.plan.items.empty() &&
      gate.ready(snapshot, planned.plan, now) == decide::Ruling::ask) {
    auto reply = co_await gate.decide_plan(snapshot, route, planned.plan, now, planned.facts,
                                           record.admission, &outcome);
    if (reply && reply->status != 429)
      co_return Answer{GrpcCode::unavailable,
                       "the limit store cannot decide (rls.on_store_error: fail_closed)",
                       {}};
    over = reply.has_value();
  }
  record.over_limit = over;
  answer(planned, outcome, over, outcome.now != 0 ? outcome.now : now, res);
  Answer a;
  res.SerializeToString(&a.body);
  co_return a;
}

}  // namespace floodgate::rls
