#include "floodgate/limit/policy.hpp"

#include <charconv>
#include <cmath>

namespace floodgate::limit {

namespace {

std::int64_t ceil_seconds(Micros us) {
  return us <= 0 ? 0 : (us + kMicrosPerSecond - 1) / kMicrosPerSecond;
}

// Parses the cost header: absent or empty -> default; not a non-negative integer -> error.
std::optional<std::int64_t> cost_of(const config::Limit& l, const keys::RequestFacts& r,
                                    bool& bad) {
  if (l.cost.from_header.empty()) return l.cost.fixed;
  auto v = r.headers ? r.headers->header(l.cost.from_header) : std::nullopt;
  if (!v || v->empty()) return l.cost.fixed;
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec == std::errc::result_out_of_range && p == v->data() + v->size() && v->front() != '-')
    return l.cost.max;
  if (ec != std::errc{} || p != v->data() + v->size() || n < 0) {
    bad = true;
    return std::nullopt;
  }
  return std::min(n, l.cost.max > 0 ? l.cost.max : n);
}

const config::LimitParams& tier_of(const config::Limit& l, const keys::RequestFacts& r) {
  if (!l.overrides || !r.claims) return l.params;
  auto tier = r.claims->claim(l.overrides->by.name);
  if (!tier) return l.params;
  auto it = l.overrides->values.find(*tier);
  return it == l.overrides->values.end() ? l.params : it->second;
}

}  // namespace

Plan plan(const config::Config& config, const config::Route& route,
          const keys::RequestFacts& request, keys::KeyHasher& hasher) {
  Plan out;
  plan_into(out, config, route, request, hasher);
  return out;
}

void plan_into(Plan& out, const config::Config& config, const config::Route& route,
               const keys::RequestFacts& request, keys::KeyHasher& hasher) {
  out.limits.clear();
  out.reject_status = 0;
  out.rejected_by = nullptr;
  // Items are overwritten in place, so their strings keep their capacity between plans.
  std::size_t n = 0;
  auto finish = [&] { out.items.resize(n); };
  for (const auto& l : route.limits) {
    if (out.items.size() <= n) out.items.emplace_back();
    store::Item& item = out.items[n];
    keys::build_key_into(item.key, config.store.key_prefix, route, l, request, hasher);
    if (item.key.empty()) {
      if (l.on_missing_key == config::OnMissingKey::skip) continue;
      out.reject_status = 401;
      out.rejected_by = &l;
      return finish();
    }
    bool bad = false;
    auto cost = cost_of(l, request, bad);
    if (bad) {
      out.reject_status = 400;
      out.rejected_by = &l;
      return finish();
    }
    item.params = Params::from(l, tier_of(l, request));
    item.cost = l.algorithm == config::Algorithm::concurrency ? 1 : *cost;
    item.enforce = l.mode == config::LimitMode::enforce;
    item.lease.clear();
    out.limits.push_back(&l);
    ++n;
  }
  finish();
}

Params divided(const Params& p, int divisor) {
  if (divisor <= 1) return p;
  Params out = p;
  out.capacity = (p.capacity + divisor - 1) / divisor;
  out.per_second = p.per_second / divisor;
  return out;
}

bool needs_lease(const Plan& plan) {
  for (const auto& item : plan.items)
    if (item.params.algorithm == config::Algorithm::concurrency ||
        item.params.algorithm == config::Algorithm::sliding_log)
      return true;
  return false;
}

void set_lease(Plan& plan, const std::string& id) {
  for (auto& item : plan.items) item.lease = id;
}

std::optional<std::int64_t> settled_cost(std::string_view value) {
  std::int64_t actual = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), actual);
  if (ec != std::errc{} || p != value.data() + value.size() || actual < 0) return std::nullopt;
  return actual;
}

Verdict verdict(const Plan& plan, const store::Outcome& outcome) {
  Verdict v;
  v.admitted = outcome.admitted;
  for (std::size_t i = 0; i < plan.items.size() && i < outcome.decisions.size(); ++i) {
    if (!plan.items[i].enforce) continue;
    const auto& d = outcome.decisions[i];
    bool better;
    if (v.shown < 0) {
      better = v.admitted || !d.admitted;
    } else if (!v.admitted) {
      better = !d.admitted && d.retry_after > v.decision.retry_after;
    } else {
      // Closest to refusal: the smallest share of its quota left, then the longest to reset.
      double share = static_cast<double>(d.remaining) / std::max<std::int64_t>(1, d.limit);
      double best =
          static_cast<double>(v.decision.remaining) / std::max<std::int64_t>(1, v.decision.limit);
      better = share < best || (share == best && d.reset_after > v.decision.reset_after);
    }
    if (better) {
      v.shown = static_cast<int>(i);
      v.decision = d;
    }
  }
  return v;
}

std::int64_t retry_after_seconds(const Decision& d) {
  return std::max<std::int64_t>(1, ceil_seconds(d.retry_after));
}

void rate_headers(const config::Limit& limit, const Params& params, const Decision& d, Micros now,
                  const HeaderSink& emit) {
  std::int64_t remaining = d.admitted ? d.remaining : 0;
  std::int64_t reset_in = ceil_seconds(d.reset_after);
  emit("X-RateLimit-Limit", std::to_string(d.limit));
  emit("X-RateLimit-Remaining", std::to_string(remaining));
  emit("X-RateLimit-Reset", std::to_string(ceil_seconds(now + d.reset_after)));
  std::string text = "\"" + limit.name + "\";q=" + std::to_string(d.limit);
  switch (params.algorithm) {
    case config::Algorithm::token_bucket:
    case config::Algorithm::gcra:
      // The window in which the whole quota is replenished.
      text += ";w=" +
              std::to_string(std::max<std::int64_t>(
                  1, static_cast<std::int64_t>(std::ceil(params.capacity / params.per_second))));
      break;
    case config::Algorithm::concurrency:
      break;
    default:
      text += ";w=" + std::to_string(std::max<std::int64_t>(1, ceil_seconds(params.window)));
  }
  emit("RateLimit-Policy", text);
  std::int64_t t = d.admitted ? reset_in : retry_after_seconds(d);
  text = "\"" + limit.name + "\";r=" + std::to_string(remaining) + ";t=" + std::to_string(t);
  emit("RateLimit", text);
  if (!d.admitted) emit("Retry-After", std::to_string(retry_after_seconds(d)));
}

HeaderList rate_headers(const config::Limit& limit, const Params& params, const Decision& d,
                        Micros now) {
  HeaderList h;
  rate_headers(limit, params, d, now, [&h](std::string_view name, std::string_view value) {
    h.emplace_back(name, value);
  });
  return h;
}

std::string refusal_body(const config::Limit& limit, const Decision& d) {
  return "{\"error\":\"rate_limited\",\"limit\":\"" + limit.name +
         "\",\"retry_after\":" + std::to_string(retry_after_seconds(d)) + "}";
}

}  // namespace floodgate::limit
