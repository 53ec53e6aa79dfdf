#pragma once
// What the single-Redis and the cluster stores share: the arguments of the acquire and adjust
// scripts, and the decoding of their replies.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/item.hpp"
#include "store/redis/node_address.hpp"

struct redisReply;

namespace floodgate::store::redis {

struct ScriptShas {
  std::string acquire;
  std::string adjust;
  static ScriptShas compute();
};

// EVALSHA (or EVAL with the script body) of lua/acquire.lua for `items`; `now` is "" (Redis
// TIME) except in the differential tests.
std::vector<std::string> acquire_args(const std::vector<Item>& items, const ScriptShas& shas,
                                      bool use_eval, const std::string& now,
                                      const std::string& default_lease);
// lua/adjust.lua for one item and a delta.
std::vector<std::string> adjust_args(const Item& item, std::int64_t delta, const ScriptShas& shas,
                                     const std::string& now);

// The scripts' time argument: "" (they read Redis's TIME) unless a test clock is given.
std::string now_arg(const limit::Clock* test_clock);

// The member lua/acquire.lua adds to a sliding_log item's sorted set, "<lease>:<now>:<cost>"
// with both numbers as plain integers; a cross-slot refund removes exactly this member.
std::string log_member(std::string_view lease, limit::Micros now, std::int64_t cost);

bool is_noscript(const redisReply* r);
// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> the slot and the node to ask. A redirect whose
// slot or node does not parse is no redirect (nullopt): that decision fails as a protocol error.
struct Redirect {
  bool ask = false;
  int slot = 0;
  NodeAddress node;
};
std::optional<Redirect> redirect_of(const redisReply* r);

// {all_admitted, now, (admitted, remaining, reset_after, retry_after, limit, granted) per item}
std::optional<Outcome> decode_outcome(const redisReply* r, std::size_t items);

// A CLUSTER SLOTS reply -> which master owns each slot range. Ranges that are malformed, fall
// outside 0..16383 or name a node that is not a host and a port in 1..65535 are skipped: a
// reply is input, and the cluster store indexes a 16384-entry table with these numbers.
struct SlotRange {
  int from = 0;
  int to = 0;  // inclusive
  NodeAddress node;
};
std::vector<SlotRange> slot_ranges_of(const redisReply* r);
constexpr int kClusterSlots = 16384;

// Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag (the part between the first '{'
// and the next '}', when not empty) or of the whole key, modulo 16384.
int key_slot(std::string_view key);

}  // namespace floodgate::store::redis
