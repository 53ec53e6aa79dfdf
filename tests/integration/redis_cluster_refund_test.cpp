// Cross-slot all-or-nothing on a real 3-master cluster, for every algorithm (issue 15, defect
// 6): a request whose limits live in different slots is decided slot by slot in ascending slot
// order, and a refusal by a later slot refunds what the earlier ones charged. The keys are
// computed here as the proxy builds them, so the charged limit's slot is known to come first
// and a refund really has to happen; the charged limit's state is then read from Redis.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "floodgate/keys/key_builder.hpp"
#include "floodgate_process.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "store/redis/script_calls.hpp"

namespace floodgate::testing {
namespace {

struct OneHeader final : keys::HeaderSource {
  std::string name, value;
  std::optional<std::string_view> header(std::string_view n) const override {
    if (n.size() != name.size() ||
        !std::equal(n.begin(), n.end(), name.begin(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
      return std::nullopt;
    return value;
  }
};

struct Case {
  std::string algorithm;
  std::string spec;  // the charged limit's parameters
};

const std::vector<Case> kCases = {
    {"token_bucket", "capacity: 100, refill_rate: 1/h"},
    {"gcra", "capacity: 100, refill_rate: 1/h"},
    {"sliding_window", "limit: 100, window: 1h"},
    {"sliding_log", "limit: 100, window: 1h"},
    {"fixed_window", "limit: 100, window: 1h"},
    {"concurrency", "limit: 100"},
};

// Route r-<algorithm>: `charged` (key: [route]) and `gate` (one per X-User, fixed_window 1).
std::string routes() {
  std::string out = kProbeRoute;
  for (const auto& c : kCases)
    out += "  - name: r-" + c.algorithm + "\n    match: { path_prefix: /" + c.algorithm +
           " }\n    upstream: origin\n    on_store_error: fail_closed\n    limits:\n" +
           "      - { name: charged, algorithm: " + c.algorithm + ", " + c.spec +
           ", key: [route] }\n" +
           "      - { name: gate, algorithm: fixed_window, limit: 1, window: 1h, key: "
           "[\"header:X-User\"] }\n";
  return out;
}

std::string key_of(const config::Config& cfg, const std::string& route, const std::string& limit,
                   const std::string& user) {
  keys::KeyHasher hasher(cfg.store.key_secret);
  for (const auto& r : cfg.routes) {
    if (r.name != route) continue;
    for (const auto& l : r.limits) {
      if (l.name != limit) continue;
      OneHeader headers;
      headers.name = "X-User";
      headers.value = user;
      keys::RequestFacts facts;
      facts.route = r.name;
      facts.headers = &headers;
      return keys::build_key(cfg.store.key_prefix, r, l, facts, hasher).key;
    }
  }
  return {};
}

std::string shell_quoted(const std::string& key) {
  return "'" + key + "'";
}

TEST(RedisClusterStore, ARefusalInALaterSlotRefundsEveryAlgorithmInEarlierSlots) {
  RedisCluster cluster;
  Origin origin;
  auto yaml = cluster_config(0, origin.port(), cluster, routes());
  auto cfg = load_or_fail(yaml);
  Proxy proxy(yaml);
  wait_enforced(proxy.port(), "/probe");
  auto any = cluster.ports().front();
  for (const auto& c : kCases) {
    auto route = "r-" + c.algorithm;
    auto charged = key_of(*cfg, route, "charged", "");
    int charged_slot = store::redis::key_slot(charged);
    // A caller whose gate key's slot comes after the charged limit's: the charge happens first.
    std::string user;
    for (int i = 0; user.empty(); ++i) {
      auto candidate = "user-" + std::to_string(i);
      if (store::redis::key_slot(key_of(*cfg, route, "gate", candidate)) > charged_slot)
        user = candidate;
    }
    auto send = [&] {
      auto r = get(proxy.port(), "/" + c.algorithm, "X-User: " + user + "\r\n");
      return r ? static_cast<int>(r->result_int()) : -1;
    };
    ASSERT_EQ(send(), 200) << c.algorithm;
    for (int i = 0; i < 5; ++i) ASSERT_EQ(send(), 429) << c.algorithm;  // charged, refunded
    // Refunds are sent without waiting: read until they have landed (or the test fails).
    std::string state;
    auto holds_one_unit = [&] {
      if (c.algorithm == "sliding_log" || c.algorithm == "concurrency") {
        state = cluster.cli(any, "-c ZCARD " + shell_quoted(charged));
        // The admitted request's log entry; a concurrency lease went back with its response.
        return state == (c.algorithm == "sliding_log" ? "1" : "0");
      }
      state = cluster.cli(any, "-c " + state_command(charged));
      std::istringstream in(state);
      double a = 0, b = 0;
      in >> a >> b;
      if (c.algorithm == "token_bucket") return std::lround(a) == 99;  // tokens left
      if (c.algorithm == "gcra") return std::lround(a) == 1;           // debt
      return std::lround(b) == 1;  // sliding_window "start count previous", fixed "start count"
    };
    EXPECT_TRUE(eventually(holds_one_unit, std::chrono::seconds(3)))
        << c.algorithm
        << ": charged limit's state after 1 admitted and 5 refunded requests: " << state << " (key "
        << charged << ", slot " << charged_slot << ")";
  }
}

}  // namespace
}  // namespace floodgate::testing
