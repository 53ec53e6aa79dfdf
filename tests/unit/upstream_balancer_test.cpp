// Which server of an upstream a request goes to (http/upstream_health.hpp): smooth weighted
// round robin, least requests per unit of weight, servers out of service skipped until none is
// left (then all are candidates again), the retry's "another server", passive ejection and
// its cool-down, and a server's state kept across a reload.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "floodgate/config/loader.hpp"
#include "net/upstream_health.hpp"

namespace {

using namespace floodgate;
using namespace std::chrono_literals;

config::ConfigPtr load_balanced(const std::string& upstream) {
  auto r = config::load_config_text(
      "server: { listen: \"127.0.0.1:0\" }\nupstreams:\n  pool:\n" + upstream +
          "routes:\n  - { name: all, match: { path_prefix: / }, upstream: pool }\n",
      "test.yaml", config::process_env());
  EXPECT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors.front().to_string());
  return r.config;
}

const std::string kThree =
    "    servers:\n"
    "      - { url: \"http://10.0.0.1\", weight: 5 }\n"
    "      - { url: \"http://10.0.0.2\" }\n"
    "      - { url: \"http://10.0.0.3\" }\n";

std::string pick_url(http::UpstreamBalancer& b, const config::ConfigPtr& c) {
  auto use = b.pick(c, c->upstreams[0]);
  return use ? use.server().url : "none";
}

// Requests per server of kThree over `n` picks.
std::vector<int> spread(http::UpstreamBalancer& b, const config::ConfigPtr& c, int n) {
  std::map<std::string, int> by_url;
  for (int i = 0; i < n; ++i) ++by_url[pick_url(b, c)];
  return {by_url["http://10.0.0.1"], by_url["http://10.0.0.2"], by_url["http://10.0.0.3"]};
}

TEST(UpstreamBalancer, SmoothWeightedRoundRobinInterleaves) {
  auto c = load_balanced(kThree);
  http::UpstreamHealth health;
  http::UpstreamBalancer b(health);
  // nginx's sequence for weights 5, 1, 1: the heavy server's turns are spread out.
  std::vector<std::string> seq;
  for (int i = 0; i < 7; ++i) seq.push_back(pick_url(b, c).substr(14));
  EXPECT_EQ(seq, (std::vector<std::string>{"1", "1", "2", "1", "3", "1", "1"}));
  EXPECT_EQ(spread(b, c, 700), (std::vector<int>{500, 100, 100}));
}

TEST(UpstreamBalancer, ServersOutOfServiceAreSkippedUntilNoneIsLeft) {
  auto c = load_balanced(kThree);
  http::UpstreamHealth health;
  http::UpstreamBalancer b(health);
  const auto& up = c->upstreams[0];
  health.of(up.servers[0]).checked_up = false;  // failing its checks
  EXPECT_EQ(spread(b, c, 100), (std::vector<int>{0, 50, 50}));
  // Every server out: all are candidates again, by weight (panic), rather than 502 for all.
  health.of(up.servers[1]).checked_up = false;
  health.of(up.servers[2]).ejected_until =
      (std::chrono::steady_clock::now() + 1h).time_since_epoch().count();
  EXPECT_EQ(spread(b, c, 70), (std::vector<int>{50, 10, 10}));
}

TEST(UpstreamBalancer, ARetryGoesToAnotherServerOrNowhere) {
  auto c = load_balanced(kThree);
  http::UpstreamHealth health;
  http::UpstreamBalancer b(health);
  const auto& up = c->upstreams[0];
  for (int i = 0; i < 20; ++i) {
    auto next = b.pick(c, up, &up.servers[0]);
    ASSERT_TRUE(next);
    EXPECT_NE(&next.server(), &up.servers[0]);
  }
  auto one = load_balanced("    url: \"http://10.0.0.9\"\n");
  EXPECT_FALSE(b.pick(one, one->upstreams[0], &one->upstreams[0].servers[0]));
}

TEST(UpstreamBalancer, LeastRequestsPerUnitOfWeight) {
  auto c = load_balanced(kThree + "    balance: least_requests\n");
  http::UpstreamHealth health;
  http::UpstreamBalancer b(health);
  // Requests held open: the heavy server takes five for each one of the others.
  std::vector<http::ServerUse> open;
  for (int i = 0; i < 70; ++i) open.push_back(b.pick(c, c->upstreams[0]));
  std::map<std::string, int> n;
  for (const auto& u : open) ++n[u.server().url];
  EXPECT_EQ(n["http://10.0.0.1"], 50);
  EXPECT_EQ(n["http://10.0.0.2"], 10);
  EXPECT_EQ(n["http://10.0.0.3"], 10);
  // The second server's requests end: it is the least loaded now.
  std::erase_if(open, [](const http::ServerUse& u) { return u.server().url == "http://10.0.0.2"; });
  EXPECT_EQ(health.of(c->upstreams[0].servers[1]).in_flight, 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick_url(b, c), "http://10.0.0.2");
}

TEST(UpstreamBalancer, ConsecutiveFailuresEjectForTheCoolDown) {
  auto c = load_balanced(kThree + "    ejection: { consecutive_failures: 3, cool_down: 10s }\n");
  http::UpstreamHealth health;
  const auto& up = c->upstreams[0];
  auto& h = health.of(up.servers[1]);
  const auto now = std::chrono::steady_clock::now();
  // A success ends a run: two failures, a success, two failures do not eject.
  EXPECT_FALSE(health.record(h, up.ejection, true, now));
  EXPECT_FALSE(health.record(h, up.ejection, true, now));
  EXPECT_FALSE(health.record(h, up.ejection, false, now));
  EXPECT_FALSE(health.record(h, up.ejection, true, now));
  EXPECT_FALSE(health.record(h, up.ejection, true, now));
  EXPECT_TRUE(h.up(now));
  EXPECT_TRUE(health.record(h, up.ejection, true, now));
  EXPECT_FALSE(h.up(now + 9s));
  EXPECT_TRUE(h.up(now + 10s));
  auto samples = health.samples(*c);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].server, "http://10.0.0.2");
  EXPECT_EQ(samples[0].failures, 5u);
  EXPECT_EQ(samples[0].ejections, 1u);
  EXPECT_FALSE(samples[0].up);
  // consecutive_failures: 0 never ejects.
  config::Ejection off{0, 10s};
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(health.record(h, off, true, now + 20s));
}

TEST(UpstreamBalancer, AReloadKeepsAServersStateAndANewServerStartsUp) {
  auto c = load_balanced(kThree);
  http::UpstreamHealth health;
  http::UpstreamBalancer b(health);
  health.of(c->upstreams[0].servers[0]).checked_up = false;
  // The same servers in another order, and one new: the first keeps its verdict.
  auto d = load_balanced(
      "    servers:\n"
      "      - { url: \"http://10.0.0.4\" }\n"
      "      - { url: \"http://10.0.0.1\", weight: 5 }\n");
  std::map<std::string, int> n;
  for (int i = 0; i < 10; ++i) ++n[pick_url(b, d)];
  EXPECT_EQ(n["http://10.0.0.4"], 10);
  EXPECT_EQ(n["http://10.0.0.1"], 0);
}

}  // namespace
