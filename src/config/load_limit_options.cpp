// A limit's options beyond its algorithm's parameters and its key: `lease`, `rollout`,
// `on_exceed`/`max_delay` and `count` (load_routes.cpp reads the rest of the limit).
#include <charconv>

#include "sections.hpp"

namespace floodgate::config {

bool is_bucket(Algorithm a) {
  return a == Algorithm::token_bucket || a == Algorithm::gcra;
}

std::int64_t ceiling(Algorithm a, const LimitParams& p) {
  return is_bucket(a) ? p.capacity : p.limit;
}

// `lease: {size, ttl}`. The default size depends on store.instances: cross_check fills it in.
void read_lease(const Section& s, Limit& l) {
  auto& r = s.reader();
  if (l.algorithm == Algorithm::sliding_log || l.algorithm == Algorithm::concurrency ||
      l.algorithm == Algorithm::quota) {
    // A log keeps each admission's time and a concurrency unit is held, not spent: neither
    // can be handed out in advance. A quota's units are few and its period long: a store
    // far away costs little there, and leases would be kept across a period's end.
    r.error(s["lease"], s.at("lease"),
            std::string("applies to token_bucket, gcra, fixed_window and sliding_window, not ") +
                to_string(l.algorithm));
    return;
  }
  Section lease(r, s["lease"], s.at("lease"));
  if (!r.map(lease.node(), lease.path(), {"size", "ttl"})) return;
  LeaseSettings out;
  if (lease.has("size")) {
    lease.integer("size", out.size, 1, std::int64_t(1) << 50);
    if (out.size > ceiling(l.algorithm, l.params))
      r.error(lease["size"], lease.at("size"),
              "exceeds the " + std::string(is_bucket(l.algorithm) ? "capacity" : "limit") + " (" +
                  std::to_string(ceiling(l.algorithm, l.params)) + ")");
  }
  lease.duration("ttl", out.ttl, Duration(1));
  l.lease = out;
}

// `rollout: 10%` (0.01% steps): the share of the limit's keys it enforces.
void read_rollout(Section& s, Limit& l) {
  auto& r = s.reader();
  auto text = r.string(s["rollout"], s.at("rollout"));
  if (!text) return;
  double percent = 0;
  std::string_view v = *text;
  bool ok = v.size() >= 2 && v.back() == '%';
  if (ok) {
    v.remove_suffix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), percent);
    ok = ec == std::errc() && end == v.data() + v.size() && percent > 0 && percent <= 100;
  }
  if (!ok) {
    r.error(s["rollout"], s.at("rollout"),
            "expected a share of keys above 0 and at most 100%, like 10%, got \"" + *text + "\"");
    return;
  }
  if (l.mode == LimitMode::shadow) {
    r.error(s["rollout"], s.at("rollout"),
            "a shadow limit enforces no key: rollout applies to mode enforce");
    return;
  }
  l.rollout_basis_points = std::max(1, static_cast<int>(percent * 100 + 0.5));
}

// `on_exceed: delay` with `max_delay`: only where a request's turn is known (a bucket refills
// at a steady rate) and nothing changes its charge afterwards.
void read_on_exceed(Section& s, Limit& l) {
  auto& r = s.reader();
  s.choice<OnExceed>("on_exceed", l.on_exceed,
                     {{"reject", OnExceed::reject}, {"delay", OnExceed::delay}});
  if (l.on_exceed != OnExceed::delay) {
    if (s.has("max_delay"))
      r.error(s["max_delay"], s.at("max_delay"), "applies with on_exceed: delay");
    return;
  }
  const auto at = s["on_exceed"];
  const auto path = s.at("on_exceed");
  if (!is_bucket(l.algorithm))
    return r.error(at, path,
                   std::string("delay applies to token_bucket and gcra (a request's turn is "
                               "known from their steady refill), not ") +
                       to_string(l.algorithm));
  if (l.mode == LimitMode::shadow)
    return r.error(at, path, "a shadow limit never refuses: nothing to delay");
  if (!l.settle_header.empty() || l.count || s.has("lease"))
    return r.error(at, path,
                   "delay cannot be combined with settle, count or lease (a delayed request's "
                   "units are taken when it is admitted)");
  if (!s.require("max_delay")) return;
  s.duration("max_delay", l.max_delay);
  const double seconds = std::chrono::duration<double>(l.max_delay).count();
  auto too_short = [&](const LimitParams& p, const std::string& whose) {
    if (l.max_delay.count() > 0 && seconds * p.refill_rate.per_second < 1)
      r.error(s["max_delay"], s.at("max_delay"),
              format_duration(l.max_delay) + " is less than one request's refill at " +
                  p.refill_rate.text + whose + ": nothing could ever be delayed");
  };
  too_short(l.params, "");
  if (l.overrides)
    for (const auto& [tier, p] : l.overrides->values) too_short(p, " (tier \"" + tier + "\")");
  if (l.max_delay > Duration(60'000))
    r.error(s["max_delay"], s.at("max_delay"),
            "at most 60s: a request held longer holds its connection and the client's patience");
}

// The algorithms that can charge after the fact (settle, count): those a refund can reach.
bool settles(Algorithm a) {
  return a == Algorithm::token_bucket || a == Algorithm::gcra || a == Algorithm::sliding_window ||
         a == Algorithm::fixed_window || a == Algorithm::quota;
}

namespace {

// One entry of count.status: a status (401), a class (4xx) or a range (400-403), each
// within 100-599. Sets its bits; false when it is none of these.
bool add_statuses(std::string_view text, std::bitset<600>& bits) {
  auto number = [](std::string_view d, int& out) {
    auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), out);
    return ec == std::errc() && end == d.data() + d.size() && d.size() == 3 && out >= 100 &&
           out <= 599;
  };
  int lo = 0, hi = 0;
  if (text.size() == 3 && text[0] >= '1' && text[0] <= '5' && (text[1] | 0x20) == 'x' &&
      (text[2] | 0x20) == 'x') {
    lo = (text[0] - '0') * 100;
    hi = lo + 99;
  } else if (auto dash = text.find('-'); dash != std::string_view::npos) {
    if (!number(text.substr(0, dash), lo) || !number(text.substr(dash + 1), hi) || lo > hi)
      return false;
  } else if (number(text, lo)) {
    hi = lo;
  } else {
    return false;
  }
  for (int st = lo; st <= hi; ++st) bits.set(static_cast<std::size_t>(st));
  return true;
}

}  // namespace

void read_count(Section& s, Limit& l) {
  auto& r = s.reader();
  Section c(r, s["count"], s.at("count"));
  if (!r.map(c.node(), c.path(), {"status"}) || !c.require("status")) return;
  if (!settles(l.algorithm)) {
    r.error(
        s["count"], s.at("count"),
        std::string("count applies to token_bucket, gcra, sliding_window, fixed_window and quota, "
                    "not ") +
            to_string(l.algorithm));
    return;
  }
  StatusSet set;
  for (const auto& e : r.sequence(c["status"], c.at("status"))) {
    auto text = r.string(e, c.at("status"));
    if (!text) continue;
    if (!add_statuses(*text, set.bits)) {
      r.error(e, c.at("status"),
              "expected a status (401), a class (4xx) or a range (400-403) within 100-599, "
              "got \"" +
                  *text + "\"");
      continue;
    }
    set.written.push_back(*text);
  }
  if (set.written.empty()) {
    if (!r.has_error_at(c["status"]))
      r.error(c["status"], c.at("status"), "needs at least one status");
    return;
  }
  l.count = std::move(set);
}

}  // namespace floodgate::config
