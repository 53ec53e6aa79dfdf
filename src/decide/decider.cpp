#include "floodgate/decide/decider.hpp"

#include "floodgate/keys/list_match.hpp"

namespace floodgate::decide {

void complete(Inquiry& q) {
  q.facts.ipv6_prefix = q.config->server.client_ip.ipv6_prefix;
  if (!q.route->path_templates.empty())
    q.facts.path_template = keys::matching_template(*q.route, q.facts.path);
}

Decider::Decider(keys::KeyHasher::Kind kind, std::string lease_prefix)
    : kind_(kind), lease_prefix_(std::move(lease_prefix)) {}

keys::KeyHasher& Decider::hasher(const config::Config& c) {
  static constexpr std::string_view kBuiltInSecret =
      "floodgate built-in key secret: set store.key_secret";
  std::string_view secret = c.store.key_secret.empty() ? kBuiltInSecret : c.store.key_secret;
  if (!hasher_ || hasher_->secret() != secret)
    hasher_ = std::make_unique<keys::KeyHasher>(secret, kind_);
  return *hasher_;
}

Ruling Decider::rule(const Inquiry& q, limit::Plan& plan, const limit::OverrideIndex* overrides) {
  const auto& config = *q.config;
  const auto& route = *q.route;
  // The lists first: a denied caller is answered 403, an allowed one passes without limits.
  if (!config.lists.empty() || !route.lists.empty())
    switch (keys::listed(config.lists, route.lists, q.facts)) {
      case keys::Listed::denied:
        return Ruling::denied;
      case keys::Listed::allowed:
        return Ruling::allowed;
      case keys::Listed::none:
        break;
    }
  if (route.limits.empty()) return Ruling::unlimited;
  limit::plan_into(plan, config, route, q.facts, hasher(config));
  if (plan.reject_status != 0) return Ruling::rejected;
  return ready(plan, overrides, q.now);
}

Ruling Decider::ready(limit::Plan& plan, const limit::OverrideIndex* overrides, limit::Micros now) {
  if (overrides && !plan.items.empty()) {
    overrides->apply(plan, now);
    if (plan.items.empty()) return Ruling::exempt;  // from every limit it had
  }
  if (plan.items.empty()) return Ruling::unlimited;  // every limit skipped it (on_missing_key)
  if (limit::needs_lease(plan))
    limit::set_lease(plan, lease_prefix_ + std::to_string(++lease_seq_));
  return Ruling::ask;
}

Conclusion Decider::conclude(const limit::Plan& plan, const store::Outcome& outcome) {
  Conclusion c;
  c.verdict = limit::verdict(plan, outcome);
  for (std::size_t i = 0; i < plan.items.size(); ++i)
    if (!plan.items[i].enforce && !outcome.decisions[i].admitted) c.shadow_refused = true;
  c.inconsistent = !c.verdict.admitted && c.verdict.shown < 0;
  return c;
}

}  // namespace floodgate::decide
