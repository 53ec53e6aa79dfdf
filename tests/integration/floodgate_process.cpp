#include "floodgate_process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "floodgate/limit/clock.hpp"

namespace floodgate::testing {

using namespace std::chrono_literals;

std::string write_temp_file(const std::string& name, const std::string& text) {
  auto path =
      std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

void wait_serving(std::uint16_t port, const std::string& target) {
  for (int i = 0; i < 200; ++i) {
    try {
      if (get(port, target)) return;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(25ms);
  }
  FAIL() << "floodgate on " << port << " did not start";
}

void wait_listening(std::uint16_t port) {
  for (int i = 0; i < 200; ++i) {
    try {
      Client probe(port);  // a connection, not a request: nothing is counted or logged
      return;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(25ms);
  }
  FAIL() << "nothing listens on " << port;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

std::uint64_t metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return UINT64_MAX;
  return std::stoull(text.substr(at + series.size() + 2));
}

void wait_enforced(std::uint16_t port, const std::string& target) {
  int streak = 0;
  for (int i = 0; i < 400 && streak < 16; ++i) {
    std::optional<Response> r;
    try {
      r = get(port, target);
    } catch (const std::exception&) {
    }
    streak = r && r->result_int() == 200 ? streak + 1 : 0;
    if (!streak) std::this_thread::sleep_for(25ms);
  }
  ASSERT_EQ(streak, 16) << "the store never decided on every worker";
}

std::string floodgate_binary() {
  const char* other = std::getenv("FLOODGATE_TEST_BINARY");
  return other && *other ? other : FLOODGATE_BINARY;
}

std::unique_ptr<ChildProcess> start_floodgate(const std::string& config_path) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{
      "/bin/sh", "-c", "exec \"$0\" --config \"$1\" 2>&1", floodgate_binary(), config_path});
}

std::string wait_for_line(ChildProcess& p, const std::string& needle,
                          std::chrono::milliseconds timeout, std::string& seen) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto line = p.read_line(std::max(left, std::chrono::milliseconds(1)));
    if (line.empty()) continue;
    seen += line + "\n";
    if (line.find(needle) != std::string::npos) return line;
  }
  return "";
}

namespace {
constexpr const char* kTestToken = "oncall-token-0123456789abcdef";
}

std::string admin_with_test_token(std::uint16_t admin) {
  return "admin: { listen: 127.0.0.1:" + std::to_string(admin) +
         ", tokens: { oncall: " + kTestToken + " } }\n";
}

std::string put_exemption(std::uint16_t admin, const std::string& limit,
                          const std::string& caller) {
  return put_override(admin, limit, caller, R"({"exempt": true, "ttl": "10m"})");
}

std::string put_override(std::uint16_t admin, const std::string& limit, const std::string& caller,
                         const std::string& body) {
  std::string command = "curl -s -w ' %{http_code}' -X PUT -H 'Authorization: Bearer ";
  command += kTestToken;
  command += "' -d '" + body + "' 'http://127.0.0.1:";
  command += std::to_string(admin);
  command += "/overrides/" + limit + "/" + caller + "'";
  auto out = command_output(command, 20);
  const auto space = out.rfind(' ');
  return space == std::string::npos ? out : out.substr(space + 1) + " " + out.substr(0, space);
}

std::int64_t next_local_midnight(const std::string& zone, std::chrono::seconds margin) {
  auto ask = [&] {
    return std::stoll(command_output("env TZ=" + zone + " date -d 'tomorrow 00:00' +%s", 10));
  };
  const auto now_s = [] { return limit::SystemClock().now() / limit::kMicrosPerSecond; };
  auto midnight = ask();
  if (midnight - now_s() < margin.count()) {
    std::this_thread::sleep_for(std::chrono::seconds(midnight - now_s() + 2));
    midnight = ask();
  }
  return midnight;
}

std::string redis_config(std::uint16_t listen_port, std::uint16_t origin_port,
                         std::uint16_t redis_port, const std::string& routes,
                         const std::string& timeout, const std::string& extra) {
  return "server:\n  listen: [127.0.0.1:" + std::to_string(listen_port) +
         "]\n  threads: 2\n  timeouts: { drain: 1s }\nupstreams:\n  origin: { url: "
         "\"http://127.0.0.1:" +
         std::to_string(origin_port) +
         "\" }\nstore:\n  backend: redis\n  redis: { address: \"127.0.0.1:" +
         std::to_string(redis_port) + "\", timeout: " + timeout +
         " }\n  key_secret: redis-test-secret-0123456789\n  instances: 2\n" + extra + "routes:\n" +
         routes;
}

}  // namespace floodgate::testing
