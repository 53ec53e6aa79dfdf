// Operating floodgate: metrics that move with traffic, health and readiness, the redacted
// config, the access log, reload under load and a graceful drain, on the real binary where
// signals are involved.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>

#include "admin/admin_server.hpp"
#include "floodgate_process.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string limited_routes(std::uint16_t origin_port) {
  return "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin_port) +
         "\" }\nstore: { key_secret: admin-test-secret-0123456789 }\nroutes:\n"
         "  - name: api\n    match: { path_prefix: /api }\n    upstream: origin\n"
         "    limits: [{ name: burst, algorithm: token_bucket, capacity: 5, refill_rate: 1/h, key: "
         "[ip] }]\n"
         "  - name: other\n    match: { path_prefix: / }\n    upstream: origin\n";
}

TEST(Admin, MetricsMoveWithTrafficAndSecretsAreRedacted) {
  Origin origin;
  Proxy proxy("server:\n  listen: [127.0.0.1:0]\n  threads: 1\n" + limited_routes(origin.port()));
  admin::AdminState state;
  spdlog::logger log("admin", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  admin::AdminServer server({"127.0.0.1", 0}, proxy.source(), proxy.metrics(), state, log);
  server.start();
  for (int i = 0; i < 12; ++i) get(proxy.port(), "/api/x");
  for (int i = 0; i < 3; ++i) get(proxy.port(), "/page");
  auto m = get(server.port(), "/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->result_int(), 200);
  const auto& text = m->body();
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="api",outcome="admitted"})"), 5u)
      << text;
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="api",outcome="limited"})"), 7u);
  EXPECT_EQ(metric(text, R"(floodgate_upstream_responses_total{upstream="origin",class="2xx"})"),
            8u);
  // The fifth admission took the last token and said when the next one comes (in an hour):
  // the worker's deny cache answers the 7 refusals without asking the store.
  EXPECT_EQ(metric(text, R"(floodgate_decision_seconds_count{backend="memory"})"), 5u);
  EXPECT_EQ(metric(text, R"(floodgate_deny_cache_hits_total{route="api"})"), 7u);  // one worker
  EXPECT_EQ(metric(text, R"(floodgate_build_info{version="test",pop="itest"})"), 1u);
  // Issue 20 item 4: the limit that refused, floodgate's own statuses by route, routes
  // without limits counted, the process's resources, bucket bounds without float noise.
  EXPECT_EQ(
      metric(text, R"(floodgate_limit_refusals_total{route="api",limit="burst",mode="enforced"})"),
      7u);
  EXPECT_EQ(
      metric(text, R"(floodgate_limit_refusals_total{route="api",limit="burst",mode="shadow"})"),
      0u);
  EXPECT_EQ(metric(text, R"(floodgate_own_responses_total{route="api",status="429"})"), 7u);
  EXPECT_EQ(metric(text, R"(floodgate_own_responses_total{route="other",status="429"})"), 0u);
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="other",outcome="unlimited"})"), 3u);
  EXPECT_GT(metric(text, "process_open_fds"), 3u);
  EXPECT_LT(metric(text, "process_open_fds"), 100000u);  // UINT64_MAX: missing
  EXPECT_GT(metric(text, "process_resident_memory_bytes"), 1000000u);
  EXPECT_LT(metric(text, "process_resident_memory_bytes"), 100000000000u);
  EXPECT_NE(text.find("\nprocess_cpu_seconds_total "), std::string::npos);
  EXPECT_NE(text.find("\nprocess_start_time_seconds 1"), std::string::npos);
  EXPECT_NE(text.find(R"(le="0.0001")"), std::string::npos);
  EXPECT_EQ(text.find("0000000001"), std::string::npos) << "float noise in a bucket bound";
  // The origin's own address is its server label (from the config); no client's is a label.
  const std::string origin_label = "server=\"http://127.0.0.1:" + std::to_string(origin.port());
  std::string others = text;
  for (auto at = others.find(origin_label); at != std::string::npos; at = others.find(origin_label))
    others.erase(at, origin_label.size());
  EXPECT_NE(others.size(), text.size());
  EXPECT_EQ(others.find("127.0.0.1"), std::string::npos) << "no client address may be a label";

  EXPECT_EQ(get(server.port(), "/healthz")->result_int(), 200);
  auto ready = get(server.port(), "/readyz");
  EXPECT_EQ(ready->result_int(), 200);
  EXPECT_NE(ready->body().find("\"ready\":true"), std::string::npos);
  state.draining = true;
  EXPECT_EQ(get(server.port(), "/readyz")->result_int(), 503);

  auto cfg = get(server.port(), "/config");
  EXPECT_EQ(cfg->result_int(), 200);
  EXPECT_EQ(cfg->body().find("admin-test-secret"), std::string::npos);
  EXPECT_NE(cfg->body().find("\"key_secret\":\"[redacted]\""), std::string::npos) << cfg->body();
  EXPECT_NE(cfg->body().find("\"name\":\"burst\""), std::string::npos);
  EXPECT_EQ(get(server.port(), "/nope")->result_int(), 404);
}

struct Running {
  Origin origin;
  std::uint16_t port = free_port();
  std::uint16_t admin = free_port();
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("fg-admin-" + std::to_string(getpid()) + "-" + std::to_string(port) + ".yaml"))
          .string();
  std::unique_ptr<ChildProcess> fg;

  std::string config(int capacity, bool access_log = false) {
    return "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
           "]\n  threads: 2\n  timeouts: { drain: 5s }\n" +
           "admin: { listen: 127.0.0.1:" + std::to_string(admin) +
           " }\nlog: { level: warn, access_log: " + (access_log ? "true" : "false") + " }\n" +
           substitute(limited_routes(origin.port()), "capacity: 5",
                      "capacity: " + std::to_string(capacity));
  }
  void start(const std::string& text) {
    std::ofstream(path) << text;
    fg = std::make_unique<ChildProcess>(
        std::vector<std::string>{FLOODGATE_BINARY, "--config", path});
    // The admin listener and the workers' listeners start on their own threads: wait for both.
    wait_serving(admin, "/healthz");
    wait_listening(port);
  }
  ~Running() {
    fg.reset();
    std::filesystem::remove(path);
  }
};

TEST(Admin, DrainFinishesAnInFlightRequestWhileReadyzSays503) {
  Running r;
  r.start(r.config(5));
  auto slow = std::async(std::launch::async, [&] { return get(r.port, "/slow/1500"); });
  // In flight: the origin has it (and holds it 1.5 s).
  ASSERT_TRUE(eventually([&] { return r.origin.requests() == 1; }, 5s));
  auto started = std::chrono::steady_clock::now();
  kill(r.fg->pid(), SIGTERM);
  // The admin listener stays up during the drain and says so; the traffic listeners close.
  EXPECT_TRUE(eventually(
      [&] {
        auto ready = get(r.admin, "/readyz");
        return ready && ready->result_int() == 503;
      },
      1s));
  EXPECT_TRUE(eventually(
      [&] {
        try {
          get(r.port, "/other");
          return false;
        } catch (const std::exception&) {
          return true;
        }
      },
      1s));
  auto done = slow.get();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->result_int(), 200);
  EXPECT_EQ(done->body(), "slow ok");
  auto code = r.fg->signal_and_wait(0, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
}

TEST(Admin, ReloadUnderLoadLosesNoRequest) {
  Running r;
  r.start(r.config(1000000));
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, limited{0}, other{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&] {
      while (!stop) {
        try {
          Client c(r.port);
          for (int i = 0; i < 50 && !stop; ++i) {
            auto res = c.request("GET /api/x HTTP/1.1\r\nHost: t\r\n\r\n");
            int s = res ? res->result_int() : -1;
            (s == 200 ? ok : s == 429 ? limited : other)++;
          }
        } catch (const std::exception&) {
          other++;
        }
      }
    });
  const auto reloads = [&] {
    return metric(get(r.admin, "/metrics")->body(),
                  R"(floodgate_config_reloads_total{result="ok"})");
  };
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(250ms);
    std::ofstream(r.path) << r.config(i % 2 ? 1000000 : 2000000);
    kill(r.fg->pid(), SIGHUP);
    // Each reload done before the next SIGHUP: two pending at once are delivered as one (a
    // loaded machine's reload can outlast the 250 ms).
    EXPECT_TRUE(eventually([&] { return reloads() == i + 1u; }, 5s)) << "reload " << i + 1;
  }
  std::this_thread::sleep_for(250ms);
  stop = true;
  for (auto& t : clients) t.join();
  std::cout << "[ reload ] 6 reloads under load: " << ok << " x 200, " << limited << " x 429, "
            << other << " other\n";
  EXPECT_GT(ok.load(), 500);
  EXPECT_EQ(other.load(), 0);
  auto m = get(r.admin, "/metrics")->body();
  EXPECT_EQ(metric(m, R"(floodgate_config_reloads_total{result="ok"})"), 6u);
}

TEST(Admin, AccessLogHasOneJsonLinePerRequest) {
  Running r;
  r.start(r.config(2, true));
  for (int i = 0; i < 3; ++i) get(r.port, "/api/x");
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) lines.push_back(r.fg->read_line(2s));
  // Two workers write their lines when their responses end: the order may differ.
  int admitted = 0, limited = 0;
  for (const auto& line : lines) {
    EXPECT_NE(line.find(R"("route":"api")"), std::string::npos) << line;
    EXPECT_TRUE(std::regex_search(line, std::regex(R"("key":"rl:api:burst:\{[0-9a-f]{32}\}")")))
        << line;
    if (line.find(R"("status":200)") != std::string::npos &&
        line.find(R"("decision":"admitted")") != std::string::npos)
      ++admitted;
    if (line.find(R"("status":429)") != std::string::npos &&
        line.find(R"("decision":"limited")") != std::string::npos)
      ++limited;
  }
  EXPECT_EQ(admitted, 2);
  EXPECT_EQ(limited, 1);
}

// The embedded store counts the live keys it evicts at store.max_keys; /metrics shows that
// count (it used to show a counter of its own that nothing incremented).
TEST(Admin, MemoryStoreEvictionsAreCounted) {
  Running r;
  r.start("server:\n  listen: [127.0.0.1:" + std::to_string(r.port) +
          "]\n  threads: 1\nadmin: { listen: 127.0.0.1:" + std::to_string(r.admin) +
          " }\nlog: { level: warn }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" +
          std::to_string(r.origin.port()) +
          "\" }\nstore: { key_secret: admin-test-secret-0123456789, max_keys: 1000 }\n"
          "routes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
          "    limits: [{ name: per-key, algorithm: token_bucket, capacity: 5, refill_rate: 1/h, "
          "key: [header:x-key] }]\n");
  const auto evictions = [&] {
    return metric(get(r.admin, "/metrics")->body(), "floodgate_memory_store_evictions_total");
  };
  EXPECT_EQ(evictions(), 0u);
  Client c(r.port);
  for (int i = 0; i < 2000; ++i) {
    auto res = c.request("GET /x HTTP/1.1\r\nHost: t\r\nX-Key: k" + std::to_string(i) + "\r\n\r\n");
    ASSERT_TRUE(res) << "request " << i;
    ASSERT_EQ(res->result_int(), 200);
  }
  // 2000 live keys (each bucket holds 4 of 5 tokens for an hour) under a cap of 1000: the
  // cap is per shard, so a little more than 1000 evictions.
  const auto n = evictions();
  EXPECT_GE(n, 900u);
  EXPECT_LE(n, 1100u);
}

}  // namespace
}  // namespace floodgate::testing
