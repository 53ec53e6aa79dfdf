#include "floodgate/decide/descriptor_plan.hpp"

#include <chrono>
#include <optional>
#include <set>

namespace floodgate::decide {
namespace {

using Call = DescriptorCall;

// The rule `d` gets in `domain` (-1: none): each entry looked up by key and value, then by
// the value patterns in order, then by key; the rule of the node the last entry leads to.
int match(const config::RlsDomain& domain, std::span<const Call::Entry> entries) {
  std::size_t at = 0;
  for (const auto& e : entries) {
    const auto& node = domain.nodes[at];
    std::optional<std::size_t> next;
    if (!node.exact.empty())
      if (auto it = node.exact.find(std::pair<std::string_view, std::string_view>(e.key, e.value));
          it != node.exact.end())
        next = it->second;
    for (std::size_t p = 0; !next && p < node.patterns.size(); ++p)
      if (node.patterns[p].key == e.key && e.value.starts_with(node.patterns[p].prefix))
        next = node.patterns[p].node;
    if (!next)
      if (auto it = node.any.find(e.key); it != node.any.end()) next = it->second;
    if (!next) return -1;
    at = *next;
  }
  return domain.nodes[at].rule;
}

// Each descriptor's rule, then `replaces` across the call's matched rules: a rule another
// matched rule replaces is dropped (a descriptor with its own limit has no rule).
void rules_of(const config::RlsDomain& domain, const Call& call, std::vector<int>& rules) {
  rules.assign(call.descriptors.size(), -1);
  bool any_replaces = false;
  for (std::size_t i = 0; i < call.descriptors.size(); ++i) {
    const auto& d = call.descriptors[i];
    if (d.has_own_limit()) continue;
    rules[i] = match(domain, call.entries_of(d));
    if (rules[i] >= 0 && !domain.rules[static_cast<std::size_t>(rules[i])].replaces.empty())
      any_replaces = true;
  }
  if (!any_replaces) return;
  std::set<std::string_view> replaced;
  for (int r : rules)
    if (r >= 0)
      for (const auto& name : domain.rules[static_cast<std::size_t>(r)].replaces)
        replaced.insert(name);
  for (auto& r : rules)
    if (r >= 0 && !domain.rules[static_cast<std::size_t>(r)].name.empty() &&
        replaced.count(domain.rules[static_cast<std::size_t>(r)].name))
      r = -1;
}

// The values descriptor `d`'s key parts read, by position, appended to `values`: a rule's
// limits key on the entries' values (the rule fixes the keys); an override on its keys,
// values and rate, so that it never shares a counter with a configured limit.
void append_values(const Call& call, const Call::Descriptor& d, const std::string& rate,
                   std::vector<std::string_view>& values) {
  for (const auto& e : call.entries_of(d)) {
    if (d.has_own_limit()) values.push_back(e.key);
    values.push_back(e.value);
  }
  if (d.has_own_limit()) values.push_back(rate);
}

// Every planned descriptor's values, in descriptor order, before any view into them is taken
// (`values` does not move once viewed).
void collect_values(const Call& call, DescriptorPlan& out) {
  const auto n = call.descriptors.size();
  if (out.rates.size() < n) out.rates.resize(n);
  out.values.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const auto& d = call.descriptors[i];
    if (d.has_own_limit())
      out.rates[i] = std::to_string(d.own_limit) + "/" + std::to_string(d.own_seconds);
    if (d.has_own_limit() || out.rules[i] >= 0) append_values(call, d, out.rates[i], out.values);
  }
}

// `keyed`: limit `l` keyed by `parts` descriptor values by position (an override's key).
void key_by_position(config::Limit& keyed, const config::Limit& l, std::size_t parts) {
  keyed.name = l.name;
  keyed.key.resize(parts);
  for (std::size_t k = 0; k < parts; ++k)
    keyed.key[k] = {config::KeyPart::Kind::descriptor, std::to_string(k), {}};
}

// A decoding that failed: `storage` as it was, no view.
std::optional<std::string_view> fail_to(std::string& storage, std::size_t size) {
  storage.resize(size);
  return std::nullopt;
}

}  // namespace

std::int64_t override_unit_seconds(int unit) {
  switch (unit) {
    case 1:  // SECOND
      return 1;
    case 2:  // MINUTE
      return 60;
    case 3:  // HOUR
      return 3600;
    case 4:  // DAY
      return 86400;
    case 5:  // MONTH (as envoyproxy/ratelimit counts it)
      return 30 * 86400;
    case 6:  // YEAR
      return 365 * 86400;
    default:
      return 0;
  }
}

void plan_descriptors(const config::Config& config, const config::RlsDomain& domain,
                      const config::Route& route, const DescriptorCall& call,
                      keys::KeyHasher& hasher, DescriptorPlan& out) {
  const auto n = call.descriptors.size();
  rules_of(domain, call, out.rules);
  out.kinds.assign(n, DescriptorKind::none);
  out.facts.resize(n);
  collect_values(call, out);
  auto& plan = out.plan;
  plan.limits.clear();
  plan.reject_status = 0;
  plan.rejected_by = nullptr;
  std::size_t items = 0, at = 0;
  const auto& ov_limit = route.limits[domain.override_limit];
  auto add = [&](std::size_t i, const config::Limit& keyed, const config::Limit& counted,
                 const config::LimitParams& params) {
    if (plan.items.size() <= items) plan.items.emplace_back();
    auto& item = plan.items[items];
    keys::build_key_into(item.key, config.store.key_prefix, route, keyed, out.facts[i], hasher);
    if (item.key.empty()) return;  // never: a descriptor has a value for every part
    limit::fill_item(item, counted, params, call.descriptors[i].hits);
    item.tag = static_cast<std::uint32_t>(i);
    plan.limits.push_back(&counted);
    ++items;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const auto& d = call.descriptors[i];
    auto& facts = out.facts[i];
    facts = keys::RequestFacts{};
    facts.route = route.name;
    if (d.has_own_limit()) {
      const std::size_t parts = 2 * d.count + 1;
      facts.descriptor = std::span<const std::string_view>(out.values).subspan(at, parts);
      at += parts;
      key_by_position(out.keyed_override, ov_limit, parts);
      config::LimitParams params;
      params.limit = d.own_limit;
      params.window = std::chrono::seconds(d.own_seconds);
      add(i, out.keyed_override, ov_limit, params);
      out.kinds[i] = DescriptorKind::limited;
      continue;
    }
    if (out.rules[i] < 0) continue;
    facts.descriptor = std::span<const std::string_view>(out.values).subspan(at, d.count);
    at += d.count;
    const auto& rule = domain.rules[static_cast<std::size_t>(out.rules[i])];
    if (rule.unlimited) {
      out.kinds[i] = DescriptorKind::unlimited;
      continue;
    }
    for (auto li : rule.limits) add(i, route.limits[li], route.limits[li], route.limits[li].params);
    out.kinds[i] = rule.limits.empty() ? DescriptorKind::none : DescriptorKind::limited;
  }
  plan.items.resize(items);
}

void append_logged_text(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '%' && c != '&' && c != '=' && c != '"' && c != '\\') {
      out += ch;
    } else {
      const char escaped[] = {'%', kHex[c >> 4], kHex[c & 15]};
      out.append(escaped, sizeof escaped);
    }
  }
}

std::optional<std::string_view> read_logged_text(std::string_view text, std::string& storage) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const auto from = storage.size();
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '&' || c == '=') return fail_to(storage, from);
    if (c == '%') {
      if (i + 2 >= text.size()) return fail_to(storage, from);
      const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return fail_to(storage, from);
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    storage += c;
  }
  return std::string_view(storage).substr(from);
}

void append_entries_text(std::string& out, std::span<const DescriptorCall::Entry> entries) {
  bool first = true;
  for (const auto& e : entries) {
    if (!first) out += '&';
    first = false;
    append_logged_text(out, e.key);
    out += '=';
    append_logged_text(out, e.value);
  }
}

bool read_entries_text(std::string_view text, std::string& storage, DescriptorCall& call) {
  const auto storage_at = storage.size();
  const auto entries_at = call.entries.size();
  auto fail = [&] {
    storage.resize(storage_at);
    call.entries.resize(entries_at);
    return false;
  };
  if (text.empty()) return false;  // a descriptor has at least one entry
  while (true) {
    const auto amp = text.find('&');
    const auto pair = text.substr(0, amp);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0) return fail();
    auto key = read_logged_text(pair.substr(0, eq), storage);
    auto value = key ? read_logged_text(pair.substr(eq + 1), storage) : std::nullopt;
    if (!key || !value) return fail();
    call.entries.push_back({*key, *value});
    if (amp == std::string_view::npos) break;
    text.remove_prefix(amp + 1);
  }
  auto& d = call.descriptors.emplace_back();
  d.first = static_cast<std::uint32_t>(entries_at);
  d.count = static_cast<std::uint32_t>(call.entries.size() - entries_at);
  return true;
}

}  // namespace floodgate::decide
