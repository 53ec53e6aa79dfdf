#include "script_calls.hpp"

#include <hiredis/hiredis.h>

#include <charconv>

#include "store/redis/scripts.hpp"

namespace floodgate::store::redis {

namespace {
std::string number(double v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}
}  // namespace

ScriptShas ScriptShas::compute() {
  return {sha1_hex(acquire_script()), sha1_hex(adjust_script())};
}

std::vector<std::string> acquire_args(const std::vector<Item>& items, const ScriptShas& shas,
                                      bool use_eval, const std::string& now,
                                      const std::string& default_lease) {
  std::vector<std::string> a;
  a.reserve(5 + items.size() * 10);
  a.emplace_back(use_eval ? "EVAL" : "EVALSHA");
  a.emplace_back(use_eval ? std::string(acquire_script()) : shas.acquire);
  a.push_back(std::to_string(items.size()));
  for (const auto& i : items) a.push_back(i.key);
  a.push_back(now);
  std::string lease;
  for (const auto& i : items)
    if (!i.lease.empty()) lease = i.lease;
  a.push_back(lease.empty() ? default_lease : lease);
  for (const auto& i : items) {
    a.push_back(std::to_string(static_cast<int>(i.params.algorithm)));
    a.push_back(std::to_string(i.params.capacity));
    a.push_back(number(i.params.per_second));
    a.push_back(std::to_string(i.params.window));
    a.push_back(std::to_string(i.cost));
    a.emplace_back(i.enforce ? "1" : "0");
    a.push_back(std::to_string(i.take_up_to));
    a.push_back(i.leased.holder);
    a.push_back(std::to_string(i.leased.settled));
    a.push_back(std::to_string(i.leased.ttl));
  }
  return a;
}

std::vector<std::string> adjust_args(const Item& item, std::int64_t delta, const ScriptShas& shas,
                                     const std::string& now) {
  std::vector<std::string> a{"EVALSHA",
                             shas.adjust,
                             "1",
                             item.key,
                             now,
                             std::to_string(static_cast<int>(item.params.algorithm)),
                             std::to_string(item.params.capacity),
                             number(item.params.per_second),
                             std::to_string(item.params.window),
                             std::to_string(delta)};
  if (!item.leased.holder.empty()) {
    a.push_back(item.leased.holder);
    a.push_back(std::to_string(item.leased.settled));
    a.emplace_back(item.leased.returning ? "1" : "0");
  }
  return a;
}

std::string now_arg(const limit::Clock* test_clock) {
  return test_clock ? std::to_string(test_clock->now()) : std::string();
}

std::string log_member(std::string_view lease, limit::Micros now, std::int64_t cost) {
  std::string out(lease);
  out += ':';
  out += std::to_string(now);
  out += ':';
  out += std::to_string(cost);
  return out;
}

bool is_noscript(const redisReply* r) {
  return r && r->type == REDIS_REPLY_ERROR &&
         std::string_view(r->str, r->len).starts_with("NOSCRIPT");
}

std::optional<Redirect> redirect_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ERROR) return std::nullopt;
  std::string_view e(r->str, r->len);
  Redirect out;
  if (e.starts_with("MOVED "))
    e.remove_prefix(6);
  else if (e.starts_with("ASK "))
    e.remove_prefix(4), out.ask = true;
  else
    return std::nullopt;
  auto space = e.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto [p, ec] = std::from_chars(e.data(), e.data() + space, out.slot);
  // The cluster store indexes its 16384-entry slot table with it: refuse anything else.
  if (ec != std::errc{} || p != e.data() + space || out.slot < 0 || out.slot >= kClusterSlots)
    return std::nullopt;
  auto node = parse_node_address(e.substr(space + 1));
  if (!node) return std::nullopt;
  out.node = std::move(*node);
  return out;
}

std::optional<Outcome> decode_outcome(const redisReply* r, std::size_t items) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 + 6 * items) return std::nullopt;
  for (std::size_t i = 0; i < r->elements; ++i)
    if (r->element[i]->type != REDIS_REPLY_INTEGER) return std::nullopt;
  auto at = [&](std::size_t i) { return static_cast<std::int64_t>(r->element[i]->integer); };
  Outcome out;
  out.admitted = at(0) == 1;
  out.now = at(1);
  for (std::size_t i = 0; i < items; ++i) {
    limit::Decision d;
    std::size_t b = 2 + 6 * i;
    d.admitted = at(b) == 1;
    d.remaining = at(b + 1);
    d.reset_after = at(b + 2);
    d.retry_after = at(b + 3);
    d.limit = at(b + 4);
    d.granted = at(b + 5);
    out.decisions.push_back(d);
  }
  return out;
}

std::vector<SlotRange> slot_ranges_of(const redisReply* r) {
  std::vector<SlotRange> out;
  if (!r || r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    // [from, to, [host, port, id...], replicas...]
    const auto* range = r->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
    const auto* from = range->element[0];
    const auto* to = range->element[1];
    const auto* master = range->element[2];
    if (from->type != REDIS_REPLY_INTEGER || to->type != REDIS_REPLY_INTEGER ||
        master->type != REDIS_REPLY_ARRAY || master->elements < 2)
      continue;
    const auto* host = master->element[0];
    const auto* port = master->element[1];
    if (host->type != REDIS_REPLY_STRING || port->type != REDIS_REPLY_INTEGER) continue;
    if (from->integer < 0 || to->integer >= kClusterSlots || from->integer > to->integer) continue;
    auto node = make_node_address(std::string_view(host->str, host->len), port->integer);
    if (!node) continue;
    out.push_back(
        {static_cast<int>(from->integer), static_cast<int>(to->integer), std::move(*node)});
  }
  return out;
}

int key_slot(std::string_view key) {
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  std::uint16_t crc = 0;
  for (unsigned char c : key) {
    crc ^= static_cast<std::uint16_t>(c) << 8;
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc % kClusterSlots;
}

}  // namespace floodgate::store::redis
