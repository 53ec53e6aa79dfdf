#pragma once
// What the single-Redis and the cluster stores share: the arguments of the acquire and adjust
// scripts, and the decoding of their replies.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/limit/clock.hpp"
#include "floodgate/store/item.hpp"
#include "store/redis/node_address.hpp"

struct redisReply;

namespace floodgate::store::redis {

class Connection;

// How a script call reaches Redis. Redis 7 runs floodgate's library as functions (FCALL),
// loaded once per server: a call that finds no library is sent again after a FUNCTION LOAD
// (pipelined: no extra round trip). A Redis without functions, or a user whose ACL does not
// allow them, gets the same code as scripts: EVALSHA, and EVAL when its script cache lacks it.
enum class Via { fcall, load_then_fcall, evalsha, eval };

// The library under a name of its content, so that two floodgate versions sharing a Redis
// during a rolling upgrade each call their own code: FUNCTION LOAD of a name Redis has is
// always the same text (its "already exists" is success).
struct Scripts {
  std::string library;                    // the FUNCTION LOAD text
  std::string acquire_fn, adjust_fn;      // FCALL names
  std::string acquire_text, adjust_text;  // the script forms (EVAL)
  std::string acquire_sha, adjust_sha;    // and their SHA1 (EVALSHA)
  // From `body` (a library's text without its name; empty: the shipped one, library_body()).
  static Scripts compute(std::string_view body = {});
};

enum class Script { acquire, adjust };

// args[0] and args[1] of a script call: FCALL name, EVALSHA sha or EVAL text.
void address(std::vector<std::string>& args, Script script, Via via, const Scripts& scripts);
// After `r` answered a call sent `via`: how to send that call again, or nullopt when r is its
// answer (a decision, or an error that sending again would not change).
std::optional<Via> resend_via(const redisReply* r, Via via);

// What one server has shown about functions: FCALL until a reply says it runs none of ours
// (Redis 6, an ACL without FCALL, a library that does not load), scripts from then on.
struct ServerWay {
  Via via = Via::fcall;
  // `next` (from resend_via) is how the call goes again; scripts stay for every later call.
  // True when that is news (worth one log line).
  bool follow(Via next);
};

// What goes before a call sent `via` on `conn`: the library, when that way loads it first
// (pipelined: no extra round trip; "already exists" is as good as loaded).
void load_library_for(Connection& conn, Via via, const Scripts& scripts,
                      std::chrono::steady_clock::time_point deadline);

// One call of lua/acquire.lua deciding `requests` in order, each on its own (all-or-nothing
// across its items, its own answer); `now` is "" (Redis TIME) except in the differential
// tests.
std::vector<std::string> acquire_args(const std::vector<const std::vector<Item>*>& requests,
                                      const Scripts& scripts, Via via, const std::string& now,
                                      const std::string& default_lease);
std::vector<std::string> acquire_args(const std::vector<Item>& items, const Scripts& scripts,
                                      Via via, const std::string& now,
                                      const std::string& default_lease);
// lua/adjust.lua for one item and a delta.
std::vector<std::string> adjust_args(const Item& item, std::int64_t delta, const Scripts& scripts,
                                     Via via, const std::string& now);

// The scripts' time argument: "" (they read Redis's TIME) unless a test clock is given.
std::string now_arg(const limit::Clock* test_clock);
// The window argument of an item: its window in µs, or for a quota the calendar periods
// around `now` (now_arg's text; "" the system clock) as lua/acquire.lua's period_of reads them.
std::string window_arg(const limit::Params& p, const std::string& now);

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

// The answer to acquire_args for `requests`: {now, per request: all_admitted, per item:
// admitted, remaining, reset_after, retry_after, and what it took when it has a holder}. Per
// request an Outcome (each decision's limit is its capacity; an item without a holder took
// its cost when admitted), or protocol for a request whose decision raised an error in Redis
// (-1, then the message, which goes to `error` when given). nullopt: the reply as a whole is
// not that shape, and every request in it fails.
std::optional<std::vector<AcquireResult>> decode_outcomes(
    const redisReply* r, const std::vector<const std::vector<Item>*>& requests,
    std::string* error = nullptr);
// One request's: an Outcome, or nullopt.
std::optional<Outcome> decode_outcome(const redisReply* r, const std::vector<Item>& items);

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
