#include "script_calls.hpp"

#include <hiredis/hiredis.h>

#include <charconv>

#include "store/redis/redis_connection.hpp"
#include "store/redis/scripts.hpp"

namespace floodgate::store::redis {

namespace {
std::string number(double v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}
}  // namespace

Scripts Scripts::compute(std::string_view body) {
  Scripts s;
  if (body.empty()) body = library_body();
  const auto tag = sha1_hex(body).substr(0, 16);
  s.acquire_fn = "fg_acquire_" + tag;
  s.adjust_fn = "fg_adjust_" + tag;
  s.library = "#!lua name=floodgate_" + tag + "\n";
  s.library += body;
  s.library += "\nredis.register_function('" + s.acquire_fn + "', acquire)\n";
  s.library += "redis.register_function('" + s.adjust_fn + "', adjust)\n";
  s.acquire_text = std::string(body) + "\nreturn acquire(KEYS, ARGV)\n";
  s.adjust_text = std::string(body) + "\nreturn adjust(KEYS, ARGV)\n";
  s.acquire_sha = sha1_hex(s.acquire_text);
  s.adjust_sha = sha1_hex(s.adjust_text);
  return s;
}

void address(std::vector<std::string>& args, Script script, Via via, const Scripts& scripts) {
  const bool acquire = script == Script::acquire;
  switch (via) {
    case Via::fcall:
    case Via::load_then_fcall:
      args[0] = "FCALL";
      args[1] = acquire ? scripts.acquire_fn : scripts.adjust_fn;
      break;
    case Via::evalsha:
      args[0] = "EVALSHA";
      args[1] = acquire ? scripts.acquire_sha : scripts.adjust_sha;
      break;
    case Via::eval:
      args[0] = "EVAL";
      args[1] = acquire ? scripts.acquire_text : scripts.adjust_text;
      break;
  }
}

std::optional<Via> resend_via(const redisReply* r, Via via) {
  if (!r || r->type != REDIS_REPLY_ERROR) return std::nullopt;
  std::string_view e(r->str, r->len);
  switch (via) {
    case Via::fcall:
    case Via::load_then_fcall:
      // Redis 6 ("unknown command 'FCALL'"), or an ACL without functions: scripts instead.
      if (e.find("unknown command") != std::string_view::npos || e.starts_with("NOPERM"))
        return Via::evalsha;
      // FUNCTION FLUSH, or a server that never had it: once more behind a FUNCTION LOAD; and
      // if it still has none (the load failed), as a script.
      if (e.starts_with("ERR Function not found"))
        return via == Via::fcall ? Via::load_then_fcall : Via::evalsha;
      return std::nullopt;
    case Via::evalsha:
      if (is_noscript(r)) return Via::eval;
      return std::nullopt;
    case Via::eval:
      return std::nullopt;
  }
  return std::nullopt;
}

bool ServerWay::follow(Via next) {
  if (next != Via::evalsha || via == Via::evalsha) return false;
  via = Via::evalsha;
  return true;
}

void load_library_for(Connection& conn, Via via, const Scripts& scripts,
                      std::chrono::steady_clock::time_point deadline) {
  if (via == Via::load_then_fcall)
    conn.command({"FUNCTION", "LOAD", scripts.library}, deadline,
                 [](const redisReply*, CommandStatus) {});
}

std::vector<std::string> acquire_args(const std::vector<const std::vector<Item>*>& requests,
                                      const Scripts& scripts, Via via, const std::string& now,
                                      const std::string& default_lease) {
  std::size_t keys = 0, items = 0;
  for (const auto* r : requests) {
    items += r->size();
    for (const auto& i : *r) keys += i.leased.holder.empty() ? 1 : 2;
  }
  std::vector<std::string> a;
  a.reserve(4 + keys + 2 * requests.size() + items * 7 + (keys - items) * 3);
  a.resize(2);
  address(a, Script::acquire, via, scripts);
  a.push_back(std::to_string(keys));
  for (const auto* r : requests)
    for (const auto& i : *r) {
      a.push_back(i.key);
      if (!i.leased.holder.empty()) a.push_back(i.key + ":leases");
    }
  a.push_back(now);
  for (const auto* r : requests) {
    std::string lease;
    for (const auto& i : *r)
      if (!i.lease.empty()) lease = i.lease;
    a.push_back(lease.empty() ? default_lease : lease);
    a.push_back(std::to_string(r->size()));
    for (const auto& i : *r) {
      a.push_back(std::to_string(static_cast<int>(i.params.algorithm)));
      a.push_back(std::to_string(i.params.capacity));
      a.push_back(number(i.params.per_second));
      a.push_back(window_arg(i.params, now));
      a.push_back(std::to_string(i.cost));
      a.emplace_back(i.enforce ? "1" : "0");
      a.push_back(i.leased.holder);
      if (i.leased.holder.empty()) continue;  // (take_up_to is a lease's: it has a holder)
      a.push_back(std::to_string(i.take_up_to));
      a.push_back(std::to_string(i.leased.settled));
      a.push_back(std::to_string(i.leased.ttl));
    }
  }
  return a;
}

std::vector<std::string> acquire_args(const std::vector<Item>& items, const Scripts& scripts,
                                      Via via, const std::string& now,
                                      const std::string& default_lease) {
  return acquire_args(std::vector<const std::vector<Item>*>{&items}, scripts, via, now,
                      default_lease);
}

std::vector<std::string> adjust_args(const Item& item, std::int64_t delta, const Scripts& scripts,
                                     Via via, const std::string& now) {
  const bool leased = !item.leased.holder.empty();
  std::vector<std::string> a(2);
  address(a, Script::adjust, via, scripts);
  a.emplace_back(leased ? "2" : "1");
  a.push_back(item.key);
  if (leased) a.push_back(item.key + ":leases");
  a.push_back(now);
  a.push_back(std::to_string(static_cast<int>(item.params.algorithm)));
  a.push_back(std::to_string(item.params.capacity));
  a.push_back(number(item.params.per_second));
  a.push_back(window_arg(item.params, now));
  a.push_back(std::to_string(delta));
  if (leased) {
    a.push_back(item.leased.holder);
    a.push_back(std::to_string(item.leased.settled));
    a.emplace_back(item.leased.returning ? "1" : "0");
  }
  return a;
}

std::string window_arg(const limit::Params& p, const std::string& now) {
  if (p.max_delay > 0) return std::to_string(p.delay_allowance());  // buckets only
  if (!p.period) return std::to_string(p.window);
  limit::Micros t = 0;
  if (now.empty() || std::from_chars(now.data(), now.data() + now.size(), t).ec != std::errc())
    t = limit::SystemClock().now();
  const auto span = p.period->at(t);
  std::string out = std::to_string(p.period->at(span.start - 1).start);
  for (auto bound : {span.start, span.end, p.period->at(span.end).end}) {
    out += ' ';
    out += std::to_string(bound);
  }
  return out;
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

std::optional<std::vector<AcquireResult>> decode_outcomes(
    const redisReply* r, const std::vector<const std::vector<Item>*>& requests,
    std::string* error) {
  auto leased = [](const Item& i) { return !i.leased.holder.empty(); };
  auto width = [&](const std::vector<Item>& items) {  // a request's answer: status, items
    std::size_t n = 1;
    for (const auto& i : items) n += leased(i) ? 5 : 4;
    return n;
  };
  std::size_t total = 1;
  for (const auto* items : requests) total += width(*items);
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != total) return std::nullopt;
  auto integer = [&](std::size_t i) { return r->element[i]->type == REDIS_REPLY_INTEGER; };
  auto at = [&](std::size_t i) { return static_cast<std::int64_t>(r->element[i]->integer); };
  if (!integer(0)) return std::nullopt;
  const limit::Micros now = at(0);
  std::vector<AcquireResult> out;
  out.reserve(requests.size());
  std::size_t b = 1;
  for (const auto* items : requests) {
    const std::size_t end = b + width(*items);
    if (!integer(b)) return std::nullopt;
    if (at(b) == -1) {  // this request's decision raised an error in Redis
      const auto* m = r->element[b + 1];
      if (error && m->type == REDIS_REPLY_STRING) *error = std::string(m->str, m->len);
      out.emplace_back(StoreError::protocol);
      b = end;
      continue;
    }
    for (std::size_t e = b + 1; e < end; ++e)
      if (!integer(e)) return std::nullopt;
    Outcome o;
    o.admitted = at(b) == 1;
    o.now = now;
    o.decisions.reserve(items->size());
    std::size_t e = b + 1;
    for (const auto& i : *items) {
      limit::Decision d;
      d.admitted = at(e) == 1;
      d.remaining = at(e + 1);
      d.reset_after = at(e + 2);
      d.retry_after = at(e + 3);
      if (d.admitted && i.params.max_delay > 0) {  // the script's answer: the delay
        d.delay = d.retry_after;
        d.retry_after = 0;
      }
      d.limit = i.params.capacity;
      e += 4;
      if (leased(i))
        d.granted = at(e++);
      else
        d.granted = d.admitted ? i.cost : 0;
      o.decisions.push_back(d);
    }
    out.emplace_back(std::move(o));
    b = end;
  }
  return out;
}

std::optional<Outcome> decode_outcome(const redisReply* r, const std::vector<Item>& items) {
  auto all = decode_outcomes(r, std::vector<const std::vector<Item>*>{&items});
  if (!all) return std::nullopt;
  auto* o = std::get_if<Outcome>(&all->front());
  if (!o) return std::nullopt;
  return std::move(*o);
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
