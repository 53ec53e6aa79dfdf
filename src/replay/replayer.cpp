#include "replayer.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "floodgate/config/loader.hpp"
#include "floodgate/decide/router.hpp"
#include "floodgate/limit/policy.hpp"
#include "floodgate/uri/host.hpp"
#include "floodgate/uri/path_normalize.hpp"
#include "lease_fleet.hpp"

namespace floodgate::replay {

namespace {

char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

// Lets the key builder read a logged request's headers and claims.
class RecordInputs final : public keys::HeaderSource, public keys::ClaimSource {
 public:
  explicit RecordInputs(const LogRecord& r) : r_(r) {}
  std::optional<std::string_view> header(std::string_view name) const override {
    return find("header:", name, true);
  }
  std::optional<std::string> claim(std::string_view name) const override {
    auto v = find("jwt:", name, false);
    return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
  }
  std::optional<std::string_view> cookie(std::string_view name) const override {
    return find("cookie:", name, false);
  }
  // The connection's fingerprints as the log recorded them (tls:ja4, tls:ja3); null if none.
  const tls::Fingerprints* fingerprints() {
    if (auto v = find("tls:", "ja4", false)) tls_.ja4 = *v;
    if (auto v = find("tls:", "ja3", false)) tls_.ja3 = *v;
    return tls_.ja4.empty() && tls_.ja3.empty() ? nullptr : &tls_;
  }

 private:
  std::optional<std::string_view> find(std::string_view prefix, std::string_view name,
                                       bool fold_case) const {
    for (const auto& [k, v] : r_.fields) {
      if (k.size() != prefix.size() + name.size() || k.substr(0, prefix.size()) != prefix) continue;
      auto rest = k.substr(prefix.size());
      // Header names are lower case in the log and in the config: the exact comparison
      // settles almost every lookup; ASCII folding catches a hand-written log.
      bool same = rest == name ||
                  (fold_case &&
                   std::equal(rest.begin(), rest.end(), name.begin(), name.end(),
                              [](char a, char b) { return ascii_lower(a) == ascii_lower(b); }));
      if (same) return v;
    }
    return std::nullopt;
  }
  const LogRecord& r_;
  tls::Fingerprints tls_;
};

// The logged client: an address, or "#<hex>" when the operator had it hashed. A hashed one
// becomes a stand-in IPv6 address in fd00::/8 made of the hash, so that distinct callers stay
// distinct (an IPv6 prefix setting then groups stand-ins, not real networks).
config::IpAddress client_of(const LogRecord& r) {
  std::string_view text = r.client.empty() ? r.peer : r.client;
  if (!text.empty() && text.front() == '#') {
    config::IpAddress a;
    a.bytes[0] = 0xfd;
    for (std::size_t i = 1, j = 1; i < 16 && j + 1 < text.size(); ++i, j += 2) {
      unsigned v = 0;
      std::from_chars(text.data() + j, text.data() + j + 2, v, 16);
      a.bytes[i] = static_cast<std::uint8_t>(v);
    }
    return a;
  }
  return config::parse_ip(text).value_or(config::IpAddress{});
}

// `item` as the exact limit decides it: no lease terms.
store::Item exact_item(const store::Item& item) {
  store::Item plain = item;
  plain.leased = {};
  plain.take_up_to = 0;
  return plain;
}

}  // namespace

const char* to_string(Spread s) {
  switch (s) {
    case Spread::client:
      return "client";
    case Spread::request:
      return "request";
    case Spread::log:
      return "log";
  }
  return "?";
}

void bump(std::vector<std::uint32_t>& series, std::size_t minute, std::uint32_t n) {
  if (series.size() <= minute) series.resize(minute + 1, 0);
  series[minute] += n;
}

keys::KeyHasher::Kind key_hash_for(const std::vector<const config::Config*>& configs) {
  for (const auto* c : configs)
    if (c)
      for (const auto& route : c->routes)
        for (const auto& l : route.limits)
          if (l.rollout_basis_points < 10000) return keys::KeyHasher::Kind::hmac;
  return keys::KeyHasher::Kind::offline;
}

Replayer::Replayer(config::ConfigPtr config, std::string label, std::string file, std::size_t top,
                   LeaseSimulation lease, keys::KeyHasher::Kind key_hash)
    : config_(std::move(config)),
      state_(clock_, config_->store.max_keys),
      decider_(key_hash, "replay:") {
  report_.label = std::move(label);
  report_.file = std::move(file);
  report_.simulation = lease;
  for (const auto& route : config_->routes) {
    auto& limits = report_.limits.emplace_back();
    for (const auto& l : route.limits) {
      auto& lr = limits.emplace_back(top);
      lr.route = route.name;
      lr.limit = l.name;
      lr.shadow = l.mode == config::LimitMode::shadow;
      lr.rollout_basis_points = l.rollout_basis_points;
      if (l.rollout_basis_points < 10000) lr.refused_by_rollout_percent.assign(100, 0);
      if (lease.instances > 0 && l.lease) {
        lr.lease.emplace();
        lr.lease->size = l.lease->size;
        const auto n = static_cast<int>(lease.instances);
        lr.lease->bound = l.lease->early_refusal_bound(n, l.algorithm);
        lr.lease->terms = config::early_refusal_terms(n, l);
      }
    }
  }
  if (lease.instances > 0) {
    fleet_ = std::make_unique<LeaseFleet>(state_, clock_, lease.instances);
    check_ = std::make_unique<store::MemoryState>(clock_, config_->store.max_keys);
  }
}

Replayer::~Replayer() = default;

std::size_t Replayer::instance_of(const LogRecord& r) {
  const auto n = fleet_->size();
  switch (report_.simulation.spread) {
    case Spread::request:
      return static_cast<std::size_t>(dealt_++ % n);
    case Spread::log:
      return r.source % n;
    case Spread::client:
      break;
  }
  return std::hash<std::string_view>{}(r.client.empty() ? r.peer : r.client) % n;
}

void Replayer::check_leases(const limit::Plan& plan, std::vector<LimitReport>& limits,
                            const config::Route& route, std::size_t instance) {
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    if (plan.items[i].leased.size == 0) continue;
    auto& lease = *limits[static_cast<std::size_t>(plan.limits[i] - route.limits.data())].lease;
    auto plain = exact_item(plan.items[i]);
    const auto& d = outcome_.decisions[i];
    if (outcome_.admitted && d.admitted) {
      // Charged: the exact limit, given every request the leases admitted, admits it too.
      if (!check_->acquire(std::span(&plain, 1)).admitted) {
        ++lease.over_admitted;
        check_->adjust(plain, plain.cost);  // charged all the same: the check keeps up
      }
    } else if (!d.admitted) {
      // Refused by the lease: what the exact limit still had free, beyond the units the
      // refusing instance holds itself (fewer than the cost), is the early refusal.
      ++lease.refused;
      plain.cost = 0;
      const auto free = check_->acquire(std::span(&plain, 1)).decisions[0].remaining -
                        fleet_->in_hand(instance, plain.key, clock_.now());
      lease.most_free_at_refusal = std::max(lease.most_free_at_refusal, free);
    }
  }
}

std::string Replayer::caller_text(const config::Limit& l, const keys::RequestFacts& facts) {
  std::string out;
  keys::append_caller_text(out, l, facts);
  return out;
}

void Replayer::set_overrides(limit::OverrideList list) {
  override_list_ = std::move(list);
  overrides_.build(*config_, override_list_, decider_.hasher(*config_));
}

Decision Replayer::decide(const LogRecord& r, limit::Micros now, std::size_t minute) {
  clock_.set(now);
  if (fleet_) fleet_->advance(now);
  while (!releases_.empty() && releases_.top().at <= now) {
    state_.release(releases_.top().item);
    releases_.pop();
  }
  ++report_.requests;
  Decision d;
  for (const auto& [k, v] : r.fields)
    if (k == "rls:domain") return decide_call(r, v, now, minute);
  // As the proxy decides: on the normalized path, and a path it answers 400 is rejected.
  // (floodgate's own log already has normalized paths; an nginx log has them as received.)
  std::string_view path = r.path;
  uri::NormalizedPath normal;
  if (!uri::is_normal_path(path)) {
    normal = uri::normalize_path(path, {.allow_encoded_separators = true});
    path_ = normal.path;
    path = path_;
  }
  const auto* route = normal ? decide::match_route(*config_, r.method, r.host, path) : nullptr;
  if (!normal || decide::refuses_encoded_separators(normal, route)) {
    ++report_.rejected;
    d.verdict = Verdict::rejected;
    return d;
  }
  if (!route) {
    ++report_.unmatched;
    d.verdict = Verdict::unmatched;
    return d;
  }
  d.route = route;
  std::string_view query = r.query;
  if (query.empty()) {  // JSON logs carry only the parameters asked for, as query:NAME fields
    query_.clear();
    for (const auto& [k, v] : r.fields)
      if (k.substr(0, 6) == "query:") {
        if (!query_.empty()) query_ += '&';
        query_.append(k.substr(6));
        query_ += '=';
        query_.append(v);
      }
    query = query_;
  }
  RecordInputs inputs(r);
  // The log has the whole address (lists match it); keys fold it as the candidate says.
  decide::Inquiry q{config_.get(), route,
                    keys::RequestFacts{route->name, r.method, uri::host_name(r.host), path, query,
                                       client_of(r), &inputs, &inputs, inputs.fingerprints()},
                    now};
  decide::complete(q);
  const auto& facts = q.facts;
  auto& plan = plan_;
  // As the proxy decides (decide::Decider): lists, limits, overrides.
  switch (decider_.rule(q, plan, overrides_.empty() ? nullptr : &overrides_)) {
    case decide::Ruling::denied:
      ++report_.denied;
      d.verdict = Verdict::denied;
      return d;
    case decide::Ruling::allowed:
    case decide::Ruling::exempt:
      ++report_.allowed;
      return d;
    case decide::Ruling::unlimited:
      return d;
    case decide::Ruling::rejected:
      ++report_.rejected;
      d.verdict = Verdict::rejected;
      d.limit = plan.rejected_by;
      return d;
    case decide::Ruling::ask:
      break;
  }
  return charge(r, *route, plan, std::span(&facts, 1), now, minute);
}

Decision Replayer::charge(const LogRecord& r, const config::Route& route, limit::Plan& plan,
                          std::span<const keys::RequestFacts> facts, limit::Micros now,
                          std::size_t minute) {
  Decision d;
  d.route = &route;
  auto& limits = report_.limits[static_cast<std::size_t>(&route - config_->routes.data())];
  auto limit_index = [&](const config::Limit* l) {
    return static_cast<std::size_t>(l - route.limits.data());
  };
  auto facts_of = [&](std::size_t i) -> const keys::RequestFacts& {
    return facts.size() > 1 ? facts[plan.items[i].tag] : facts.front();
  };
  const bool leased = fleet_ && std::any_of(plan.items.begin(), plan.items.end(),
                                            [](const auto& i) { return i.leased.size > 0; });
  std::size_t instance = 0;
  if (leased) {
    instance = instance_of(r);
    for (std::size_t i = 0; i < plan.items.size(); ++i)
      if (plan.items[i].leased.size > 0)
        plan.items[i].leased.counters = limits[limit_index(plan.limits[i])].lease->counters.get();
    fleet_->acquire(instance, plan.items, outcome_);
    check_leases(plan, limits, route, instance);
  } else {
    state_.acquire(plan.items, outcome_);
  }
  const auto& outcome = outcome_;
  const auto conclusion = decide::Decider::conclude(plan, outcome);
  const auto& v = conclusion.verdict;
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    auto& lr = limits[limit_index(plan.limits[i])];
    ++lr.seen;
    const auto& dec = outcome.decisions[i];
    bool fresh = false;
    auto& caller = lr.callers.add(limit::key_id(plan.items[i].key), 1, fresh);
    if (fresh) keys::append_caller_text(caller.caller, *plan.limits[i], facts_of(i));
    if (!dec.admitted) ++(plan.items[i].enforce ? caller.refused : caller.shadow_refused);
    if (!dec.admitted && !lr.refused_by_rollout_percent.empty())
      ++lr.refused_by_rollout_percent[static_cast<std::size_t>(
          limit::rollout_bucket(plan.items[i].key) / 100)];
    if (!plan.items[i].enforce && !dec.admitted) {
      ++lr.shadow_refused;
      lr.shadow_refused_keys.add(caller_text(*plan.limits[i], facts_of(i)));
    }
    if (dec.admitted && outcome.admitted && dec.limit > 0) {
      // How much of its quota the caller is using now: the near misses of the report.
      double used = 1.0 - static_cast<double>(dec.remaining) / static_cast<double>(dec.limit);
      if (lr.closest.qualifies(used))
        lr.closest.offer(caller_text(*plan.limits[i], facts_of(i)), used);
    }
  }
  if (!v.admitted) {
    ++report_.refused;
    bump(report_.refused_by_minute, minute);
    d.verdict = Verdict::refused;
    if (v.shown >= 0) {
      d.limit = plan.limits[static_cast<std::size_t>(v.shown)];
      auto& lr = limits[limit_index(d.limit)];
      ++lr.refused;
      bump(lr.refused_by_minute, minute);
      d.key = caller_text(*d.limit, facts_of(static_cast<std::size_t>(v.shown)));
      lr.refused_keys.add(d.key);
    }
    return d;
  }
  if (conclusion.shadow_refused) ++report_.shadow_only;
  limit::after_response(
      plan, outcome,
      [&](std::size_t i) {
        releases_.push({now + std::max<std::int64_t>(0, r.duration_us), plan.items[i]});
      },
      [&](std::size_t i) {
        auto adjust = [&](std::int64_t delta) {
          if (!leased || plan.items[i].leased.size == 0) {
            state_.adjust(plan.items[i], delta);
            return;
          }
          fleet_->adjust(instance, plan.items[i], delta);
          check_->adjust(exact_item(plan.items[i]), delta);
        };
        // A counting limit keeps the charge only for a status it counts. A line floodgate
        // refused at the time logged its own 429, not what the origin would have answered:
        // it counts as no status.
        if (const auto& count = plan.limits[i]->count) {
          const int status = r.live_refused ? 0 : r.status;
          if (!count->contains(status) && plan.items[i].cost != 0) adjust(-plan.items[i].cost);
          return;
        }
        const auto& header = plan.limits[i]->settle_header;
        for (const auto& [name, value] : r.settle) {
          if (name.size() != header.size() ||
              !std::equal(name.begin(), name.end(), header.begin(),
                          [](char a, char b) { return ascii_lower(a) == ascii_lower(b); }))
            continue;
          auto actual = limit::settled_cost(value);
          if (!actual || *actual == plan.items[i].cost) continue;
          adjust(*actual - plan.items[i].cost);
        }
      });
  return d;
}

void Replayer::finish(std::uint64_t lines_with_fields,
                      const std::vector<std::string>& inputs_seen) {
  auto seen = [&](const std::string& input) {
    auto has = [&](const std::string& x) {
      return std::find(inputs_seen.begin(), inputs_seen.end(), x) != inputs_seen.end();
    };
    return has(input) || (input.rfind("query:", 0) == 0 && has("query:*"));
  };
  std::vector<std::string> needed;
  for (const auto& f : config::limit_inputs(*config_))
    if (f.kind != config::ReplayField::Kind::ip && f.kind != config::ReplayField::Kind::host)
      needed.push_back(f.text());
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  for (const auto& n : needed)
    if (!seen(n))
      report_.missing_inputs.push_back(
          n + (lines_with_fields == 0 ? " (no line carries replay fields: log.replay_fields)"
                                      : " (never present in the log)"));
}

}  // namespace floodgate::replay
