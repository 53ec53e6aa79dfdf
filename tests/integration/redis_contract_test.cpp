// Contract behaviours of the Redis store that only show with a real redis-server and, where
// the admin listener, signals or process death are the point, the real binary: every
// degraded decision counted, /readyz with a dead store, a dead instance's concurrency lease,
// the expiry of every algorithm's key, and the store timeout's lower and upper bounds.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <thread>

#include "floodgate_process.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// One route per on_store_error policy, none anywhere near its limit: each request is exactly
// one store decision (no refusal, so the deny cache never answers instead).
const std::string kPolicyRoutes = R"(
  - name: up
    match: { path_prefix: /__up }
    upstream: origin
  - name: open
    match: { path_prefix: /open }
    upstream: origin
    on_store_error: fail_open
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
  - name: closed
    match: { path_prefix: /closed }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
  - name: local
    match: { path_prefix: /local }
    upstream: origin
    on_store_error: local
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
)";

std::string readyz_body(bool healthy, int healthy_connections) {
  return std::string(R"({"ready":true,"draining":false,"store":{"backend":"redis","healthy":)") +
         (healthy ? "true" : "false") +
         ",\"healthy_connections\":" + std::to_string(healthy_connections) +
         ",\"connections\":2}}\n";
}

// The real binary (2 workers) on a Redis store, with its admin listener.
struct DeadStore : ::testing::Test {
  RedisServer redis;
  Origin origin;
  std::uint16_t port = free_port();
  std::uint16_t admin = free_port();
  std::unique_ptr<ChildProcess> fg;

  void SetUp() override {
    launch(redis.port());
    ASSERT_TRUE(eventually([&] { return readyz() == std::pair(200, readyz_body(true, 2)); }, 10s))
        << readyz().second;
  }
  void launch(std::uint16_t redis_port) {
    auto path =
        write_temp_file("dead-store-" + std::to_string(port),
                        redis_config(port, origin.port(), redis_port, kPolicyRoutes, "100ms",
                                     "admin: { listen: 127.0.0.1:" + std::to_string(admin) +
                                         " }\nlog: { level: error }\n"));
    fg = std::make_unique<ChildProcess>(
        std::vector<std::string>{FLOODGATE_BINARY, "--config", path});
    wait_serving(port);
    // The admin listener starts on its own thread: serving traffic does not mean it is up yet.
    wait_serving(admin, "/healthz");
  }

  std::string metrics() {
    auto r = get(admin, "/metrics");
    return r ? r->body() : "";
  }
  std::pair<int, std::string> readyz() {
    auto r = get(admin, "/readyz");
    if (!r) return {-1, ""};
    return {r->result_int(), r->body()};
  }
  int status(const std::string& target) {
    auto r = get(port, target);
    return r ? r->result_int() : -1;
  }
};

std::string outcome(const std::string& route, const std::string& o) {
  return "floodgate_requests_total{route=\"" + route + "\",outcome=\"" + o + "\"}";
}
std::string errors(const std::string& kind) {
  return "floodgate_store_errors_total{kind=\"" + kind + "\"}";
}

TEST_F(DeadStore, EveryDegradedDecisionIsCountedByPolicyAndEveryStoreErrorByKind) {
  for (auto target : {"/open/a", "/closed/a", "/local/a"}) EXPECT_EQ(status(target), 200);
  auto before = metrics();
  for (auto route : {"open", "closed", "local"})
    EXPECT_EQ(metric(before, outcome(route, "admitted")), 1u);

  redis.kill();
  // Both workers have seen their connection drop: from here every decision fails at once, as
  // `unavailable`, without a timeout.
  ASSERT_TRUE(eventually([&] { return readyz().second == readyz_body(false, 0); }, 10s))
      << readyz().second;
  const int n = 10;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(status("/open/x"), 200);
    auto closed = get(port, "/closed/x");
    ASSERT_TRUE(closed);
    EXPECT_EQ(closed->result_int(), 503);
    EXPECT_EQ(std::string(closed->base()["Retry-After"]), "1");
    EXPECT_EQ(without_request_id(closed->body()), "service unavailable\n");
    EXPECT_EQ(status("/local/x"), 200);
  }
  auto after = metrics();
  EXPECT_EQ(metric(after, outcome("open", "store_error_open")), std::uint64_t(n)) << after;
  EXPECT_EQ(metric(after, outcome("closed", "store_error_closed")), std::uint64_t(n));
  EXPECT_EQ(metric(after, outcome("local", "local")), std::uint64_t(n));
  // A degraded decision is counted as what it was, never also as the store's admission.
  for (auto route : {"open", "closed", "local"}) {
    EXPECT_EQ(metric(after, outcome(route, "admitted")), 1u) << route;
    EXPECT_EQ(metric(after, outcome(route, "limited")), 0u) << route;
  }
  // Every failed decision is one store error of its kind.
  EXPECT_EQ(metric(after, errors("unavailable")) - metric(before, errors("unavailable")),
            std::uint64_t(3 * n));
  EXPECT_EQ(metric(after, errors("timeout")), metric(before, errors("timeout")));
  EXPECT_EQ(metric(after, errors("protocol")), metric(before, errors("protocol")));
}

TEST_F(DeadStore, AFrozenStoreIsCountedAsTimeoutsThenAsTheBreakersFastFailures) {
  auto before = metrics();
  redis.freeze();
  const int n = 12;
  for (int i = 0; i < n; ++i) EXPECT_EQ(status("/open/x"), 200);
  auto after = metrics();
  EXPECT_EQ(metric(after, outcome("open", "store_error_open")), std::uint64_t(n)) << after;
  auto timeouts = metric(after, errors("timeout")) - metric(before, errors("timeout"));
  auto unavailable = metric(after, errors("unavailable")) - metric(before, errors("unavailable"));
  std::cout << "[ degraded ] Redis frozen, " << n << " fail_open answers: " << timeouts
            << " timeouts, " << unavailable << " failed fast by the breaker\n";
  EXPECT_EQ(timeouts + unavailable, std::uint64_t(n));
  // Each worker pays the timeout until its breaker opens after a few failures in a row, then
  // fails fast (the split depends on the breaker's threshold): both kinds are counted.
  EXPECT_GE(timeouts, 1u);
  EXPECT_GE(unavailable, 1u);
  EXPECT_EQ(metric(after, errors("protocol")), metric(before, errors("protocol")));
}

// A store that never answered: the instance still starts, says so, and counts every
// decision it could not get.
struct UnreachableStore : DeadStore {
  void SetUp() override { launch(free_port()); }
};

TEST_F(UnreachableStore, ReadyzIs200FromTheStartAndEveryDecisionIsCounted) {
  ASSERT_TRUE(eventually([&] { return readyz() == std::pair(200, readyz_body(false, 0)); }, 10s))
      << readyz().second;
  const int n = 5;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(status("/open/x"), 200);
    EXPECT_EQ(status("/closed/x"), 503);
    EXPECT_EQ(status("/local/x"), 200);
  }
  auto m = metrics();
  EXPECT_EQ(metric(m, outcome("open", "store_error_open")), std::uint64_t(n)) << m;
  EXPECT_EQ(metric(m, outcome("closed", "store_error_closed")), std::uint64_t(n));
  EXPECT_EQ(metric(m, outcome("local", "local")), std::uint64_t(n));
  EXPECT_EQ(metric(m, errors("unavailable")), std::uint64_t(3 * n));
  EXPECT_EQ(metric(m, errors("timeout")), 0u);
  EXPECT_EQ(metric(m, R"(floodgate_store_healthy_connections{backend="redis"})"), 0u);
  EXPECT_EQ(metric(m, R"(floodgate_store_circuit_open{backend="redis"})"), 2u);
}

TEST_F(DeadStore, ReadyzStays200AndSaysTheStoreIsUnhealthyWhileItIsDead) {
  auto m = metrics();
  EXPECT_EQ(metric(m, R"(floodgate_store_healthy_connections{backend="redis"})"), 2u) << m;
  EXPECT_EQ(metric(m, R"(floodgate_store_circuit_open{backend="redis"})"), 0u);

  redis.kill();
  // 200 throughout: a sick store is the routes' policies' business, not the balancer's.
  bool always_200 = true;
  ASSERT_TRUE(eventually(
      [&] {
        auto [code, body] = readyz();
        always_200 &= code == 200;
        return body == readyz_body(false, 0);
      },
      10s))
      << readyz().second;
  EXPECT_TRUE(always_200);
  m = metrics();
  EXPECT_EQ(metric(m, R"(floodgate_store_healthy_connections{backend="redis"})"), 0u) << m;
  EXPECT_EQ(metric(m, R"(floodgate_store_circuit_open{backend="redis"})"), 2u);
  EXPECT_EQ(status("/open/x"), 200);  // and traffic follows the routes' policies
  EXPECT_EQ(status("/closed/x"), 503);

  redis.restart();
  ASSERT_TRUE(eventually([&] { return readyz() == std::pair(200, readyz_body(true, 2)); }, 10s))
      << readyz().second;
  m = metrics();
  EXPECT_EQ(metric(m, R"(floodgate_store_healthy_connections{backend="redis"})"), 2u) << m;
  EXPECT_EQ(metric(m, R"(floodgate_store_circuit_open{backend="redis"})"), 0u);
}

// ----------------------------------------------------------------- keys and their expiry

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::int64_t to_int(const std::string& text) {
  return static_cast<std::int64_t>(std::stod(text));  // Lua writes "%.17g": integral values
}

// The one key of `route` in the store (the test's only caller), or "".
std::string key_of(const RedisServer& redis, const std::string& route) {
  auto keys = lines(redis.cli("--scan --pattern 'rl:" + route + ":*'"));
  EXPECT_EQ(keys.size(), 1u) << route << ": " << redis.cli("--scan");
  return keys.empty() ? "" : keys.front();
}

// A key's PTTL (ms) and Redis's clock (us), read in one script: the same instant.
struct Ttl {
  std::int64_t pttl_ms = 0;
  std::int64_t now_us = 0;
};
Ttl ttl_of(const RedisServer& redis, const std::string& key) {
  auto out = lines(redis.cli(
      "EVAL \"local t = redis.call('TIME') return {redis.call('PTTL', KEYS[1]), t[1], t[2]}\" 1 " +
      key));
  if (out.size() != 3) {
    ADD_FAILURE() << "PTTL/TIME of " << key << ": " << redis.cli("PTTL " + key);
    return {};
  }
  return {std::stoll(out[0]), std::stoll(out[1]) * 1'000'000 + std::stoll(out[2])};
}

// A key's expiry against the moment its state is neutral again, `neutral_at_us` on Redis's
// clock: no later (the script rounds up to the millisecond), and not much earlier either.
void expect_expires_when_neutral(const RedisServer& redis, const std::string& key,
                                 std::int64_t neutral_at_us, std::int64_t period_ms) {
  auto t = ttl_of(redis, key);
  const std::int64_t left_ms = (neutral_at_us - t.now_us) / 1000;
  std::cout << "[ expiry ] " << key.substr(0, key.find('{')) << ": PTTL " << t.pttl_ms
            << " ms, neutral in " << left_ms << " ms\n";
  EXPECT_GT(t.pttl_ms, 0) << key;
  EXPECT_LE(t.pttl_ms, period_ms) << key;
  // +2: the script rounds its PX up to the millisecond, and left_ms is rounded down.
  EXPECT_LE(t.pttl_ms, left_ms + 2) << key;
  EXPECT_GE(t.pttl_ms, left_ms - 5) << key;
}

struct RedisProxy : ::testing::Test {
  RedisServer redis;
  Origin origin;
  std::unique_ptr<Proxy> proxy;
  void start(const std::string& routes, const std::string& timeout = "2s") {
    proxy = std::make_unique<Proxy>(
        redis_config(0, origin.port(), redis.port(), kProbeRoute + routes, timeout));
    wait_enforced(proxy->port());
    redis.cli("FLUSHALL");
  }
  int status(const std::string& target) {
    auto r = get(proxy->port(), target);
    return r ? r->result_int() : -1;
  }
};

TEST_F(RedisProxy, EveryAlgorithmsKeyExpiresWhenItsStateIsNeutral) {
  start(R"(
  - name: tb
    match: { path_prefix: /tb }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 5, refill_rate: 1/m, key: [route] }]
  - name: gcra
    match: { path_prefix: /gcra }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: gcra, capacity: 5, refill_rate: 2/m, key: [route] }]
  - name: sw
    match: { path_prefix: /sw }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: sliding_window, limit: 5, window: 40s, key: [route] }]
  - name: log
    match: { path_prefix: /log }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: sliding_log, limit: 5, window: 50s, key: [route] }]
  - name: fw
    match: { path_prefix: /fw }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: fixed_window, limit: 5, window: 70s, key: [route] }]
  - name: conc
    match: { path_prefix: /slow }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: concurrency, limit: 2, key: [route] }]
)");
  for (auto target : {"/tb", "/gcra", "/sw", "/log", "/fw"}) ASSERT_EQ(status(target), 200);
  const std::int64_t s = 1'000'000;

  // (States are packed: state_command prints their numbers; the third is 0 where unused.)
  // token_bucket "tokens updated": one token of 5 missing at 1/m, whole again 60 s later.
  auto tb = key_of(redis, "tb");
  auto tb_state = lines(redis.cli(state_command(tb)));
  ASSERT_EQ(tb_state.size(), 3u);
  EXPECT_EQ(tb_state[0], "4");
  expect_expires_when_neutral(redis, tb, to_int(tb_state[1]) + 60 * s, 60'000);

  // gcra "debt at": a debt of 1 at 2/m, paid off 30 s later.
  auto gcra = key_of(redis, "gcra");
  auto gcra_state = lines(redis.cli(state_command(gcra)));
  ASSERT_EQ(gcra_state.size(), 3u);
  EXPECT_EQ(gcra_state[0], "1");
  expect_expires_when_neutral(redis, gcra, to_int(gcra_state[1]) + 30 * s, 30'000);

  // sliding_window "start current previous": the count weighs on the next window too, so the
  // state is neutral when the window after this one ends.
  auto sw = key_of(redis, "sw");
  auto sw_state = lines(redis.cli(state_command(sw)));
  ASSERT_EQ(sw_state.size(), 3u);
  EXPECT_EQ(to_int(sw_state[0]) % (40 * s), 0) << "windows align to the epoch";
  expect_expires_when_neutral(redis, sw, to_int(sw_state[0]) + 80 * s, 80'000);

  // sliding_log: a sorted set scored by time, neutral when its newest entry leaves the window.
  auto log = key_of(redis, "log");
  auto log_entries = lines(redis.cli("ZRANGE " + log + " 0 -1 WITHSCORES"));
  ASSERT_EQ(log_entries.size(), 2u);
  expect_expires_when_neutral(redis, log, to_int(log_entries[1]) + 50 * s, 50'000);

  // fixed_window "start count": neutral when this window ends.
  auto fw = key_of(redis, "fw");
  auto fw_state = lines(redis.cli(state_command(fw)));
  ASSERT_EQ(fw_state.size(), 3u);
  EXPECT_EQ(fw_state[1], "1");
  expect_expires_when_neutral(redis, fw, to_int(fw_state[0]) + 70 * s, 70'000);

  // concurrency: while a request is in flight its lease (scored with its expiry, an hour on)
  // keeps the key; once it is returned the key is gone.
  Client slow(proxy->port());
  slow.send("GET /slow/1500 HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(
      eventually([&] { return !lines(redis.cli("--scan --pattern 'rl:conc:*'")).empty(); }, 5s));
  auto conc = key_of(redis, "conc");
  auto leases = lines(redis.cli("ZRANGE " + conc + " 0 -1 WITHSCORES"));
  ASSERT_EQ(leases.size(), 2u);
  expect_expires_when_neutral(redis, conc, to_int(leases[1]), 3'600'000);
  EXPECT_GT(ttl_of(redis, conc).pttl_ms, 3'590'000);
  auto done = slow.read_response(10s);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result_int(), 200);
  EXPECT_TRUE(eventually([&] { return redis.cli("EXISTS " + conc) == "0"; }, 5s))
      << "the returned lease left " << redis.cli("ZRANGE " + conc + " 0 -1 WITHSCORES");
}

TEST_F(RedisProxy, AStoreTimeoutAnswersNoSoonerThanTheBudgetAndNotMuchLater) {
  start(R"(
  - name: open
    match: { path_prefix: /open }
    upstream: origin
    on_store_error: fail_open
    limits: [{ name: l, algorithm: token_bucket, capacity: 1000000, refill_rate: 1/h, key: [route] }]
)",
        "300ms");
  redis.freeze();
  // The first decision on a worker waits for the whole budget: the 300 ms timer (a precise
  // steady timer) starts after the client's clock here, so it cannot answer sooner.
  auto start = std::chrono::steady_clock::now();
  auto r = get(proxy->port(), "/open/x");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 300ms + 1500ms);
  std::cout << "[ timeouts ] store timeout 300 ms with Redis frozen: fail_open answer after "
            << std::chrono::duration_cast<Ms>(took).count() << " ms\n";
}

// ------------------------------------------------------- a dead instance's concurrency lease

TEST(RedisLease, AKilledInstancesConcurrencyLeaseIsHeldUntilItsLeaseTimeThenFreed) {
  RedisServer redis;
  Origin origin;
  const std::string routes = kProbeRoute + R"(
  - name: up
    match: { path_prefix: /__up }
    upstream: origin
  - name: conc
    match: { path_prefix: /slow }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: concurrency, limit: 1, key: [route] }]
)";
  auto pa = free_port(), pb = free_port();
  const std::string log = "log: { level: error }\n";
  auto a = std::make_unique<ChildProcess>(std::vector<std::string>{
      FLOODGATE_BINARY, "--config",
      write_temp_file("lease-a",
                      redis_config(pa, origin.port(), redis.port(), routes, "2s", log))});
  ChildProcess b({FLOODGATE_BINARY, "--config",
                  write_temp_file("lease-b", redis_config(pb, origin.port(), redis.port(), routes,
                                                          "2s", log))});
  wait_serving(pa);
  wait_serving(pb);
  wait_enforced(pa);
  wait_enforced(pb);

  // A request in flight on instance A holds the only unit...
  Client in_flight(pa);
  in_flight.send("GET /slow/60000 HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(
      eventually([&] { return lines(redis.cli("--scan --pattern 'rl:conc:*'")).size() == 1; }, 5s));
  auto key = key_of(redis, "conc");
  EXPECT_EQ(get(pb, "/slow/0")->result_int(), 429);

  // ...and A dies without returning it.
  ASSERT_TRUE(a->signal_and_wait(SIGKILL, 5s));
  a.reset();
  auto r = get(pb, "/slow/0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 429) << "nobody returned the dead instance's lease: still held";
  EXPECT_EQ(std::string(r->base()["Retry-After"]), "1");

  // The lease is scored with its expiry, the lease time (an hour) after it was taken, and the
  // key expires with it.
  auto entries = lines(redis.cli("ZRANGE " + key + " 0 -1 WITHSCORES"));
  ASSERT_EQ(entries.size(), 2u) << redis.cli("ZRANGE " + key + " 0 -1 WITHSCORES");
  auto expires_at = to_int(entries[1]);
  auto t = ttl_of(redis, key);
  EXPECT_GT(expires_at - t.now_us, 3'540'000'000) << "taken within the last minute";
  EXPECT_LE(expires_at - t.now_us, 3'600'000'000);
  EXPECT_GT(t.pttl_ms, 3'540'000);
  EXPECT_LE(t.pttl_ms, 3'600'000);

  // An hour on, as Redis's clock would see it: the lease's expiry is now. The next decision
  // drops it and the unit is free again.
  redis.cli("ZADD " + key + " XX " + std::to_string(t.now_us) + " " + entries[0]);
  r = get(pb, "/slow/0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_TRUE(eventually([&] { return redis.cli("EXISTS " + key) == "0"; }, 5s))
      << "B's own lease came back and the dead one is gone: "
      << redis.cli("ZRANGE " + key + " 0 -1 WITHSCORES");
}

}  // namespace
}  // namespace floodgate::testing
