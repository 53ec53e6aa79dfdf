// `floodgate replay` against the real binary: seeded traffic through `floodgate --config`,
// its access log written to a file with `replay_fields: auto`, then `floodgate replay
// --decisions` of that file under the same config. Every request must be decided the same way
// (admitted or refused) for every kind of limit a replay decides from a log line: a limit
// being rolled out, a calendar quota, a counting limit, a cookie key, an on_exceed: delay
// bucket (requests held and refused while others arrive), and a leased limit of one instance.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <csignal>
#include <deque>
#include <future>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "floodgate/limit/clock.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"
#include "replay_support.hpp"

namespace floodgate::testing {
namespace {

namespace rs = replay_support;
using namespace std::chrono_literals;

// The live answers by path (the access log records the path, not the query), in the order
// they were sent: most requests have a path of their own; the counting limit's must be the
// test origin's /respond (its query sets the status), and the harness's /__up and /probe
// repeat too. Requests of one path are sent one at a time, so their log lines come in the
// order they were sent.
struct Statuses {
  std::map<std::string, std::deque<int>> by_path;
  void add(const std::string& path, int status) { by_path[path].push_back(status); }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [path, statuses] : by_path) n += statuses.size();
    return n;
  }
};

std::string ts_of(const std::string& line) {
  const auto at = line.find("\"ts\":\"");
  return at == std::string::npos ? std::string() : line.substr(at + 6, 27);
}

// The access log's request lines in time order: a line is written when its response has been
// sent, so a request held by a delay is logged after later ones; the replay decides in the
// order it reads (ts: fixed width, UTC).
std::string in_time_order(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find("\"type\":\"access\"") != std::string::npos) lines.push_back(line);
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return ts_of(a) < ts_of(b); });
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

struct Compared {
  std::size_t requests = 0, refused = 0, disagreements = 0;
  std::map<std::string, std::pair<std::size_t, std::size_t>> per_route;  // requests, refused
};

// Replays `log` under `config` and compares each decision with the live answer of its target.
Compared replay_and_compare(const std::string& config, const std::string& log, const Statuses& live,
                            const std::vector<std::string>& extra = {}) {
  rs::ScratchDir dir;
  std::vector<std::string> args = {"--config", dir.write("config.yaml", config), "--decisions",
                                   dir / "decisions.tsv"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(dir.write("access.log", in_time_order(log)));
  auto r = rs::replay(args, dir);
  Compared c;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto decisions = rs::read_decisions(dir / "decisions.tsv");
  EXPECT_EQ(decisions.size(), live.size());
  auto left = live.by_path;
  for (const auto& d : decisions) {
    auto it = left.find(d.path);
    if (it == left.end() || it->second.empty()) {
      ADD_FAILURE() << "a decision for a request never sent: " << d.path;
      continue;
    }
    const int status = it->second.front();
    it->second.pop_front();
    ++c.requests;
    const bool refused_live = status == 429;
    c.refused += refused_live;
    auto& route = c.per_route[d.route()];
    ++route.first;
    route.second += refused_live;
    if ((d.verdict() == "refused") != refused_live || d.verdict() == "no-route") {
      ++c.disagreements;
      ADD_FAILURE() << d.path << " at " << d.time << ": live " << status << ", replay "
                    << d.verdict() << " by " << d.limit();
    }
  }
  return c;
}

void print(const char* what, const Compared& c) {
  std::cout << "[ replay vs binary ] " << what << ": " << c.requests << " requests, " << c.refused
            << " refused live, " << c.disagreements << " disagreements";
  for (const auto& [route, n] : c.per_route)
    std::cout << "; " << route << " " << n.first << "/" << n.second;
  std::cout << "\n";
}

// The requests the harness sent before the test's own (wait_serving's /__up, wait_enforced's
// /probe), as the binary answered them: the replay decides them too.
void add_harness_requests(Statuses& live, const std::string& log) {
  std::istringstream in(in_time_order(log));
  for (std::string line; std::getline(in, line);) {
    const auto obj = boost::json::parse(line).as_object();
    const std::string path(obj.at("path").as_string());
    if (path == "/__up" || path == "/probe")
      live.add(path, static_cast<int>(rs::number(obj.at("status"))));
  }
}

std::string log_and_routes(std::uint16_t port, std::uint16_t origin, const std::string& log_path,
                           const std::string& store, const std::string& routes) {
  return "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
         "]\n  threads: 2\n  timeouts: { drain: 2s }\nlog: { access_log: { path: \"" + log_path +
         "\" }, replay_fields: auto }\n" + store +
         "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin) +
         "\" }\nroutes:\n" + routes;
}

TEST(ReplayBinary, EveryKindOfLimitIsDecidedAsTheBinaryDecidedIt) {
  next_local_midnight("Europe/Berlin", std::chrono::seconds(60));  // not ending under the test
  Origin origin;
  rs::ScratchDir dir;
  const auto port = free_port();
  const std::string routes = R"(
  - name: rolled
    match: { path_prefix: /rolled }
    upstream: origin
    limits: [{ name: rolled, algorithm: fixed_window, limit: 3, window: 1h, key: ["header:X-Client"], rollout: 50% }]
  - name: daily
    match: { path_prefix: /daily }
    upstream: origin
    limits: [{ name: daily, algorithm: quota, period: day, timezone: Europe/Berlin, limit: 4, key: ["header:X-Client"] }]
  - name: counted
    match: { path_prefix: /respond }
    upstream: origin
    limits: [{ name: failures, algorithm: fixed_window, limit: 2, window: 1h, key: ["header:X-Client"], count: { status: [401] } }]
  - name: session
    match: { path_prefix: /session }
    upstream: origin
    limits: [{ name: per-session, algorithm: token_bucket, capacity: 3, refill_rate: 1/h, key: ["cookie:sid"] }]
  - name: paced
    match: { path_prefix: /paced }
    upstream: origin
    limits: [{ name: paced, algorithm: token_bucket, capacity: 2, refill_rate: 2/s, key: ["header:X-Client"], on_exceed: delay, max_delay: 700ms }]
  - name: up
    match: { path_prefix: /__up }
    upstream: origin
)";
  const auto config =
      log_and_routes(port, origin.port(), dir / "access.log",
                     "store: { key_secret: replay-binary-secret-0123456789 }\n", routes);
  auto fg = start_floodgate(dir.write("floodgate.yaml", config));
  wait_serving(port);

  // One request after another for the limits whose state a response changes (a counting
  // limit gives its unit back when the origin answers): 400 of them, seeded.
  std::mt19937 rng(38);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  Statuses live;
  std::size_t n = 0;
  auto send = [&](const std::string& path, const std::string& headers) {
    const auto target = path.starts_with("/respond") ? path : path + "/" + std::to_string(n++);
    auto r = get(port, target, headers);
    live.add(target.substr(0, target.find('?')), r ? r->result_int() : -1);
  };
  for (int i = 0; i < 400; ++i) {
    const auto client = "X-Client: c" + std::to_string(pick(8)) + "\r\n";
    switch (pick(4)) {
      case 0:
        send("/rolled", client);
        break;
      case 1:
        send("/daily", client);
        break;
      case 2:
        send(pick(3) == 0 ? "/respond?__status=401" : "/respond?__status=200", client);
        break;
      default:
        send("/session", client + "Cookie: theme=dark; sid=s" + std::to_string(pick(6)) + "\r\n");
    }
  }
  // Delay: bursts of 6 requests 25 ms apart per caller, not waiting for answers (a held one
  // answers up to 700 ms later): two pass, then each is held while its units are at most
  // 700 ms away and refused beyond.
  std::vector<std::future<std::pair<std::string, int>>> held;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 6; ++i) {
      const auto target = "/paced/" + std::to_string(n++);
      const auto headers = "X-Client: p" + std::to_string(c) + "\r\n";
      held.push_back(std::async(std::launch::async, [=] {
        auto r = get(port, target, headers);
        return std::pair<std::string, int>(target, r ? static_cast<int>(r->result_int()) : -1);
      }));
      std::this_thread::sleep_for(25ms);
    }
  for (auto& f : held) {
    auto [target, status] = f.get();
    live.add(target, status);
  }
  ASSERT_EQ(fg->signal_and_wait(SIGTERM, 10s), 0);  // drained: every line written

  const auto log = rs::read_text(dir / "access.log");
  add_harness_requests(live, log);
  auto c = replay_and_compare(config, log, live);
  print("every kind", c);
  EXPECT_EQ(c.requests, live.size());
  EXPECT_GE(c.requests, 418u);
  EXPECT_EQ(c.disagreements, 0u);
  // The traffic exercised every limit: each refused some of its route's requests.
  for (const char* route : {"rolled", "daily", "counted", "session", "paced"})
    EXPECT_GT(c.per_route[route].second, 0u) << route;
}

// A leased limit on Redis with one instance: units taken ahead from the store decide as the
// exact limit does (the replay decides exactly). 200 requests of 4 callers, one at a time.
TEST(ReplayBinary, ALeasedLimitOfOneInstanceIsDecidedAsTheExactOne) {
  RedisServer redis;
  Origin origin;
  rs::ScratchDir dir;
  const auto port = free_port();
  const std::string routes = R"(
  - name: leased
    match: { path_prefix: /leased }
    upstream: origin
    limits: [{ name: leased, algorithm: fixed_window, limit: 40, window: 1h, key: ["header:X-Client"], lease: { size: 5, ttl: 30s } }]
)" + kProbeRoute;
  const auto config = log_and_routes(
      port, origin.port(), dir / "access.log",
      "store:\n  backend: redis\n  redis: { address: \"127.0.0.1:" + std::to_string(redis.port()) +
          "\", timeout: 1s }\n  key_secret: replay-binary-secret-0123456789\n  instances: 1\n",
      routes);
  auto fg = start_floodgate(dir.write("floodgate.yaml", config));
  wait_enforced(port);
  std::mt19937 rng(39);
  Statuses live;
  for (int i = 0; i < 200; ++i) {
    const auto target = "/leased/" + std::to_string(i);
    auto r = get(port, target, "X-Client: c" + std::to_string(rng() % 4) + "\r\n");
    live.add(target, r ? r->result_int() : -1);
  }
  ASSERT_EQ(fg->signal_and_wait(SIGTERM, 10s), 0);
  const auto log = rs::read_text(dir / "access.log");
  add_harness_requests(live, log);
  auto c = replay_and_compare(config, log, live);
  print("leased, one instance", c);
  EXPECT_EQ(c.disagreements, 0u);
  // 4 callers of 40 an hour each: about 50 requests each, so each is refused some.
  EXPECT_EQ(c.per_route["leased"].first, 200u);
  EXPECT_GT(c.per_route["leased"].second, 0u);
}

}  // namespace
}  // namespace floodgate::testing
