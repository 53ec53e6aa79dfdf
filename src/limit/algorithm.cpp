#include "floodgate/limit/algorithm.hpp"

#include <algorithm>
#include <cmath>

namespace floodgate::limit {

using config::Algorithm;

namespace {

Micros ceil_micros(double us) {
  return static_cast<Micros>(std::ceil(us - 1e-6));
}
Micros floor_to(Micros now, Micros window) {
  return now - ((now % window) + window) % window;
}

// ---- token bucket: continuous refill, starts full -------------------------------------

// Refilled up to capacity - held: what leases hold cannot refill (lua/acquire.lua's room).
BucketState refill(const Params& p, const State& s, Micros now, std::int64_t held = 0) {
  const double room = static_cast<double>(p.capacity - held);
  const auto* b = std::get_if<BucketState>(&s);
  if (!b) return BucketState{room, now};
  double elapsed = static_cast<double>(std::max<Micros>(0, now - b->updated));
  double tokens = std::min<double>(room, b->tokens + elapsed * p.per_second / kMicrosPerSecond);
  return BucketState{tokens, std::max(now, b->updated)};
}

Micros bucket_time_to(const Params& p, double missing) {
  return missing <= 0 ? 0 : ceil_micros(missing * kMicrosPerSecond / p.per_second);
}

Evaluation token_bucket(const Params& p, const State& s, Micros now, std::int64_t cost,
                        std::int64_t held) {
  auto b = refill(p, s, now, held);
  Evaluation e;
  e.decision.limit = p.capacity;
  const auto allowance = static_cast<double>(p.delay_allowance());
  if (b.tokens + allowance + 1e-9 >= static_cast<double>(cost)) {
    b.tokens -= static_cast<double>(cost);
    e.decision.admitted = true;
    e.decision.remaining =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(b.tokens + 1e-9)));
    if (b.tokens < 0) e.decision.delay = bucket_time_to(p, -b.tokens);  // into the allowance
  } else {
    e.decision.retry_after =
        std::max<Micros>(1, bucket_time_to(p, static_cast<double>(cost) - allowance - b.tokens));
  }
  e.decision.reset_after = bucket_time_to(p, static_cast<double>(p.capacity) - b.tokens);
  e.next = b;
  return e;
}

// ---- GCRA: capacity requests in one burst, then one per emission interval -------------

double gcra_debt(const Params& p, const State& s, Micros now) {
  const auto* g = std::get_if<GcraState>(&s);
  if (!g) return 0;
  double elapsed = static_cast<double>(std::max<Micros>(0, now - g->updated));
  return std::max(0.0, g->debt - elapsed * p.per_second / kMicrosPerSecond);
}

// The debt at `now`, never below what leases hold (that does not decay).
double held_debt(const Params& p, const State& s, Micros now, std::int64_t held) {
  return std::max(gcra_debt(p, s, now), static_cast<double>(held));
}

Evaluation gcra(const Params& p, const State& s, Micros now, std::int64_t cost, std::int64_t held) {
  const double debt = held_debt(p, s, now, held);
  const double next = debt + static_cast<double>(cost);
  Evaluation e;
  e.decision.limit = p.capacity;
  const auto capacity = static_cast<double>(p.capacity);
  const auto allowance = static_cast<double>(p.delay_allowance());
  if (next <= capacity + allowance + 1e-9) {
    e.decision.admitted = true;
    e.decision.remaining =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(capacity - next + 1e-9)));
    e.decision.reset_after = bucket_time_to(p, next);
    if (next > capacity + 1e-9) e.decision.delay = bucket_time_to(p, next - capacity);
    e.next = GcraState{next, now};
  } else {
    e.decision.retry_after = std::max<Micros>(1, bucket_time_to(p, next - capacity - allowance));
    e.decision.reset_after = bucket_time_to(p, debt);
    e.next = GcraState{debt, now};
  }
  return e;
}

// ---- sliding window: the previous window's count, weighted by how much of it still overlaps

WindowState roll(const State& s, Micros start, Micros window) {
  const auto* w = std::get_if<WindowState>(&s);
  if (!w || w->start < start - window) return WindowState{start, 0, 0};
  if (w->start == start - window) return WindowState{start, 0, w->current};
  if (w->start > start) return *w;  // a state from the future (clock step back): keep it
  return *w;
}

double weighted_previous(const WindowState& w, Micros now, Micros window) {
  double elapsed = static_cast<double>(now - w.start) / static_cast<double>(window);
  return static_cast<double>(w.previous) * (1.0 - std::clamp(elapsed, 0.0, 1.0));
}

// The earliest time at or after `now` when `cost` more fits, given the rolled state.
Micros sliding_retry(const WindowState& w, Micros now, Micros window, std::int64_t limit,
                     std::int64_t cost) {
  double room = static_cast<double>(limit - w.current - cost);
  if (room >= 0 && w.previous > 0) {
    // previous * (1 - e/W) <= room  =>  e >= W * (1 - room/previous)
    double e = static_cast<double>(window) * (1.0 - room / static_cast<double>(w.previous));
    Micros at = w.start + ceil_micros(e);
    if (at < w.start + window) return std::max<Micros>(at - now, 1);
  }
  // Not in this window: in the next one the current count becomes the weighted previous.
  double next_room = static_cast<double>(limit - cost);
  double e = w.current > 0 ? static_cast<double>(window) *
                                 std::max(0.0, 1.0 - next_room / static_cast<double>(w.current))
                           : 0.0;
  return std::max<Micros>(w.start + window + ceil_micros(e) - now, 1);
}

Evaluation sliding_window(const Params& p, const State& s, Micros now, std::int64_t cost) {
  auto w = roll(s, floor_to(now, p.window), p.window);
  double estimate = weighted_previous(w, now, p.window) + static_cast<double>(w.current);
  Evaluation e;
  e.decision.limit = p.capacity;
  if (estimate + static_cast<double>(cost) <= static_cast<double>(p.capacity) + 1e-9) {
    w.current += cost;
    e.decision.admitted = true;
    e.decision.remaining = std::max<std::int64_t>(
        0, static_cast<std::int64_t>(
               std::floor(static_cast<double>(p.capacity) - estimate - cost + 1e-9)));
  } else {
    e.decision.retry_after = sliding_retry(w, now, p.window, p.capacity, cost);
  }
  e.decision.reset_after = w.current > 0    ? w.start + 2 * p.window - now
                           : w.previous > 0 ? w.start + p.window - now
                                            : 0;
  e.next = w;
  return e;
}

// ---- sliding log: exact count of what was admitted in the trailing window --------------

LogState trim(const State& s, Micros now, Micros window) {
  const auto* l = std::get_if<LogState>(&s);
  LogState out;
  if (!l) return out;
  for (const auto& entry : l->entries)
    if (entry.at > now - window) out.entries.push_back(entry);
  return out;
}

Evaluation sliding_log(const Params& p, const State& s, Micros now, std::int64_t cost) {
  auto l = trim(s, now, p.window);
  std::int64_t count = 0;
  for (const auto& entry : l.entries) count += entry.cost;
  Evaluation e;
  e.decision.limit = p.capacity;
  if (count + cost <= p.capacity) {
    if (cost > 0) l.entries.push_back({now, cost});
    e.decision.admitted = true;
    e.decision.remaining = p.capacity - count - cost;
  } else {
    // Entries leave oldest first; the request fits once enough of them have left.
    std::int64_t excess = count + cost - p.capacity;
    for (const auto& entry : l.entries) {
      excess -= entry.cost;
      if (excess <= 0) {
        e.decision.retry_after = std::max<Micros>(entry.at + p.window - now, 1);
        break;
      }
    }
  }
  if (!e.decision.admitted && e.decision.retry_after == 0)  // a cost above the limit never fits
    e.decision.retry_after =
        std::max<Micros>(1, l.entries.empty() ? p.window : l.entries.back().at + p.window - now);
  e.decision.reset_after = l.entries.empty() ? 0 : l.entries.back().at + p.window - now;
  e.next = std::move(l);
  return e;
}

// ---- fixed window, and quota (a fixed window whose bounds are a calendar period's) -------

// The state of the window holding `now` (a count from an earlier window is forgotten).
WindowState current_window(const calendar::Span& span, const State& s) {
  const Micros start = span.start;
  const auto* w = std::get_if<WindowState>(&s);
  return (w && w->start == start) ? *w : WindowState{start, 0, 0};
}

Evaluation fixed_window(const Params& p, const State& s, Micros now, std::int64_t cost) {
  const auto span = p.span_at(now);
  const Micros end = span.end;
  WindowState cur = current_window(span, s);
  Evaluation e;
  e.decision.limit = p.capacity;
  if (cur.current + cost <= p.capacity) {
    cur.current += cost;
    e.decision.admitted = true;
    e.decision.remaining = p.capacity - cur.current;
  } else {
    e.decision.retry_after = std::max<Micros>(end - now, 1);
  }
  e.decision.reset_after = cur.current > 0 ? end - now : 0;
  e.next = cur;
  return e;
}

// ---- concurrency --------------------------------------------------------------------------

Evaluation concurrency(const Params& p, const State& s, Micros) {
  const auto* c = std::get_if<ConcurrencyState>(&s);
  std::int64_t in_flight = c ? c->in_flight : 0;
  Evaluation e;
  e.decision.limit = p.capacity;
  if (in_flight + 1 <= p.capacity) {
    e.decision.admitted = true;
    e.decision.remaining = p.capacity - in_flight - 1;
    e.next = ConcurrencyState{in_flight + 1};
  } else {
    e.decision.retry_after = kMicrosPerSecond;
    e.next = ConcurrencyState{in_flight};
  }
  return e;
}

}  // namespace

Params Params::from(const config::Limit& l, const config::LimitParams& p) {
  Params out;
  out.algorithm = l.algorithm;
  bool bucket = l.algorithm == Algorithm::token_bucket || l.algorithm == Algorithm::gcra;
  out.capacity = bucket ? p.capacity : p.limit;
  out.per_second = p.refill_rate.per_second;
  out.window = std::chrono::duration_cast<std::chrono::microseconds>(p.window).count();
  out.period = l.period;
  if (l.on_exceed == config::OnExceed::delay)
    out.max_delay = std::chrono::duration_cast<std::chrono::microseconds>(l.max_delay).count();
  return out;
}

calendar::Span Params::span_at(Micros now) const {
  if (period) return period->at(now);
  const Micros start = floor_to(now, window);
  return {start, start + window};
}

Evaluation evaluate(const Params& p, const State& s, Micros now, std::int64_t cost,
                    std::int64_t held) {
  switch (p.algorithm) {
    case Algorithm::token_bucket:
      return token_bucket(p, s, now, cost, held);
    case Algorithm::gcra:
      return gcra(p, s, now, cost, held);
    case Algorithm::sliding_window:
      return sliding_window(p, s, now, cost);
    case Algorithm::sliding_log:
      return sliding_log(p, s, now, cost);
    case Algorithm::fixed_window:
    case Algorithm::quota:
      return fixed_window(p, s, now, cost);
    case Algorithm::concurrency:
      return concurrency(p, s, now);
  }
  return {};
}

Evaluation take(const Params& p, const State& s, Micros now, std::int64_t cost, std::int64_t up_to,
                std::int64_t held) {
  if (up_to > 0) {
    // Free units: what an admission of nothing would leave (lua/acquire.lua does the same).
    const auto free = evaluate(p, s, now, 0, held).decision.remaining;
    cost = std::max(cost, std::min(up_to, free));
  }
  auto e = evaluate(p, s, now, cost, held);
  if (e.decision.admitted) e.decision.granted = cost;
  return e;
}

State adjust(const Params& p, const State& s, Micros now, std::int64_t delta, std::int64_t held) {
  const double debt_floor = -static_cast<double>(p.capacity);
  switch (p.algorithm) {
    case Algorithm::token_bucket: {
      auto b = refill(p, s, now, held);
      b.tokens = std::min(static_cast<double>(p.capacity - held),
                          std::max(debt_floor - static_cast<double>(p.delay_allowance()),
                                   b.tokens - static_cast<double>(delta)));
      return b;
    }
    case Algorithm::gcra: {
      // Debt: at most one extra burst beyond a fully used one, and never below what is held.
      double debt = gcra_debt(p, s, now) + static_cast<double>(delta);
      return GcraState{
          std::min(2.0 * static_cast<double>(p.capacity) + static_cast<double>(p.delay_allowance()),
                   std::max(static_cast<double>(held), debt)),
          now};
    }
    case Algorithm::sliding_window:
    case Algorithm::fixed_window:
    case Algorithm::quota: {
      WindowState w = p.algorithm == Algorithm::sliding_window
                          ? roll(s, floor_to(now, p.window), p.window)
                          : current_window(p.span_at(now), s);
      w.current = std::clamp<std::int64_t>(w.current + delta, 0, 2 * p.capacity);
      return w;
    }
    default:
      return s;
  }
}

State hold(const Params& p, const State& s, Micros now, std::int64_t held) {
  if (held <= 0) return s;
  switch (p.algorithm) {
    case Algorithm::token_bucket:
      return refill(p, s, now, held);
    case Algorithm::gcra: {
      const auto* g = std::get_if<GcraState>(&s);
      return GcraState{held_debt(p, s, now, held), g ? std::max(now, g->updated) : now};
    }
    default:
      return s;
  }
}

const Micros* updated_at(const State& s) {
  if (const auto* b = std::get_if<BucketState>(&s)) return &b->updated;
  if (const auto* g = std::get_if<GcraState>(&s)) return &g->updated;
  return nullptr;
}

State release(const Params&, const State& s) {
  const auto* c = std::get_if<ConcurrencyState>(&s);
  if (!c || c->in_flight <= 1) return std::monostate{};
  return ConcurrencyState{c->in_flight - 1};
}

Micros time_to_neutral(const Params& p, const State& s, Micros now) {
  if (std::holds_alternative<std::monostate>(s)) return 0;
  switch (p.algorithm) {
    case Algorithm::token_bucket: {
      auto b = refill(p, s, now);
      return bucket_time_to(p, static_cast<double>(p.capacity) - b.tokens);
    }
    case Algorithm::gcra:
      return bucket_time_to(p, gcra_debt(p, s, now));
    case Algorithm::sliding_window: {
      auto w = roll(s, floor_to(now, p.window), p.window);
      return w.current > 0    ? w.start + 2 * p.window - now
             : w.previous > 0 ? w.start + p.window - now
                              : 0;
    }
    case Algorithm::fixed_window:
    case Algorithm::quota: {
      const auto* w = std::get_if<WindowState>(&s);
      return w && w->current > 0 ? std::max<Micros>(0, p.span_at(w->start).end - now) : 0;
    }
    case Algorithm::sliding_log: {
      const auto* l = std::get_if<LogState>(&s);
      return l && !l->entries.empty() ? std::max<Micros>(0, l->entries.back().at + p.window - now)
                                      : 0;
    }
    case Algorithm::concurrency: {
      const auto* c = std::get_if<ConcurrencyState>(&s);
      return c && c->in_flight > 0 ? 3600 * kMicrosPerSecond : 0;  // leases: see memory store
    }
  }
  return 0;
}

}  // namespace floodgate::limit
