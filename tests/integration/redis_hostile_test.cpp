// A hostile or slow Redis costs only its decisions (issue 15): a scripted fake Redis (real
// sockets, tests/support/fake_redis.hpp) answers with what a real server never would. For each
// fault floodgate stays up, answers by the route's on_store_error within the store deadline
// (plus a margin for a loaded machine), and decides in the store again once the fake behaves.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "fake_redis.hpp"
#include "floodgate_process.hpp"
#include "store/redis/script_calls.hpp"
#include "test_pki.hpp"
#include "timing.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

constexpr Ms kTimeout{100};  // store.redis.timeout in these tests
// What a decision may take beyond its deadline here: a loaded 2-core machine (100 ms), more
// under a sanitizer (timing.hpp).
constexpr Ms kSlack = slack(Ms(100));

const std::string kRoutes = kOpenAndClosedRoutes + R"(  - name: busy
    match: { path_prefix: /busy }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: concurrency, limit: 5, key: [route] }]
)";

std::string single_config(const FakeRedis& fake, const Origin& origin) {
  return redis_config(0, origin.port(), fake.port(), kRoutes, "100ms");
}

std::string cluster_config(const FakeRedis& fake, const Origin& origin) {
  auto p = std::to_string(fake.port());
  return substitute(single_config(fake, origin),
                    "backend: redis\n  redis: { address: \"127.0.0.1:" + p + "\"",
                    "backend: redis_cluster\n  redis: { nodes: [\"127.0.0.1:" + p + "\"]");
}

struct Timed {
  int status = -1;
  Ms took{0};
};

Timed timed_get(std::uint16_t port, const std::string& target) {
  auto start = std::chrono::steady_clock::now();
  auto r = get(port, target);
  return {r ? static_cast<int>(r->result_int()) : -1,
          std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start)};
}

// Both routes by their policy, each answer within the deadline.
void expect_policy(std::uint16_t port, const std::string& what) {
  auto open = timed_get(port, "/open/x");
  auto closed = timed_get(port, "/closed/x");
  EXPECT_EQ(open.status, 200) << what;
  EXPECT_EQ(closed.status, 503) << what;
  EXPECT_LT(open.took, kTimeout + kSlack) << what;
  EXPECT_LT(closed.took, kTimeout + kSlack) << what;
}

void expect_recovers(std::uint16_t port, const std::string& what) {
  EXPECT_TRUE(eventually([&] { return timed_get(port, "/closed/y").status == 200; }, 5s))
      << what << ": never decided in the store again";
}

// What /readyz and the health gauge read: every worker's store healthy.
bool all_healthy(Proxy& proxy) {
  auto [healthy, total] = proxy.metrics().store_health();
  return healthy == total;
}

// The most this process has ever mapped, from the kernel's own account.
std::uint64_t peak_virtual_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmPeak:", 0) == 0) return std::stoull(line.substr(7));
  return 0;
}

FakeRedis::Script acquire_answers(std::string bytes, std::uint16_t slots_owner = 0) {
  auto behave = FakeRedis::behave(slots_owner);
  return [behave, bytes](const std::vector<std::string>& c) {
    if (c[0] == "FCALL" || c[0] == "EVALSHA" || c[0] == "EVAL") return FakeRedis::reply(bytes);
    return behave(c);
  };
}

TEST(RedisHostile, MalformedAndHugeRepliesFollowThePolicyWithinTheDeadline) {
  FakeRedis fake;
  Origin origin;
  auto before = peak_virtual_kib();
  Proxy proxy(single_config(fake, origin));
  expect_recovers(proxy.port(), "a behaving fake");
  for (const std::string bytes : {
           "+OK\r\n",             // a status where an array belongs
           ":1\r\n",              // an integer
           "$-1\r\n",             // nil
           "-ERR boom\r\n",       // an error
           "*2\r\n:1\r\n:1\r\n",  // an array too short for one item
           "*8\r\n$1\r\n1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n",  // a string among them
           "*1000000000\r\n",              // an 8 GB element table, announced
           "$1000000000\r\n",              // a bulk string that never completes
           "%3\r\n",                       // not RESP2 at all
           "-ERR Function not found\r\n",  // also behind its load, then as a script: no more
           "-NOSCRIPT No matching script\r\n",
           // functions refused: scripts from then on, which get the same bytes
           "-NOPERM this user has no permissions to run the 'fcall' command\r\n",
           "*4\r\n:1\r\n:1\r\n:-1\r\n$4\r\nboom\r\n",  // one request failed, too short
       }) {
    fake.script(acquire_answers(bytes));
    expect_policy(proxy.port(), bytes);
    fake.script(FakeRedis::behave());
    expect_recovers(proxy.port(), bytes);
  }
  auto grown_mib = (peak_virtual_kib() - before) / 1024;
  std::cout << "[ hostile ] malformed and huge replies: peak virtual memory grew " << grown_mib
            << " MiB\n";
  EXPECT_LT(grown_mib, 1024u);
}

// hiredis's own async client asserts (aborts the process) on a reply with no command waiting
// for it; floodgate reads replies itself and drops the connection instead.
TEST(RedisHostile, AReplyToNoCommandDropsTheConnectionNotTheProcess) {
  FakeRedis fake;
  Origin origin;
  Proxy proxy(single_config(fake, origin));
  expect_recovers(proxy.port(), "a behaving fake");
  auto behave = FakeRedis::behave();
  fake.script([behave](const std::vector<std::string>& c) {
    auto answer = behave(c);
    if (c[0] == "FCALL" || c[0] == "EVALSHA" || c[0] == "EVAL") answer.bytes += "+OK\r\n";
    return answer;
  });
  const auto connections = fake.connections();
  for (int i = 0; i < 5; ++i) {
    auto r = timed_get(proxy.port(), "/closed/x");
    EXPECT_TRUE(r.status == 200 || r.status == 503) << r.status;
    EXPECT_LT(r.took, kTimeout + kSlack);
  }
  EXPECT_TRUE(eventually([&] { return fake.connections() > connections; }, 5s))
      << "the connection was not dropped";
  fake.script(FakeRedis::behave());
  expect_recovers(proxy.port(), "after replies to no command");
}

// TLS configured, and the peer is no TLS server (a plain RESP fake, which never answers the
// ClientHello): an attempt costs at most the connect timeout, decisions meanwhile answer by
// the policy at once (nothing is connected), and attempts are spaced by the backoff.
TEST(RedisHostile, APeerThatNeverCompletesTheTlsHandshakeCostsOnlyItsAttempts) {
  TestPki pki;
  FakeRedis fake;
  Origin origin;
  auto yaml = substitute(substitute(single_config(fake, origin), "timeout: 100ms",
                                    "timeout: 100ms, tls: { ca_file: " + pki.ca_file() + " }"),
                         "threads: 2", "threads: 1");
  Proxy proxy(yaml);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 3s) {
    expect_policy(proxy.port(), "a peer that does not speak TLS");
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(fake.count("FCALL") + fake.count("EVALSHA"), 0u);
  EXPECT_GE(fake.connections(), 2u);
  EXPECT_LE(fake.connections(), 12u) << "attempts not spaced by the backoff";
  std::cout << "[ hostile ] a peer that never completes TLS: " << fake.connections()
            << " attempts in 3 s\n";
}

TEST(RedisHostile, AStallAfterAuthCostsTheConfiguredTimeoutNotTheConnectTimeout) {
  // AUTH is answered; then nothing. The AUTH command's own deadline (the 1 s connect
  // timeout) was the one the timer waited for: 0.7 s per decision instead of 100 ms.
  FakeRedis fake([](const std::vector<std::string>& c) {
    return c[0] == "AUTH" ? FakeRedis::reply("+OK\r\n") : FakeRedis::stall();
  });
  Origin origin;
  auto yaml = substitute(single_config(fake, origin), "timeout: 100ms",
                         "timeout: 100ms, password: hunter2-but-longer");
  Proxy proxy(yaml);
  ASSERT_TRUE(eventually([&] { return fake.count("AUTH") >= 2; }, 5s));  // both workers
  std::vector<Ms> took;
  for (int i = 0; i < 3; ++i) {
    auto r = timed_get(proxy.port(), "/closed/x");
    EXPECT_EQ(r.status, 503);
    took.push_back(r.took);
  }
  std::cout << "[ hostile ] stalled Redis with AUTH, timeout 100 ms: decisions took "
            << took[0].count() << ", " << took[1].count() << ", " << took[2].count() << " ms\n";
  // The first one surely waited for Redis (the breaker opens only after 3 failures).
  EXPECT_GE(took[0], kTimeout - 5ms);
  for (auto t : took) EXPECT_LT(t, kTimeout + kSlack);
  fake.script(FakeRedis::behave());
  expect_recovers(proxy.port(), "after the stall");
}

TEST(RedisHostile, BadRedirectTargetsAndSlotMapsAreProtocolErrorsNotCrashes) {
  FakeRedis fake;
  fake.script(FakeRedis::behave(fake.port()));
  Origin origin;
  Proxy proxy(cluster_config(fake, origin));
  expect_recovers(proxy.port(), "a behaving cluster node");
  for (const std::string bytes : {
           "-MOVED 3999 127.0.0.1:abc\r\n",
           "-MOVED 3999 127.0.0.1:99999999999\r\n",
           "-MOVED 3999 127.0.0.1:65536\r\n",
           "-ASK 3999 [::1]:abc\r\n",
           "-ASK 3999 127.0.0.1:0\r\n",
           "-MOVED 99999 127.0.0.1:7000\r\n",
           "-MOVED 3999\r\n",
       }) {
    fake.script(acquire_answers(bytes, fake.port()));
    expect_policy(proxy.port(), bytes);
    fake.script(FakeRedis::behave(fake.port()));
    expect_recovers(proxy.port(), bytes);
  }
}

TEST(RedisHostile, ASlotMapNamingABadPortIsNotApplied) {
  // The map names `other`'s port plus 65536: truncated to 16 bits, that is `other`, which the
  // cluster store connected to as if the map had named it.
  FakeRedis other;
  auto bad_port = std::to_string(other.port() + 65536);
  FakeRedis fake([bad_port](const std::vector<std::string>& c) {
    if (c[0] == "CLUSTER")
      return FakeRedis::reply("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:" + bad_port +
                              "\r\n");
    return FakeRedis::behave()(c);
  });
  Origin origin;
  Proxy proxy(cluster_config(fake, origin));
  ASSERT_TRUE(eventually([&] { return fake.count("CLUSTER") >= 2; }, 5s));  // both workers
  std::this_thread::sleep_for(300ms);  // time to connect to the node the map names
  expect_policy(proxy.port(), "no usable slot map");
  EXPECT_EQ(other.connections(), 0u) << "port " << bad_port << " was truncated to 16 bits";
  fake.script(FakeRedis::behave(fake.port()));
  expect_recovers(proxy.port(), "a good slot map");
}

TEST(RedisHostile, RedirectsDoNotExtendTheDecisionsDeadline) {
  // Every hop answers after 80 ms with a MOVED to itself: each hop within a fresh 100 ms, the
  // decision took 4 hops (320 ms) before it failed; on one budget it times out at 100 ms.
  FakeRedis fake;
  auto self = std::to_string(fake.port());
  auto behave = FakeRedis::behave(fake.port());
  std::atomic<bool> slow{false};
  fake.script([&slow, behave, self](const std::vector<std::string>& c) {
    if (slow && c[0] == "FCALL")
      return FakeRedis::later(
          "-MOVED " + std::to_string(store::redis::key_slot(c[3])) + " 127.0.0.1:" + self + "\r\n",
          80ms);
    return behave(c);
  });
  Origin origin;
  Proxy proxy(cluster_config(fake, origin));
  expect_recovers(proxy.port(), "a behaving cluster node");
  slow = true;
  auto r = timed_get(proxy.port(), "/closed/x");
  std::cout << "[ hostile ] 80 ms MOVED hops, timeout 100 ms: decision answered in "
            << r.took.count() << " ms\n";
  EXPECT_EQ(r.status, 503);
  EXPECT_LT(r.took, kTimeout + kSlack);
}

TEST(RedisHostile, AStalledSeedDoesNotKeepTheSlotMapAway) {
  // Two seeds; the one asked first for CLUSTER SLOTS (the store's node table is in name order)
  // accepts connections and never answers. Its silence must count against it.
  FakeRedis a, b;
  auto name = [](const FakeRedis& f) { return "127.0.0.1:" + std::to_string(f.port()); };
  FakeRedis& stalled = name(a) < name(b) ? a : b;
  FakeRedis& good = &stalled == &a ? b : a;
  stalled.script([](const std::vector<std::string>&) { return FakeRedis::stall(); });
  good.script(FakeRedis::behave(good.port()));
  Origin origin;
  auto yaml = substitute(cluster_config(good, origin), "nodes: [\"" + name(good) + "\"]",
                         "nodes: [\"" + name(stalled) + "\", \"" + name(good) + "\"]");
  Proxy proxy(yaml);
  expect_recovers(proxy.port(), "the good seed's slot map");
  EXPECT_GE(stalled.count("CLUSTER"), 1u);
}

TEST(RedisHostile, RedirectLoopsOnReleasesAreBounded) {
  // A node that answers MOVED-to-itself to every ZREM (a concurrency lease's release): the
  // release was resent for as long as it did, ~12,700 commands a second from one request.
  FakeRedis fake;
  auto self = std::to_string(fake.port());
  auto behave = FakeRedis::behave(fake.port());
  fake.script([behave, self](const std::vector<std::string>& c) {
    if (c[0] == "ZREM")
      return FakeRedis::reply("-MOVED " + std::to_string(store::redis::key_slot(c[1])) +
                              " 127.0.0.1:" + self + "\r\n");
    return behave(c);
  });
  Origin origin;
  Proxy proxy(cluster_config(fake, origin));
  EXPECT_TRUE(eventually([&] { return timed_get(proxy.port(), "/busy/x").status == 200; }, 5s));
  std::this_thread::sleep_for(200ms);  // that request's release, after its response
  auto before = fake.count("ZREM");
  EXPECT_EQ(timed_get(proxy.port(), "/busy/x").status, 200);
  std::this_thread::sleep_for(500ms);
  auto sent = fake.count("ZREM") - before;
  std::cout << "[ hostile ] one release answered MOVED-to-self: " << sent << " ZREMs in 500 ms\n";
  EXPECT_GE(sent, 1u);
  EXPECT_LE(sent, 4u);  // the release and at most 3 redirects
}

TEST(RedisHostile, AStalledClusterNodeIsBrokenOffAndReadyzSaysSo) {
  FakeRedis fake;
  auto behave = FakeRedis::behave(fake.port());
  fake.script(behave);
  Origin origin;
  Proxy proxy(cluster_config(fake, origin));
  expect_recovers(proxy.port(), "a behaving cluster node");
  EXPECT_TRUE(eventually([&] { return all_healthy(proxy); }, 5s));
  // Slot map still answered; decisions and probes never are.
  fake.script([behave](const std::vector<std::string>& c) {
    return c[0] == "CLUSTER" ? behave(c) : FakeRedis::stall();
  });
  auto start = std::chrono::steady_clock::now();
  int waited = 0;  // requests that paid the deadline
  for (int i = 0; i < 20; ++i) {
    auto r = timed_get(proxy.port(), "/closed/x");
    EXPECT_EQ(r.status, 503);
    EXPECT_LT(r.took, kTimeout + kSlack);
    waited += r.took >= kTimeout - 5ms ? 1 : 0;
  }
  auto took = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
  std::cout << "[ hostile ] 20 fail_closed requests against a stalled cluster node: "
            << took.count() << " ms, " << waited << " paid the 100 ms deadline\n";
  // Each of the 2 workers pays the deadline until its breaker opens (3 failures); without a
  // breaker every request pays it. (2 more for a request slowed by the machine.)
  EXPECT_LE(waited, 2 * 3 + 2);
  EXPECT_FALSE(all_healthy(proxy)) << "/readyz must not say healthy";
  fake.script(behave);
  expect_recovers(proxy.port(), "the node answers again");
  EXPECT_TRUE(eventually([&] { return all_healthy(proxy); }, 5s));
}

// A store that grants a lease far more than it asked for (issue 34, 7): a million units for a
// lease of 5 filled the hand, and 60 of 60 requests passed a limit of 10. A grant above what was
// asked is a store error: the route's on_store_error (here fail_closed) decides every request.
TEST(RedisHostile, ALeaseGrantAboveWhatWasAskedIsAStoreError) {
  auto behave = FakeRedis::behave();
  FakeRedis fake([behave](const std::vector<std::string>& c) {
    if (c[0] == "FCALL" || c[0] == "EVALSHA" || c[0] == "EVAL") {
      auto requests = FakeRedis::acquire_requests(c);
      if (!requests.empty()) return FakeRedis::reply(FakeRedis::admitted(requests, 1'000'000));
    }
    return behave(c);
  });
  Origin origin;
  const std::string routes = R"(
  - name: leased
    match: { path_prefix: /leased }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 10, refill_rate: 1/h, key: [route],
               lease: { size: 5, ttl: 10s } }]
)";
  Proxy proxy(redis_config(0, origin.port(), fake.port(), routes, "100ms"));
  int admitted = 0, refused = 0;
  for (int i = 0; i < 60; ++i) {
    auto r = timed_get(proxy.port(), "/leased/x");
    if (r.status == 200) ++admitted;
    if (r.status == 503) ++refused;
  }
  std::cout << "[ hostile ] a store granting 1,000,000 units for a lease of 5: " << admitted
            << " of 60 admitted, " << refused << " answered 503\n";
  EXPECT_EQ(admitted, 0);
  EXPECT_EQ(refused, 60);
  EXPECT_EQ(origin.requests(), 0u);
  auto errors = metric(admin::render_prometheus(proxy.metrics()),
                       "floodgate_store_errors_total{kind=\"protocol\"}");
  EXPECT_GE(errors, 1u);
  EXPECT_NE(errors, UINT64_MAX);
}

}  // namespace
}  // namespace floodgate::testing
