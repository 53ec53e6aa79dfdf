// `floodgate replay` against floodgate itself: an in-process proxy on a fake clock serves a
// scripted sequence of requests with its access log captured, and the replay of that log
// under the same config must refuse exactly the requests that got 429 live.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "floodgate/limit/clock.hpp"
#include "harness.hpp"
#include "replay_support.hpp"

namespace floodgate::testing {
namespace {

namespace rs = replay_support;
using namespace std::chrono_literals;

// 2026-11-30T05:10:00Z: a whole minute, so the 10 s windows below start at +0 s, +10 s, ...
constexpr limit::Micros kBase = 1'796'015'400LL * limit::kMicrosPerSecond;
static_assert(kBase % (60 * limit::kMicrosPerSecond) == 0);

struct Step {
  int at_ms;                 // after kBase
  std::string client;        // sent as X-Forwarded-For (127.0.0.1 is a trusted proxy)
  std::string api_key;       // X-Api-Key; empty: none
  std::string route;         // "web" or "api"
  int expected;              // the live status the algorithms' definitions give (see below)
  std::string target = "";   // empty: a path unique to the step (see path_of)
  std::string headers = "";  // more request headers, each ending in CRLF
};

// One worker in front of `origin`, logging what the replay needs; `forwarded_for`: the caller
// is taken from X-Forwarded-For (the steps' addresses). `routes` is the YAML under routes:.
std::string proxy_config(const Origin& origin, const std::string& routes, bool forwarded_for,
                         const std::string& log = "{ access_log: true, replay_fields: auto }") {
  return std::string("server:\n  listen: [127.0.0.1:0]\n  threads: 1\n") +
         (forwarded_for
              ? "  client_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32] }\n"
              : "") +
         "log: " + log + "\nstore: { key_secret: live-test-secret }\n" +
         "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) +
         "\" }\nroutes:\n" + routes;
}

// web: sliding_window 5 per 10 s per client; api: fixed_window 4 per 10 s per API key, and a
// token bucket of 3 refilling 1/s per client (both must admit).
std::string live_config(const Origin& origin, const std::string& log) {
  return proxy_config(
      origin,
      "  - name: api\n    match: { path_prefix: /api/ }\n    upstream: origin\n    limits:\n"
      "      - { name: per-key, algorithm: fixed_window, limit: 4, window: 10s, key: "
      "[\"header:X-Api-Key\"] }\n"
      "      - { name: per-ip, algorithm: token_bucket, capacity: 3, refill_rate: 1/s, key: "
      "[ip] }\n"
      "  - name: web\n    match: { path_prefix: / }\n    upstream: origin\n    limits:\n"
      "      - { name: per-ip, algorithm: sliding_window, limit: 5, window: 10s, key: [ip] }\n",
      true, log);
}

const std::string A = "198.51.100.1", B = "198.51.100.2", C = "198.51.100.3";

// A burst, a window boundary, refills. Expected statuses, from src/limit/algorithm.cpp:
std::vector<Step> script() {
  std::vector<Step> s;
  auto add = [&](int ms, const std::string& client, const std::string& key,
                 const std::string& route, int status) {
    s.push_back({ms, client, key, route, status});
  };
  // web, sliding window [0 s, 10 s): A bursts 7 in 60 ms: 5 admitted, 2 refused.
  for (int i = 0; i < 7; ++i) add(1000 + 10 * i, A, "", "web", i < 5 ? 200 : 429);
  for (int i = 0; i < 3; ++i) add(2000 + 10 * i, B, "", "web", 200);
  // Next window [10 s, 20 s): A's previous count 5 weighs 5 * (1 - elapsed / 10 s).
  add(10'500, A, "", "web", 429);  // 5 * 0.95 = 4.75, + 1 > 5
  add(12'500, A, "", "web", 200);  // 5 * 0.75 = 3.75, + 1 = 4.75
  add(13'000, A, "", "web", 429);  // 5 * 0.70 = 3.5, + 1 (current) + 1 = 5.5
  add(14'500, A, "", "web", 200);  // 5 * 0.55 = 2.75, + 1 + 1 = 4.75
  add(15'000, B, "", "web", 200);  // 3 * 0.5 = 1.5, + 1
  // api, fixed window [20 s, 30 s) per key; C's bucket: 3 tokens, 1/s.
  for (int i = 0; i < 3; ++i) add(20'000 + 100 * i, C, "k1", "api", 200);
  add(20'300, C, "k1", "api", 429);  // C's bucket: 0.2 + 0.1 tokens
  add(20'500, A, "k1", "api", 200);  // k1's 4th in the window; A's own bucket
  add(21'000, A, "k1", "api", 429);  // k1's 5th
  add(21'100, A, "k2", "api", 200);
  add(21'500, C, "k2", "api", 200);  // C's bucket refilled to 1.5
  add(21'600, C, "k2", "api", 429);  // 0.5 + 0.1
  add(24'000, C, "k2", "api", 200);  // refilled: 0.5 + 2.5 = 3
  add(24'010, C, "k2", "api", 200);  // k2's 4th
  add(24'020, C, "k2", "api", 429);  // k2's 5th (the bucket has 1.02)
  add(30'500, C, "k2", "api", 200);  // a new window for k2; the bucket is full again
  add(31'000, A, "", "api", 401);    // no X-Api-Key: rejected before any limit
  return s;
}

std::string path_of(const Step& s, std::size_t i) {
  return (s.route == "api" ? "/api/" : "/web/") + std::to_string(i);
}

struct Live {
  std::vector<int> statuses;
  std::vector<std::string> log;  // the access log, in timestamp order
};

// Serves the script on a fake clock set to each step's time before its request.
Live serve(const std::vector<Step>& steps, const std::string& yaml) {
  limit::FakeClock clock(kBase);
  LogCapture access;
  Proxy proxy(yaml, &clock, access.logger());
  Live out;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    clock.set(kBase + s.at_ms * 1000LL);
    std::string headers = "X-Forwarded-For: " + s.client + "\r\n";
    if (!s.api_key.empty()) headers += "X-Api-Key: " + s.api_key + "\r\n";
    auto target = s.target.empty() ? path_of(s, i) + "?q=" + std::to_string(i) : s.target;
    auto r = get(proxy.port(), target, headers + s.headers);
    out.statuses.push_back(r ? r->result_int() : -1);
  }
  EXPECT_TRUE(access.wait_for(steps.size(), 5s)) << access.lines().size() << " lines";
  out.log = access.lines();
  // A request's line is written after its response: two close ones could swap. The replay
  // decides a late line at the latest time seen, so the file must be in time order, as
  // "ts" (fixed width, UTC) gives it.
  auto ts_of = [](const std::string& line) {
    auto at = line.find("\"ts\":\"");
    return at == std::string::npos ? std::string() : line.substr(at + 6, 27);
  };
  std::stable_sort(out.log.begin(), out.log.end(),
                   [&](const auto& a, const auto& b) { return ts_of(a) < ts_of(b); });
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Checks the access log line by line against the script, then replays it under the same
// config and compares the replay's verdicts with the live statuses.
void check_replay_matches_live(const std::string& log_settings, bool hashed_ip) {
  Origin origin;
  const auto yaml = live_config(origin, log_settings);
  const auto steps = script();
  auto live = serve(steps, yaml);
  ASSERT_EQ(live.statuses.size(), steps.size());
  ASSERT_EQ(live.log.size(), steps.size());

  // The scenario itself (so that the comparison below is not between two empty sets).
  int refused_live = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(live.statuses[i], steps[i].expected) << "step " << i << " at +" << steps[i].at_ms;
    refused_live += live.statuses[i] == 429;
  }
  EXPECT_EQ(refused_live, 8);

  // The access log: one line per request with its fake-clock time and its replay fields.
  static const std::regex hash(R"(#[0-9a-f]{32})");
  std::map<std::string, std::string> hash_of_client;
  std::set<std::string> hashes;
  std::map<std::string, std::string> logged_decision;  // path -> "decision"
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("access log line " + std::to_string(i) + ": " + live.log[i]);
    auto line = boost::json::parse(live.log[i]).as_object();
    const auto& s = steps[i];  // in time order, as the script
    EXPECT_EQ(line.at("path").as_string(), path_of(s, i));
    EXPECT_EQ(line.at("ts").as_string(), rs::ts(10 * 60'000'000LL + s.at_ms * 1000LL));
    EXPECT_EQ(rs::number(line.at("status")), live.statuses[i]);
    logged_decision[path_of(s, i)] =
        line.contains("decision") ? std::string(line.at("decision").as_string()) : "";
    const auto& fields = line.at("fields").as_object();
    EXPECT_EQ(fields.at("host").as_string(), "test");
    const std::string ip(fields.at("ip").as_string());
    if (hashed_ip) {
      EXPECT_TRUE(std::regex_match(ip, hash)) << ip;
      auto [it, fresh] = hash_of_client.emplace(s.client, ip);
      EXPECT_EQ(it->second, ip) << "one client, one hash";
      if (fresh) {
        EXPECT_TRUE(hashes.insert(ip).second) << "two clients, one hash";
      }
    } else {
      EXPECT_EQ(ip, s.client);
    }
    if (s.api_key.empty()) {
      EXPECT_FALSE(fields.contains("header:x-api-key"));
    } else {
      EXPECT_EQ(fields.at("header:x-api-key").as_string(), s.api_key);
    }
  }

  rs::ScratchDir dir;
  const auto config_file = dir.write("live.yaml", yaml);
  const auto log_file = dir.write("access.log", joined(live.log));
  const auto decisions_file = dir / "decisions.tsv";
  auto r =
      rs::replay({"--config", config_file, "--json", "--decisions", decisions_file, log_file}, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto report = rs::parse_report(r.out);
  EXPECT_EQ(rs::number(report.at("lines").at("bad")), 0);
  EXPECT_EQ(rs::number(report.at("refused_at_the_time")), refused_live);
  EXPECT_EQ(rs::number(report.at("out_of_order")), 0);
  EXPECT_EQ(rs::number(report.at("candidate").at("refused")), refused_live);
  EXPECT_EQ(rs::number(report.at("candidate").at("rejected")), 1);
  EXPECT_TRUE(report.at("candidate").at("missing_inputs").as_array().empty()) << r.out;

  auto decisions = rs::read_decisions(decisions_file);
  ASSERT_EQ(decisions.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& d = decisions[i];
    const auto& s = steps[i];
    SCOPED_TRACE("step " + std::to_string(i) + " (" + s.client + " " + s.route + " +" +
                 std::to_string(s.at_ms) + " ms): " + d.path + " " + d.verdict());
    EXPECT_EQ(d.path, path_of(s, i));
    EXPECT_EQ(d.time, rs::ts(10 * 60'000'000LL + s.at_ms * 1000LL));
    EXPECT_EQ(d.route(), s.route);
    EXPECT_EQ(d.verdict() == "refused", live.statuses[i] == 429);
    EXPECT_EQ(d.verdict() == "rejected", live.statuses[i] == 401);
    EXPECT_EQ(logged_decision[d.path] == "limited", live.statuses[i] == 429);
  }
}

// The deny cache (src/limit/deny_cache.cpp) refuses a remembered caller without asking the
// store. It must not refuse what the store would admit: here C's bucket entry has expired
// and its check marks a probe, but the request is then refused by the other limit (k1 used
// up) before any probe is sent, and the next request (another key, 50 ms later) must not be
// refused as if that probe were still in flight.
TEST(ReplayLive, DenyCacheRefusesNothingTheStoreWouldAdmit) {
  Origin origin;
  const std::string yaml = proxy_config(
      origin,
      "  - name: api\n    match: { path_prefix: /api/ }\n    upstream: origin\n    limits:\n"
      "      - { name: per-ip, algorithm: token_bucket, capacity: 2, refill_rate: 1/s, key: [ip] "
      "}\n"
      "      - { name: per-key, algorithm: fixed_window, limit: 1, window: 10s, key: "
      "[\"header:X-Api-Key\"] }\n",
      true);
  const std::vector<Step> steps = {
      {0, C, "k1", "api", 200},     // bucket 2 -> 1; k1 used up until +10 s
      {100, C, "k2", "api", 200},   // bucket 1.1 -> 0.1 (remembered until +1 s); k2 used up
      {1500, C, "k1", "api", 429},  // bucket 1.5, but k1 is used up
      {1550, C, "k3", "api", 200},  // bucket 1.55, k3 fresh: admitted
  };
  auto live = serve(steps, yaml);
  rs::ScratchDir dir;
  auto r = rs::replay({"--config", dir.write("c.yaml", yaml), "--decisions", dir / "d.tsv",
                       dir.write("access.log", joined(live.log))},
                      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto decisions = rs::read_decisions(dir / "d.tsv");
  ASSERT_EQ(decisions.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(decisions[i].verdict(), steps[i].expected == 200 ? "admitted" : "refused")
        << "step " << i;
    EXPECT_EQ(live.statuses[i], steps[i].expected) << "step " << i;
  }
}

// A token budget charged up front (X-Estimated-Tokens) and settled with the origin's
// X-Tokens-Used (the test origin's /respond?H=V answers with header H: V).
std::string settle_config(const Origin& origin) {
  return proxy_config(
      origin,
      "  - name: llm\n    match: { path_prefix: / }\n"
      "    upstream: origin\n    limits:\n"
      "      - name: tokens\n        algorithm: token_bucket\n        capacity: 100\n"
      "        refill_rate: 10/s\n        key: [\"header:X-Tenant\"]\n"
      "        cost: { from: \"header:X-Estimated-Tokens\", default: 10, max: 100 }\n"
      "        settle: response_header:X-Tokens-Used\n",
      false);
}

// A step of the token budget: `estimate` charged, `used` reported by the origin (-1: no
// report, the estimate stands).
Step tokens(int at_ms, int estimate, int used, int expected) {
  return {at_ms,
          "127.0.0.1",
          "",
          "llm",
          expected,
          used < 0 ? "/respond?X-Other=1" : "/respond?X-Tokens-Used=" + std::to_string(used),
          "X-Tenant: t1\r\nX-Estimated-Tokens: " + std::to_string(estimate) + "\r\n"};
}

// Replays the live log under `yaml` and compares verdicts with the live statuses, in order.
void expect_same_verdicts(const std::vector<Step>& steps, const Live& live,
                          const std::string& yaml) {
  ASSERT_EQ(live.log.size(), steps.size());
  rs::ScratchDir dir;
  auto r = rs::replay({"--config", dir.write("c.yaml", yaml), "--decisions", dir / "d.tsv",
                       dir.write("access.log", joined(live.log))},
                      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto decisions = rs::read_decisions(dir / "d.tsv");
  ASSERT_EQ(decisions.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(decisions[i].time, rs::ts(10 * 60'000'000LL + steps[i].at_ms * 1000LL)) << i;
    EXPECT_EQ(decisions[i].verdict() == "refused", live.statuses[i] == 429)
        << "step " << i << ": live " << live.statuses[i] << ", replay " << decisions[i].verdict();
  }
}

TEST(ReplayLive, SettledCostsReplayLikeTheLiveProxy) {
  Origin origin;
  const auto yaml = settle_config(origin);
  // Tokens (capacity 100, 10/s) after each step, from algorithm.cpp's token_bucket() and
  // adjust():
  const std::vector<Step> steps = {
      tokens(0, 10, 60, 200),     // 100 - 10 = 90, settled 50 more: 40
      tokens(100, 30, 30, 200),   // 41 - 30 = 11
      tokens(200, 20, 5, 429),    // 12 < 20
      tokens(1200, 20, 5, 200),   // 22 - 20 = 2, refunded 15: 17
      tokens(1300, 18, 18, 200),  // 18 - 18 = 0
      tokens(1400, 5, 5, 429),    // 1 < 5
      tokens(2000, 5, 0, 200),    // 7 - 5 = 2, refunded 5: 7
      tokens(2100, 8, -1, 200),   // 8 - 8 = 0, nothing reported
      tokens(3000, 8, 8, 200),    // 9 - 8 = 1
  };
  auto live = serve(steps, yaml);
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(live.statuses[i], steps[i].expected) << "step " << i;
  for (std::size_t i : {0u, 3u, 6u})
    EXPECT_NE(live.log[i].find("\"settle\":{\"x-tokens-used\":\""), std::string::npos)
        << live.log[i];
  EXPECT_EQ(live.log[7].find("\"settle\""), std::string::npos) << live.log[7];
  expect_same_verdicts(steps, live, yaml);
}

// The deny cache remembers the admission that took the last tokens as a refusal until they
// refill (decide/gate.cpp, DenyCache::admitted); when the response then settles the cost
// down, the refund is in the store, and the next request must be decided with it.
TEST(ReplayLive, DenyCacheForgetsARefusalThatASettlementRefunded) {
  Origin origin;
  const auto yaml = settle_config(origin);
  const std::vector<Step> steps = {
      tokens(0, 100, 10, 200),     // 100 - 100 = 0, refunded 90: 90
      tokens(1000, 100, 10, 200),  // 100 - 100 = 0 again
  };
  auto live = serve(steps, yaml);
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(live.statuses[i], steps[i].expected) << "step " << i;
  expect_same_verdicts(steps, live, yaml);
}

// A concurrency lease is held while the request is in flight; the replay holds it for the
// logged duration_ms after the logged ts.
TEST(ReplayLive, ConcurrencyLeasesAreHeldForTheLoggedDuration) {
  Origin origin;
  const std::string yaml = proxy_config(
      origin,
      "  - name: slow\n    match: { path_prefix: / }\n    upstream: origin\n    limits:\n"
      "      - { name: in-flight, algorithm: concurrency, limit: 1, key: [ip] }\n",
      true);
  limit::FakeClock clock(kBase);
  LogCapture access;
  std::vector<int> statuses;
  {
    Proxy proxy(yaml, &clock, access.logger());
    auto from = [](const std::string& client) { return "X-Forwarded-For: " + client + "\r\n"; };
    Client slow(proxy.port());
    slow.send("GET /slow/300 HTTP/1.1\r\nHost: test\r\n" + from(A) + "\r\n");
    // Once the origin has it, the proxy holds A's lease.
    for (int i = 0; i < 500 && origin.requests() == 0; ++i) std::this_thread::sleep_for(2ms);
    ASSERT_EQ(origin.requests(), 1u);
    clock.set(kBase + 10'000);
    statuses.push_back(get(proxy.port(), "/slow/0", from(A))->result_int());
    clock.set(kBase + 20'000);
    statuses.push_back(get(proxy.port(), "/slow/0", from(B))->result_int());
    auto first = slow.read_response();
    ASSERT_TRUE(first);
    statuses.insert(statuses.begin(), first->result_int());
    clock.set(kBase + 1'000'000);
    statuses.push_back(get(proxy.port(), "/slow/0", from(A))->result_int());
    ASSERT_TRUE(access.wait_for(4, 5s));
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 429, 200, 200}));
  std::vector<Step> steps = {{0, A, "", "slow", 200},
                             {10, A, "", "slow", 429},
                             {20, B, "", "slow", 200},
                             {1000, A, "", "slow", 200}};
  Live live{statuses, access.lines()};
  std::sort(live.log.begin(), live.log.end());  // the slow one finished last
  ASSERT_EQ(live.log.size(), 4u);
  auto first = boost::json::parse(live.log[0]).as_object();
  EXPECT_EQ(first.at("path").as_string(), "/slow/300");
  EXPECT_GE(first.at("duration_ms").to_number<double>(), 290.0);
  expect_same_verdicts(steps, live, yaml);
}

// An absolute-form target (GET http://host/path HTTP/1.1, which a server must accept) is
// routed and keyed by its authority and path: the access log must let the replay do the
// same, refused requests (never rewritten for the upstream) included.
TEST(ReplayLive, AbsoluteFormTargetsReplayLikeTheLiveProxy) {
  Origin origin;
  const std::string yaml = proxy_config(
      origin,
      "  - name: a\n    match: { path_prefix: /abs/, host: a.example }\n"
      "    upstream: origin\n    limits:\n"
      "      - { name: per-host, algorithm: fixed_window, limit: 1, window: 10s, key: [host] }\n",
      false);
  auto absolute = [](int ms, int expected) {
    return Step{ms, "127.0.0.1", "", "a", expected, "http://a.example/abs/x?q=1", ""};
  };
  const std::vector<Step> steps = {absolute(0, 200), absolute(100, 429), absolute(200, 429)};
  auto live = serve(steps, yaml);  // (the Host header says "test")
  for (std::size_t i = 0; i < steps.size(); ++i)
    EXPECT_EQ(live.statuses[i], steps[i].expected) << "step " << i;
  for (const auto& line : live.log) {
    auto json = boost::json::parse(line).as_object();
    EXPECT_EQ(std::string(json.at("path").as_string()), "/abs/x") << line;
    EXPECT_EQ(std::string(json.at("fields").at("host").as_string()), "a.example") << line;
  }
  expect_same_verdicts(steps, live, yaml);
}

TEST(ReplayLive, RefusesExactlyWhatTheLiveProxyRefused) {
  check_replay_matches_live("{ access_log: true, replay_fields: auto }", false);
}

TEST(ReplayLive, HashedClientAddressesReplayIdentically) {
  check_replay_matches_live("{ access_log: true, replay_fields: auto, replay_hashed: [ip] }", true);
}

}  // namespace
}  // namespace floodgate::testing
