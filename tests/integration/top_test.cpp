// Top offenders and the admin page: /top names the heavy caller across workers with exact
// counts while callers fit the summary, stays bounded under a flood of distinct callers,
// narrows with ?limit= and ?k=; /stats carries the page's numbers; and the page itself,
// loaded by headless Chromium against a proxy under traffic, lists the heavy caller.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "admin/admin_server.hpp"
#include "cannot_run.hpp"
#include "floodgate/server/server.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
namespace json = boost::json;

// Two workers (connections spread over both), a limit of 10 an hour per API key, a shadow
// limit of 5 per key, and an admin listener so that callers are counted.
std::string top_config(const Origin& origin, const std::string& top = "") {
  return "server:\n  listen: [127.0.0.1:0]\n  threads: 2\n"
         "admin:\n  listen: 127.0.0.1:0\n" +
         top + "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) +
         "\" }\nstore: { key_secret: top-test-secret-0123456789abcdef }\nroutes:\n"
         "  - name: api\n    match: { path_prefix: /api }\n    upstream: origin\n"
         "    limits:\n"
         "      - { name: per-key, algorithm: token_bucket, capacity: 10, refill_rate: 1/h, "
         "key: [header:X-Api-Key] }\n"
         "      - { name: trial, algorithm: fixed_window, limit: 5, window: 1h, mode: shadow, "
         "key: [header:X-Api-Key] }\n";
}

struct Admin {
  admin::AdminState state;
  spdlog::logger log{"admin", std::make_shared<spdlog::sinks::stderr_sink_mt>()};
  admin::AdminServer server;
  explicit Admin(Proxy& proxy)
      : server({"127.0.0.1", 0}, proxy.source(), proxy.metrics(), state, log,
               admin::AdminApi{.workers = &proxy.server()}) {
    server.start();
  }
  json::value get_json(const std::string& target, int expect = 200) {
    auto r = get(server.port(), target);
    EXPECT_TRUE(r);
    if (!r) return nullptr;
    EXPECT_EQ(r->result_int(), expect) << target << ": " << r->body();
    return json::parse(r->body());
  }
};

void call(Proxy& proxy, const std::string& key, int n) {
  for (int i = 0; i < n; ++i) {
    auto r = get(proxy.port(), "/api/x", "X-Api-Key: " + key + "\r\n");
    ASSERT_TRUE(r);
  }
}

const json::object& limit_named(const json::value& top, const std::string& name) {
  for (const auto& l : top.at("limits").as_array())
    if (l.at("limit").as_string() == name) return l.as_object();
  ADD_FAILURE() << "no limit " << name << " in " << top;
  static const json::object none;
  return none;
}

TEST(Top, HeavyAndLightCallersAcrossWorkers) {
  Origin origin;
  Proxy proxy(top_config(origin));
  Admin admin(proxy);
  call(proxy, "heavy-caller", 60);
  for (int c = 0; c < 12; ++c) call(proxy, "light-" + std::to_string(c), 3);

  auto top = admin.get_json("/top");
  const auto& per_key = limit_named(top, "per-key");
  EXPECT_EQ(per_key.at("route").as_string(), "api");
  EXPECT_EQ(per_key.at("key").as_string(), "header:X-Api-Key");
  EXPECT_EQ(per_key.at("window_seconds").as_int64(), 60);
  EXPECT_EQ(per_key.at("requests").as_int64(), 60 + 12 * 3);
  const auto& list = per_key.at("top").as_array();
  ASSERT_EQ(list.size(), 13u);
  // 13 callers fit the summary: every count is exact, merged over both workers.
  EXPECT_EQ(list[0].at("caller").as_string(), "header:X-Api-Key=heavy-caller");
  EXPECT_EQ(list[0].at("requests").as_int64(), 60);
  EXPECT_EQ(list[0].at("refused").as_int64(), 50);  // 10 tokens an hour
  EXPECT_EQ(list[0].at("error").as_int64(), 0);
  for (std::size_t i = 1; i < list.size(); ++i) {
    EXPECT_EQ(list[i].at("requests").as_int64(), 3);
    EXPECT_EQ(list[i].at("refused").as_int64(), 0);
  }
  // Both workers counted (each request a connection of its own, spread by the kernel), and
  // the answer above is their merge: each worker's own summaries add up to the whole.
  std::uint64_t workers = 0, counted = 0;
  for (const auto& t : proxy.server().top(std::chrono::seconds(1)))
    if (t.limit == "per-key") {
      std::uint64_t n = 0;
      for (const auto& h : t.slices) n += h.total();
      workers += n > 0;
      counted += n;
    }
  EXPECT_EQ(workers, 2u);
  EXPECT_EQ(counted, 60u + 12 * 3);
  // The shadow limit counts what it would have refused, and refuses nothing.
  const auto& trial = limit_named(top, "trial");
  EXPECT_GT(trial.at("top").as_array()[0].at("shadow_refused").as_int64(), 0) << trial;
  EXPECT_EQ(trial.at("top").as_array()[0].at("refused").as_int64(), 0);

  auto narrowed = admin.get_json("/top?limit=api%2Fper-key&k=2");
  ASSERT_EQ(narrowed.at("limits").as_array().size(), 1u);
  ASSERT_EQ(narrowed.at("limits").as_array()[0].at("top").as_array().size(), 2u);
  EXPECT_EQ(admin.get_json("/top?limit=trial").at("limits").as_array().size(), 1u);
  EXPECT_EQ(admin.get_json("/top?k=500").at("limits").as_array()[0].at("top").as_array().size(),
            13u);  // at most the configured k (20)
  auto bad = admin.get_json("/top?k=-1", 400);
  EXPECT_NE(json::serialize(bad).find("k must be"), std::string::npos);
  auto unknown = admin.get_json("/top?limit=nope", 404);
  EXPECT_NE(json::serialize(unknown).find("api/per-key"), std::string::npos) << unknown;
}

TEST(Top, AFloodOfDistinctCallersStaysBoundedAndKeepsTheHeavyOne) {
  Origin origin;
  Proxy proxy(top_config(origin, "  top: { k: 5, window: 30s }\n"));
  Admin admin(proxy);
  // 400 distinct callers once each, with the heavy caller's 100 requests spread among them:
  // 100 counters per worker cannot hold them all, and must still hold the heavy one.
  for (int i = 0; i < 400; ++i) {
    call(proxy, "flood-" + std::to_string(i), 1);
    if (i % 4 == 0) call(proxy, "heavy-caller", 1);
  }
  auto top = admin.get_json("/top?limit=per-key");
  const auto& l = top.at("limits").as_array()[0];
  EXPECT_EQ(l.at("window_seconds").as_int64(), 30);
  EXPECT_EQ(l.at("requests").as_int64(), 500);
  const auto& list = l.at("top").as_array();
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list[0].at("caller").as_string(), "header:X-Api-Key=heavy-caller");
  const auto count = list[0].at("requests").as_int64();
  const auto error = list[0].at("error").as_int64();
  EXPECT_GE(count, 100);
  EXPECT_LE(count - error, 100);
  EXPECT_GE(list[0].at("refused").as_int64(), 80);  // 10 tokens an hour
  // Nobody else came near: the rest are the summaries' floors, marked as such.
  EXPECT_LE(l.at("unlisted_at_most").as_int64(), list[4].at("requests").as_int64());
}

// The botnet: three callers sending 40, 25 and 12 requests among 300 callers of one request
// each, over both workers (a connection per request), with k: 5. k sets how many are shown,
// not how right they are: the three are listed first, in order, each with its true count
// within its stated error, and no error above 1 % of the requests.
TEST(Top, ABotnetsHeavyCallersAreListedWithTheirCountsWhateverK) {
  Origin origin;
  Proxy proxy(top_config(origin, "  top: { k: 5, window: 60s }\n"));
  Admin admin(proxy);
  std::vector<std::string> calls;
  for (int i = 0; i < 300; ++i) calls.push_back("bot-" + std::to_string(i));
  for (auto [name, n] : {std::pair{"heavy-40", 40}, {"heavy-25", 25}, {"heavy-12", 12}})
    calls.insert(calls.end(), n, name);
  std::mt19937 rng(38);
  std::shuffle(calls.begin(), calls.end(), rng);
  for (const auto& c : calls) call(proxy, c, 1);
  auto top = admin.get_json("/top?limit=per-key");
  const auto& l = top.at("limits").as_array()[0];
  const auto total = l.at("requests").as_int64();
  EXPECT_EQ(total, 377);
  const auto& list = l.at("top").as_array();
  ASSERT_EQ(list.size(), 5u);
  const std::pair<const char*, std::int64_t> heavy[] = {
      {"heavy-40", 40}, {"heavy-25", 25}, {"heavy-12", 12}};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(list[i].at("caller").as_string(), std::string("header:X-Api-Key=") + heavy[i].first)
        << list;
    const auto count = list[i].at("requests").as_int64(), error = list[i].at("error").as_int64();
    EXPECT_GE(count, heavy[i].second) << list[i];
    EXPECT_LE(count - error, heavy[i].second) << list[i];
    EXPECT_LE(error * 100, total) << list[i];
  }
  for (std::size_t i = 3; i < 5; ++i) EXPECT_LT(list[i].at("requests").as_int64(), 12) << list;
  std::cout << "[ top ] botnet, k 5: " << json::serialize(list) << "\n";
}

TEST(Top, OffMeansNothingIsKept) {
  Origin origin;
  Proxy proxy(top_config(origin, "  top: off\n"));
  Admin admin(proxy);
  call(proxy, "heavy-caller", 5);
  EXPECT_TRUE(admin.get_json("/top").at("limits").as_array().empty());
}

TEST(Top, StatsCarryRatesByRouteAndTheStore) {
  Origin origin;
  Proxy proxy(top_config(origin));
  Admin admin(proxy);
  call(proxy, "heavy-caller", 15);
  // The admin thread samples every 2 s: wait for a sample taken after the traffic (its
  // totals hold the 5 refusals), which is at least the series' first point.
  json::value stats;
  ASSERT_TRUE(eventually(
      [&] {
        stats = admin.get_json("/stats");
        return stats.at("series").at("time").as_array().size() >= 1 &&
               stats.at("totals").as_object().contains("api") &&
               stats.at("totals").at("api").at("limited").as_int64() == 5;
      },
      6s))
      << stats;
  // One outcome per request: the shadow limit refused 5 of the 10 admitted.
  EXPECT_EQ(stats.at("totals").at("api").at("admitted").as_int64(), 5);
  EXPECT_EQ(stats.at("totals").at("api").at("shadow_limited").as_int64(), 5);
  EXPECT_EQ(stats.at("store").at("backend").as_string(), "memory");
  EXPECT_EQ(stats.at("store").at("connections").as_int64(), 2);
  EXPECT_EQ(stats.at("store").at("circuit_open").as_int64(), 0);
  EXPECT_TRUE(stats.at("series").at("routes").as_object().contains("api"));
  auto page = get(admin.server.port(), "/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->result_int(), 200);
  EXPECT_EQ((*page)[boost::beast::http::field::content_type], "text/html; charset=utf-8");
  // Self-contained: nothing is fetched from anywhere but this listener.
  EXPECT_EQ(page->body().find("http://"), page->body().find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(page->body().find("https://"), std::string::npos);
  EXPECT_EQ(page->body().find("src="), std::string::npos);
}

// Headless Chromium loads the page from the real binary's own admin listener (as main wires
// it) while the binary is under traffic; the rendered DOM must list the heavy caller, and a
// screenshot is left in the build folder for a person to look at.
TEST(AdminPage, ChromiumShowsTheHeavyCallerFromTheBinarysAdminListener) {
  FLOODGATE_REQUIRE_TOOL("chromium", "chromium");
  const std::string chromium = find_tool("chromium");
  Origin origin;
  const auto port = free_port(), admin = free_port();
  const auto config = write_temp_file(
      "admin-page",
      substitute(substitute(top_config(origin), "listen: [127.0.0.1:0]",
                            "listen: [127.0.0.1:" + std::to_string(port) + "]"),
                 "listen: 127.0.0.1:0", "listen: 127.0.0.1:" + std::to_string(admin)));
  auto fg = start_floodgate(config);
  wait_listening(admin);
  wait_listening(port);
  auto send = [&](const std::string& key) { get(port, "/api/x", "X-Api-Key: " + key + "\r\n"); };
  std::atomic<bool> stop{false};
  std::thread traffic([&] {  // under traffic while the page loads and refreshes
    int i = 0;
    while (!stop) {
      for (int n = 0; n < 5; ++n) send("heavy-caller");
      send("light-" + std::to_string(i++ % 7));
      std::this_thread::sleep_for(20ms);
    }
  });
  // Two samples of /stats (every 2 s) with traffic in them: the plot has a line.
  ASSERT_TRUE(eventually(
      [&] {
        auto r = get(admin, "/stats");
        if (!r || r->result_int() != 200) return false;
        auto stats = json::parse(r->body());
        return stats.at("series").at("time").as_array().size() >= 2;
      },
      10s));
  const std::string url = "http://127.0.0.1:" + std::to_string(admin) + "/";
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--disable-background-networking --no-first-run --no-default-browser-check "
      "--hide-scrollbars --window-size=1280,1100 --virtual-time-budget=5000 ";
  const std::string profile =
      (std::filesystem::temp_directory_path() / ("fg-chromium-" + std::to_string(getpid())))
          .string();
  const std::string dom = command_output(
      chromium + flags + "--user-data-dir=" + profile + " --dump-dom " + url + " 2>/dev/null", 60);
  const std::string shot = std::string(FLOODGATE_BUILD_DIR) + "/admin-page.png";
  command_output(chromium + flags + "--user-data-dir=" + profile + " --screenshot=" + shot + " " +
                     url + " 2>/dev/null",
                 60);
  stop = true;
  traffic.join();
  fg.reset();
  std::filesystem::remove(config);
  std::filesystem::remove_all(profile);
  ASSERT_NE(dom.find("<table class=\"top\" data-limit=\"api/per-key\">"), std::string::npos)
      << dom.substr(0, 4000);
  const auto row = dom.find("<tr class=\"offender\"><td>1</td>");
  ASSERT_NE(row, std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("header:X-Api-Key=heavy-caller", row), std::string::npos);
  EXPECT_EQ(dom.find("header:X-Api-Key=heavy-caller", row), dom.find("header:X-Api-Key=", row))
      << "the heavy caller is first";
  EXPECT_NE(dom.find("<tr data-route=\"api\">"), std::string::npos);  // the routes table
  EXPECT_NE(dom.find("<polyline"), std::string::npos);                // the plot has a line
  EXPECT_NE(dom.find(">live<"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(shot) && std::filesystem::file_size(shot) > 10'000)
      << "no screenshot at " << shot;
}

}  // namespace
}  // namespace floodgate::testing
