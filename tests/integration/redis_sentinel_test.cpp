// Redis Sentinel (`store.redis.sentinels`, `master_name`; issue 39 item 4), all real: a
// master, a replica and three sentinels (redis_sentinel.hpp), and the real binary. The master
// is killed; the sentinels promote the replica; floodgate follows within the backoff of the
// switch, counts on from what the replica holds (no over-admission), and the admin API's
// overrides land on the new master. Then what a sentinel may answer that is wrong: a replica
// named as the master is never written to, and a name it does not know is the policy.
#include <gtest/gtest.h>

#include <thread>

#include "fake_redis.hpp"
#include "floodgate_process.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

const std::string kQuotaRoute = R"(
  - name: quota
    match: { path_prefix: /quota }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: q, algorithm: token_bucket, capacity: 10, refill_rate: 1/h, key: [ip] }]
)";

int status_of(std::uint16_t port, const std::string& target) {
  auto r = get(port, target);
  return r ? static_cast<int>(r->result_int()) : -1;
}

// A redis_config whose store is found through `store_yaml` instead of an address.
std::string via_sentinels(const std::string& config, std::uint16_t placeholder_port,
                          const std::string& store_yaml) {
  return substitute(config, "address: \"127.0.0.1:" + std::to_string(placeholder_port) + "\"",
                    store_yaml);
}

TEST(RedisSentinel, AKilledMasterIsFollowedWithNoOverAdmission) {
  RedisSentinels redis;
  Origin origin;
  const auto port = free_port(), admin = free_port();
  const auto path = write_temp_file(
      "sentinel.yaml", via_sentinels(redis_config(port, origin.port(), 1, kQuotaRoute + kProbeRoute,
                                                  "200ms", admin_with_test_token(admin)),
                                     1, redis.store_yaml()));
  auto fg = start_floodgate(path);
  wait_serving(admin, "/healthz");
  wait_enforced(port);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(port, "/quota"), 200) << i;
  // What the master acknowledged has reached the replica (Redis replicates asynchronously:
  // what it has not is lost in any failover, with or without floodgate).
  EXPECT_EQ(redis_cli(redis.master_port(), "WAIT 1 2000", 4), "1");

  redis.kill_master();
  const auto killed = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - killed);
  };
  Ms switched{-1}, back{-1};
  while (since() < 30s && back.count() < 0) {
    if (switched.count() < 0 && redis.named_master() == redis.replica_port()) switched = since();
    if (status_of(port, "/probe") == 200) back = since();
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(back.count(), 0) << "never decided on the new master";
  if (switched.count() < 0) switched = back;  // switched between two polls
  wait_enforced(port);                        // every worker
  std::printf(
      "[ sentinel ] master killed: the sentinels named the replica after %lld ms, floodgate "
      "decided on it after %lld ms\n",
      static_cast<long long>(switched.count()), static_cast<long long>(back.count()));
  // The backoff between attempts is at most 1 s, and each asks the sentinels first.
  EXPECT_LT(back - switched, 2500ms);

  // 5 of 10 were spent before the kill: 5 more, never 6.
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += status_of(port, "/quota") == 200;
  EXPECT_EQ(admitted, 5) << "the new master did not count what the old one had";
  std::printf("[ sentinel ] after the failover: %d of 20 admitted (10 an hour, 5 spent before)\n",
              admitted);

  // The overrides follow the master too.
  auto put = put_exemption(admin, "q", "ip=127.0.0.1");
  EXPECT_EQ(put.substr(0, 3), "200") << put;
  EXPECT_NE(redis_cli(redis.replica_port(), "HKEYS 'rl:{overrides}'", 2), "");
}

// A sentinel (a scripted fake) that names a replica as the master, then one that does not
// know the name: either way nothing is written and every decision follows the policy at once.
TEST(RedisSentinel, AReplicaNamedAsTheMasterIsNeverWritten) {
  RedisServer replica;
  replica.cli("REPLICAOF 127.0.0.1 1");  // a replica of nothing: ROLE says "slave"
  const auto port = std::to_string(replica.port());
  std::atomic<bool> knows{true};
  FakeRedis sentinel([&](const std::vector<std::string>& c) {
    if (c[0] != "SENTINEL") return FakeRedis::behave()(c);
    if (!knows) return FakeRedis::reply("*-1\r\n");
    return FakeRedis::reply("*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" +
                            port + "\r\n");
  });
  Origin origin;
  Proxy proxy(via_sentinels(
      redis_config(0, origin.port(), 1, kOpenAndClosedRoutes, "100ms"), 1,
      "sentinels: [\"127.0.0.1:" + std::to_string(sentinel.port()) + "\"], master_name: mymaster"));
  for (bool named : {true, false}) {
    knows = named;
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < 1500ms) {
      const auto asked = std::chrono::steady_clock::now();
      EXPECT_EQ(status_of(proxy.port(), "/closed"), 503);
      EXPECT_EQ(status_of(proxy.port(), "/open"), 200);
      EXPECT_LT(std::chrono::steady_clock::now() - asked, 200ms);
      std::this_thread::sleep_for(50ms);
    }
  }
  EXPECT_GE(sentinel.count("SENTINEL"), 4u);  // asked again before each attempt
  const auto stats = replica.cli("INFO commandstats");
  EXPECT_NE(stats.find("cmdstat_role"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("cmdstat_fcall"), std::string::npos) << stats;
  EXPECT_EQ(stats.find("cmdstat_evalsha"), std::string::npos) << stats;
}

}  // namespace
}  // namespace floodgate::testing
