// The Redis Cluster store against a real 3-master, 3-replica cluster on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "floodgate_process.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

TEST(RedisClusterStore, KeysSpreadOverEveryMasterAndLimitsHold) {
  RedisCluster cluster;
  Origin origin;
  Proxy proxy(cluster_config(0, origin.port(), cluster, kProbeRoute + R"(
  - name: users
    match: { path_prefix: / }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: per-user, algorithm: fixed_window, limit: 2, window: 1h, key: ["header:X-User"] }]
)"));
  wait_enforced(proxy.port(), "/probe");
  int admitted = 0, refused = 0;
  for (int u = 0; u < 60; ++u)
    for (int i = 0; i < 3; ++i) {
      auto r = get(proxy.port(), "/x", "X-User: user-" + std::to_string(u) + "\r\n");
      (r && r->result_int() == 200 ? admitted : refused)++;
    }
  EXPECT_EQ(admitted, 120);
  EXPECT_EQ(refused, 60);
  auto masters = cluster.masters();
  ASSERT_EQ(masters.size(), 3u);
  for (auto m : masters) {
    auto keys = std::stoll(cluster.cli(m, "DBSIZE"));
    std::cout << "[ cluster ] master " << m << " holds " << keys << " keys\n";
    EXPECT_GT(keys, 5) << "master " << m;
  }
}

TEST(RedisClusterStore, LimitsInDifferentSlotsAreAllOrNothing) {
  RedisCluster cluster;
  Origin origin;
  Proxy proxy(cluster_config(0, origin.port(), cluster, kProbeRoute + R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    on_store_error: fail_closed
    limits:
      - { name: per-user, algorithm: token_bucket, capacity: 2, refill_rate: 1/h, key: ["header:X-User"] }
      - { name: per-route, algorithm: sliding_log, limit: 3, window: 1h, key: [route] }
      - { name: in-flight, algorithm: concurrency, limit: 100, key: [route] }
)"));
  wait_enforced(proxy.port(), "/probe");
  auto status = [&](const std::string& user) {
    return get(proxy.port(), "/x", "X-User: " + user + "\r\n")->result_int();
  };
  EXPECT_EQ(status("a"), 200);
  EXPECT_EQ(status("a"), 200);
  EXPECT_EQ(status("a"), 429);  // per-user refuses; per-route and in-flight must give back
  EXPECT_EQ(status("b"), 200);  // per-route's third unit is still there
  EXPECT_EQ(status("c"), 429);
  EXPECT_EQ(origin.requests(), 3u + 16u);  // + the probes
}

TEST(RedisClusterStore, TwoProcessesAdmitExactlyTheLimit) {
  RedisCluster cluster;
  Origin origin;
  const std::string routes = kProbeRoute + R"(
  - name: tb
    match: { path_prefix: /tb }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 200, refill_rate: 1/h, key: [route] }]
  - name: log
    match: { path_prefix: /log }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: sliding_log, limit: 200, window: 1h, key: [route] }]
)";
  auto p1 = free_port(), p2 = free_port();
  std::vector<std::unique_ptr<ChildProcess>> fgs;
  for (auto port : {p1, p2}) {
    auto path = (std::filesystem::temp_directory_path() /
                 ("fg-cluster-" + std::to_string(getpid()) + "-" + std::to_string(port) + ".yaml"))
                    .string();
    // Exactness is the subject, not latency: a store call may take long on a loaded machine
    // (12 Redis processes and 2 proxies on 2 cores) without a 503 from fail_closed.
    std::ofstream(path) << cluster_config(port, origin.port(), cluster, routes, "5s");
    fgs.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{FLOODGATE_BINARY, "--config", path}));
  }
  wait_enforced(p1, "/probe");
  wait_enforced(p2, "/probe");
  for (std::string target : {"/tb", "/log"}) {
    get(origin.port(), "/__reset");
    auto statuses = burst({p1, p2}, target, 500);
    std::string all;  // every status seen, for a failure's message
    for (const auto& [status, n] : statuses)
      all += (all.empty() ? " " : ", ") + std::to_string(n) + " x " + std::to_string(status);
    std::cout << "[ cluster exactness ] " << target << ": 500 concurrent over 2 instances ->" << all
              << ", origin counted " << origin.requests() << "\n";
    EXPECT_EQ(statuses[200], 200) << target << ":" << all;
    EXPECT_EQ(statuses[429], 300) << target << ":" << all;
    EXPECT_EQ(origin.requests(), 200u) << target;
  }
}

// Leased decisions on a cluster (SPEC "Leased decisions"): grants, reports and returns go to
// the master of the key's slot, with the record of who holds what beside it (same hash tag).
TEST(RedisClusterStore, LeasedLimitsNeverOverAdmitAcrossTwoInstances) {
  RedisCluster cluster;
  Origin origin;
  const std::string routes = kProbeRoute + R"(
  - name: tb
    match: { path_prefix: /tb }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 100, refill_rate: 1/h,
               key: ["header:X-User"], lease: { size: 10, ttl: 30s } }]
)";
  Proxy a(cluster_config(0, origin.port(), cluster, routes, "5s"));
  Proxy b(cluster_config(0, origin.port(), cluster, routes, "5s"));
  wait_enforced(a.port(), "/probe");
  wait_enforced(b.port(), "/probe");
  for (int user = 0; user < 3; ++user) {  // three keys, on whichever masters they hash to
    int admitted = 0;
    for (int i = 0; i < 150; ++i) {
      auto r = get(i % 2 ? a.port() : b.port(), "/tb",
                   "X-User: leased-" + std::to_string(user) + "\r\n");
      admitted += r && r->result_int() == 200 ? 1 : 0;
    }
    std::cout << "[ cluster lease ] user " << user << ": " << admitted
              << " of 150 admitted (limit 100, bound 10)\n";
    EXPECT_LE(admitted, 100);
    EXPECT_GE(admitted, 90);
  }
}

TEST(RedisClusterStore, AMasterKilledUnderLoadIsFollowedAfterFailover) {
  RedisCluster cluster;
  Origin origin;
  Proxy proxy(cluster_config(0, origin.port(), cluster, kProbeRoute + R"(
  - name: users
    match: { path_prefix: /u }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: token_bucket, capacity: 100000000, refill_rate: 1/h, key: ["header:X-User"] }]
)"));
  wait_enforced(proxy.port(), "/probe");
  std::map<int, int> statuses;
  std::mutex m;
  // However the test leaves (an ASSERT returns early), the clients stop and are joined.
  struct Clients {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    void join() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
    ~Clients() { join(); }
  } clients;
  auto& stop = clients.stop;
  for (int t = 0; t < 3; ++t)
    clients.threads.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        int s = -1;
        try {
          s = get(proxy.port(), "/u", "X-User: u" + std::to_string((t * 1000 + i) % 50) + "\r\n")
                  ->result_int();
        } catch (const std::exception&) {
        }
        std::lock_guard lock(m);
        ++statuses[s];
      }
    });
  std::this_thread::sleep_for(500ms);
  auto victim = cluster.masters().front();
  cluster.kill(victim);
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster.wait_failover(20s)) << "no failover\n" << cluster.describe();
  auto failover = std::chrono::steady_clock::now() - killed;
  // Decisions everywhere again: 16 in a row over users spread across all slots.
  int streak = 0;
  auto back_start = std::chrono::steady_clock::now();
  while (streak < 50 && std::chrono::steady_clock::now() - back_start < 10s) {
    auto r = get(proxy.port(), "/u", "X-User: w" + std::to_string(streak) + "\r\n");
    streak = r && r->result_int() == 200 ? streak + 1 : 0;
  }
  auto followed = std::chrono::steady_clock::now() - back_start;
  clients.join();
  std::cout << "[ cluster failover ] master " << victim << " killed; cluster_state ok after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(failover).count()
            << " ms; floodgate deciding on every slot "
            << std::chrono::duration_cast<std::chrono::milliseconds>(followed).count()
            << " ms later; during the run: ";
  for (auto [s, n] : statuses) std::cout << n << " x " << s << " ";
  std::cout << "\n";
  EXPECT_EQ(streak, 50);
  EXPECT_LT(followed, 5s);
  for (auto [s, n] : statuses) EXPECT_TRUE(s == 200 || s == 503) << n << " x " << s;
}

// A slot moves from one master to another while requests for a key in it keep coming: the
// store follows ASK during the migration and MOVED after it, and the limit stays exact.
TEST(RedisClusterStore, ALiveSlotMigrationKeepsTheLimitExact) {
  RedisCluster cluster;
  Origin origin;
  Proxy proxy(cluster_config(0, origin.port(), cluster, kProbeRoute + R"(
  - name: hot
    match: { path_prefix: /hot }
    upstream: origin
    on_store_error: fail_closed
    limits: [{ name: l, algorithm: fixed_window, limit: 1000000, window: 1h, key: [route] }]
)"));
  wait_enforced(proxy.port(), "/probe");
  ASSERT_EQ(get(proxy.port(), "/hot")->result_int(), 200);
  // Where the key lives now, and a master to move it to.
  std::string key;
  std::uint16_t src = 0;
  for (auto m : cluster.masters()) {
    auto found = cluster.cli(m, "--scan --pattern 'rl:hot:*'");
    if (!found.empty()) key = found.substr(0, found.find('\n')), src = m;
  }
  ASSERT_FALSE(key.empty());
  std::uint16_t dst = 0;
  for (auto m : cluster.masters())
    if (m != src) dst = m;
  auto slot = cluster.cli(src, "CLUSTER KEYSLOT '" + key + "'");
  auto src_id = cluster.cli(src, "CLUSTER MYID"), dst_id = cluster.cli(dst, "CLUSTER MYID");

  std::atomic<bool> stop{false};
  std::map<int, int> statuses;
  std::mutex m;
  std::thread client([&] {
    while (!stop) {
      int s = -1;
      try {
        s = get(proxy.port(), "/hot")->result_int();
      } catch (const std::exception&) {
      }
      std::lock_guard lock(m);
      ++statuses[s];
    }
  });
  std::this_thread::sleep_for(200ms);
  cluster.cli(dst, "CLUSTER SETSLOT " + slot + " IMPORTING " + src_id);
  cluster.cli(src, "CLUSTER SETSLOT " + slot + " MIGRATING " + dst_id);
  std::this_thread::sleep_for(200ms);  // requests meanwhile: the key is still on src
  cluster.cli(src, "MIGRATE 127.0.0.1 " + std::to_string(dst) + " '' 0 5000 KEYS '" + key + "'");
  std::this_thread::sleep_for(200ms);  // requests meanwhile: ASK to dst
  for (auto master : cluster.masters())
    cluster.cli(master, "CLUSTER SETSLOT " + slot + " NODE " + dst_id);
  std::this_thread::sleep_for(400ms);  // requests meanwhile: MOVED, then the new owner directly
  stop = true;
  client.join();
  std::cout << "[ cluster migration ] slot " << slot << " moved " << src << " -> " << dst
            << " under load: ";
  for (auto [st, n] : statuses) std::cout << n << " x " << st << " ";
  std::cout << "\n";
  // Every request was decided by Redis (no store error, so no 503), and the window's count on
  // the new owner is exactly the number admitted: nothing lost, nothing charged twice.
  int all = 0;
  for (auto [st, n] : statuses) all += n;
  EXPECT_EQ(statuses[200], all);
  EXPECT_GT(all, 100);
  auto state = cluster.cli(dst, state_command(key));  // window start, count, 0
  ASSERT_NE(state.find('\n'), std::string::npos) << state;
  EXPECT_EQ(std::stoll(state.substr(state.find('\n') + 1)), 1 + statuses[200]);
}

}  // namespace
}  // namespace floodgate::testing
