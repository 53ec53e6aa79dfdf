#include "floodgate/limit/policy.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>
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
    fill_item(item, l, tier_of(l, request), *cost);
    out.limits.push_back(&l);
    ++n;
  }
  finish();
}

void fill_item(store::Item& item, const config::Limit& l, const config::LimitParams& params,
               std::int64_t cost) {
  item.params = Params::from(l, params);
  item.cost = l.algorithm == config::Algorithm::concurrency ? 1 : cost;
  item.enforce = enforced(l, item.key);
  if (!item.enforce) item.params.max_delay = 0;  // a shadowed key (rollout) is never held
  item.refundable = l.count.has_value();
  item.lease.clear();
  item.leased = {};
  if (l.lease)
    item.leased = {l.lease->size,
                   std::chrono::duration_cast<std::chrono::microseconds>(l.lease->ttl).count(),
                   nullptr};
  item.take_up_to = 0;
  item.tag = 0;
}

int rollout_bucket(std::string_view key) {
  // FNV-1a, then a multiplicative mix so that keys differing in their last bytes spread.
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<int>(h % 10000);
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

namespace {

// A header value built on the stack: the 429 path renders five of these per refusal, and
// std::to_string plus concatenation cost an allocation per piece.
class Text {
 public:
  Text& operator<<(std::string_view s) {
    buf_.insert(buf_.end(), s.begin(), s.end());
    return *this;
  }
  Text& operator<<(std::int64_t n) {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    buf_.insert(buf_.end(), digits, end);
    return *this;
  }
  std::string_view view() const { return {buf_.data(), buf_.size()}; }
  void clear() { buf_.clear(); }

 private:
  boost::container::small_vector<char, 128> buf_;
};

}  // namespace

void rate_headers(const config::Limit& limit, const Params& params, const Decision& d, Micros now,
                  const HeaderSink& emit) {
  // Never below 0: "remaining" is a promise to the client, and an algorithm's arithmetic gone
  // wrong (an overflow) must not show as a negative count.
  std::int64_t remaining = d.admitted ? std::max<std::int64_t>(0, d.remaining) : 0;
  std::int64_t reset_in = ceil_seconds(d.reset_after);
  Text text;
  emit("X-RateLimit-Limit", (text << d.limit).view());
  text.clear();
  emit("X-RateLimit-Remaining", (text << remaining).view());
  text.clear();
  emit("X-RateLimit-Reset", (text << ceil_seconds(now + d.reset_after)).view());
  text.clear();
  text << "\"" << limit.name << "\";q=" << d.limit;
  switch (params.algorithm) {
    case config::Algorithm::token_bucket:
    case config::Algorithm::gcra:
      // The window in which the whole quota is replenished.
      text << ";w="
           << std::max<std::int64_t>(
                  1, static_cast<std::int64_t>(std::ceil(params.capacity / params.per_second)));
      break;
    case config::Algorithm::concurrency:
      break;
    case config::Algorithm::quota: {  // this period's length (a DST day is 23 or 25 hours)
      const auto span = params.span_at(now);
      text << ";w=" << std::max<std::int64_t>(1, ceil_seconds(span.end - span.start));
      break;
    }
    default:
      text << ";w=" << std::max<std::int64_t>(1, ceil_seconds(params.window));
  }
  emit("RateLimit-Policy", text.view());
  std::int64_t t = d.admitted ? reset_in : retry_after_seconds(d);
  text.clear();
  text << "\"" << limit.name << "\";r=" << remaining << ";t=" << t;
  emit("RateLimit", text.view());
  if (!d.admitted) {
    text.clear();
    emit("Retry-After", (text << retry_after_seconds(d)).view());
  }
}

void HeaderList::add(std::string_view name, std::string_view value) {
  if (text_.empty()) text_.reserve(192);  // the rate-limit headers: one allocation
  const auto at = static_cast<std::uint32_t>(text_.size());
  text_.append(name).append(value);
  at_.push_back({at, static_cast<std::uint32_t>(name.size()),
                 at + static_cast<std::uint32_t>(name.size()),
                 static_cast<std::uint32_t>(value.size())});
}

HeaderList rate_headers(const config::Limit& limit, const Params& params, const Decision& d,
                        Micros now) {
  HeaderList h;
  rate_headers(limit, params, d, now,
               [&h](std::string_view name, std::string_view value) { h.add(name, value); });
  return h;
}

std::string refusal_body(const config::Limit& limit, const Decision& d) {
  Text text;
  text << "{\"error\":\"rate_limited\",\"limit\":\"" << limit.name
       << "\",\"retry_after\":" << retry_after_seconds(d) << "}";
  return std::string(text.view());
}

}  // namespace floodgate::limit
