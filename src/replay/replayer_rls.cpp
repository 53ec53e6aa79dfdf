// `floodgate replay` of the RLS listener's access lines: a logged call (rls:domain, rls:N,
// rls:N:hits, rls:N:limit) read back into a decide::DescriptorCall and planned by the same code
// the listener runs (decide/descriptor_plan), then charged like any request.
#include <charconv>

#include "replayer.hpp"

namespace floodgate::replay {

namespace {

// A logged descriptor's rls:N:hits and rls:N:limit ("N/SECONDS") into `d`; false if malformed.
bool read_descriptor_terms(std::optional<std::string_view> hits,
                           std::optional<std::string_view> own,
                           decide::DescriptorCall::Descriptor& d) {
  auto number = [](std::string_view text, std::int64_t& out, std::int64_t least) {
    const auto* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc{} && p == end && out >= least;
  };
  if (hits && !number(*hits, d.hits, 1)) return false;
  if (!own) return true;
  const auto slash = own->find('/');
  std::int64_t limit = 0;
  if (slash == std::string_view::npos || !number(own->substr(0, slash), limit, 0) ||
      limit > 4294967295LL || !number(own->substr(slash + 1), d.own_seconds, 1))
    return false;
  d.own_limit = static_cast<std::uint32_t>(limit);
  return true;
}

}  // namespace

Decision Replayer::decide_call(const LogRecord& r, std::string_view logged_domain,
                               limit::Micros now, std::size_t minute) {
  Decision d;
  auto reject = [&] {
    ++report_.rejected;
    d.verdict = Verdict::rejected;
    return d;
  };
  call_.clear();
  call_text_.clear();
  std::size_t room = logged_domain.size();
  for (const auto& [k, v] : r.fields) room += v.size();
  call_text_.reserve(room);  // views into it must not move
  const auto domain_name = decide::read_logged_text(logged_domain, call_text_);
  if (!domain_name) return reject();
  const auto* domain = config_->rls.domain(*domain_name);
  if (!domain) {  // a domain this config does not know limits nothing (as the listener)
    ++report_.unmatched;
    d.verdict = Verdict::unmatched;
    return d;
  }
  // The descriptors by number (rls:N, rls:N:hits, rls:N:limit) in one pass over the fields;
  // they must be 0, 1, ... with no gap.
  logged_.clear();
  for (const auto& [k, v] : r.fields) {
    if (!k.starts_with("rls:") || k == "rls:domain") continue;
    std::size_t n = 0;
    const auto* end = k.data() + k.size();
    const auto [p, ec] = std::from_chars(k.data() + 4, end, n);
    const std::string_view suffix(p, static_cast<std::size_t>(end - p));
    if (ec != std::errc{} || n >= r.fields.size()) return reject();
    if (logged_.size() <= n) logged_.resize(n + 1);
    if (suffix.empty())
      logged_[n].entries = v;
    else if (suffix == ":hits")
      logged_[n].hits = v;
    else if (suffix == ":limit")
      logged_[n].own = v;
    else
      return reject();
  }
  call_.domain = *domain_name;
  for (const auto& l : logged_)
    if (!l.entries || !decide::read_entries_text(*l.entries, call_text_, call_) ||
        !read_descriptor_terms(l.hits, l.own, call_.descriptors.back()))
      return reject();
  if (call_.descriptors.empty()) return reject();
  const auto& route = config_->routes[domain->route];
  d.route = &route;
  decide::plan_descriptors(*config_, *domain, route, call_, decider_.hasher(*config_), planned_);
  if (planned_.plan.items.empty()) return d;
  if (decider_.ready(planned_.plan, overrides_.empty() ? nullptr : &overrides_, now) !=
      decide::Ruling::ask) {
    ++report_.allowed;  // every item exempted by an override
    return d;
  }
  return charge(r, route, planned_.plan, planned_.facts, now, minute);
}

}  // namespace floodgate::replay
