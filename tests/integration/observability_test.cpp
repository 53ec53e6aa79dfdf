// What on-call's tools read (issue 20, item 4): docs/alerts.yml parses and each alert fires on
// the series that should raise it (promtool's own unit tests, tests/integration/alerts_test.yml),
// and docs/grafana-dashboard.json is checked without a browser: its layout, and every query
// reads a series a real instance exports (a scrape after traffic through a pool, a limit and a
// shadow limit) and parses as PromQL (promtool). promtool is Debian's prometheus package.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string_view>

#include "cannot_run.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

const std::string kSource = FLOODGATE_SOURCE_DIR;
constexpr const char* kPromtool = "promtool";  // found on PATH by the shell

// What `words` printed, both streams, and its exit status as "exit=N". Built with += (GCC 12
// warns falsely about a chain of std::string operator+).
std::string run(std::initializer_list<std::string_view> words) {
  std::string command;
  for (auto w : words) (command += w) += ' ';
  command += "2>&1; echo \"exit=$?\"";
  return command_output(command, 60);
}

TEST(Observability, AlertRulesParseAndFireWhenTheyShould) {
  FLOODGATE_REQUIRE_TOOL("promtool", "prometheus");
  auto checked = run({kPromtool, "check rules", kSource + "/docs/alerts.yml"});
  EXPECT_NE(checked.find("SUCCESS: 8 rules found"), std::string::npos) << checked;
  EXPECT_NE(checked.find("exit=0"), std::string::npos) << checked;
  auto tested = run({kPromtool, "test rules", kSource + "/tests/integration/alerts_test.yml"});
  EXPECT_NE(tested.find("SUCCESS"), std::string::npos) << tested;
  EXPECT_NE(tested.find("exit=0"), std::string::npos) << tested;
}

TEST(Observability, TheDashboardReadsOnlyExportedSeriesAndParses) {
  FLOODGATE_REQUIRE_TOOL("promtool", "prometheus");
  Origin a, b;
  const auto port = free_port(), admin = free_port();
  const auto config = write_temp_file(
      "observability",
      "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
          "]\n  threads: 1\n"
          "admin: { listen: 127.0.0.1:" +
          std::to_string(admin) +
          " }\n"
          "upstreams:\n  pool:\n    servers: [{ url: \"" +
          http_url(a) + "\" }, { url: \"" + http_url(b) +
          "\" }]\n"
          "    health_check: { path: /__stats, interval: 1s }\n"
          "store: { key_secret: observability-test-secret-0123 }\n"
          "routes:\n"
          "  - name: api\n    match: { path_prefix: / }\n    upstream: pool\n"
          "    limits:\n"
          "      - { name: burst, algorithm: fixed_window, limit: 3, window: 1h, key: [ip] }\n"
          "      - { name: trial, algorithm: fixed_window, limit: 1, window: 1h, key: [ip], mode: "
          "shadow }\n");
  auto fg = start_floodgate(config);
  wait_listening(admin);
  wait_serving(port, "/x");  // one of the six
  for (int i = 0; i < 5; ++i) get(port, "/x");
  const auto dir =
      std::filesystem::temp_directory_path() / ("fg-observability-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // A real scrape: the binary's own /metrics, as Prometheus reads it.
  auto scrape = get(admin, "/metrics");
  ASSERT_TRUE(scrape && scrape->result_int() == 200);
  std::ofstream(dir / "metrics.txt") << scrape->body();
  auto checked = run({"/usr/bin/python3", kSource + "/tests/integration/dashboard_check.py",
                      kSource + "/docs/grafana-dashboard.json", (dir / "metrics.txt").string(),
                      (dir / "rules.yml").string()});
  EXPECT_NE(checked.find("all exported with the labels the queries use"), std::string::npos)
      << checked;
  EXPECT_NE(checked.find("exit=0"), std::string::npos) << checked;
  std::printf("[ dashboard] %s\n", checked.substr(0, checked.find('\n')).c_str());
  auto parsed = run({kPromtool, "check rules", (dir / "rules.yml").string()});
  EXPECT_NE(parsed.find("SUCCESS"), std::string::npos) << parsed;
  EXPECT_NE(parsed.find("exit=0"), std::string::npos) << parsed;
  std::filesystem::remove_all(dir);
  std::filesystem::remove(config);
}

}  // namespace
}  // namespace floodgate::testing
