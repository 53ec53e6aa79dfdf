// The client address on the real binary over IPv6 loopback (issue 34 item 3): allow and deny
// lists match the whole address, while `ip` limit keys fold IPv6 to server.client_ip.
// ipv6_prefix, and the access log records the whole address. No skip when ::1 is missing:
// the test then fails, as CI counts a skip as a failure.
#include <gtest/gtest.h>

#include <algorithm>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// A port free on ::1 a moment ago; throws (a test failure) when IPv6 loopback is unavailable.
std::uint16_t free_v6_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("::1"), 0));
  return a.local_endpoint().port();
}

// The routes each hold one list naming (or not) ::1; "limited" keys on ip alone.
std::string ipv6_config(std::uint16_t port, const Origin& origin) {
  const std::string limit =
      "    limits: [{ name: one, algorithm: fixed_window, limit: 1, window: 1h, key: [ip] }]\n";
  auto route = [&](const std::string& name, const std::string& lists) {
    return "  - name: " + name + "\n    match: { path_prefix: /" + name +
           " }\n    upstream: origin\n" + (lists.empty() ? "" : "    lists: " + lists + "\n") +
           limit;
  };
  return "server:\n  listen: [\"[::1]:" + std::to_string(port) +
         "\"]\n  threads: 1\n  client_ip: { trusted_proxies: [\"::1\"], ipv6_prefix: 64 }\n"
         "log: { access_log: true }\n"
         "upstreams:\n  origin: { url: \"" +
         http_url(origin) + "\" }\nroutes:\n" + route("denied", R"({ deny: { cidrs: ["::1"] } })") +
         route("allowed", R"({ allow: { cidrs: ["::1"] } })") +
         route("narrow", R"({ deny: { cidrs: ["::/128"] } })") +
         route("forwarded", R"({ deny: { cidrs: ["2001:db8:1:2::7"] } })") + route("folded", "");
}

// The status of a curl over IPv6 loopback ("000" when nothing answered).
std::string curl_v6(std::uint16_t port, const std::string& path, const std::string& headers = "") {
  return command_output("curl -g -s -o /dev/null -w '%{http_code}' " + headers +
                            " 'http://[::1]:" + std::to_string(port) + path + "'",
                        10);
}

TEST(ClientAddress, ListsMatchTheWholeIpv6AddressWhileKeysFoldItToThePrefix) {
  Origin origin;
  const auto port = free_v6_port();
  const auto yaml = write_temp_file("client-address.yaml", ipv6_config(port, origin));
  ChildProcess fg({FLOODGATE_BINARY, "--config", yaml});
  ASSERT_TRUE(eventually([&] { return curl_v6(port, "/narrow") != "000"; }, 5s))
      << "floodgate did not answer on [::1]:" << port;

  // A deny of the one address refuses it; an allow of it passes a limit of one.
  EXPECT_EQ(curl_v6(port, "/denied"), "403");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(curl_v6(port, "/allowed"), "200") << i;
  // A range of one other address (::, where ::1's /64 begins) is not ::1. The first request
  // above (/narrow, to see it serve) spent the limit of one.
  EXPECT_EQ(curl_v6(port, "/narrow"), "429");

  // Behind a trusted proxy (::1): the forwarded address is matched whole, so its /64
  // neighbour is not denied, while the ip key still counts the /64 as one caller.
  const std::string seven = "-H 'X-Forwarded-For: 2001:db8:1:2::7'";
  const std::string eight = "-H 'X-Forwarded-For: 2001:db8:1:2::8'";
  EXPECT_EQ(curl_v6(port, "/forwarded", seven), "403");
  EXPECT_EQ(curl_v6(port, "/forwarded", eight), "200");
  EXPECT_EQ(curl_v6(port, "/folded", seven), "200");
  EXPECT_EQ(curl_v6(port, "/folded", eight), "429");
  EXPECT_EQ(curl_v6(port, "/folded", "-H 'X-Forwarded-For: 2001:db8:1:3::7'"), "200");

  // The access log (stdout) names the client whole, as the lists saw it.
  std::vector<std::string> lines;
  ASSERT_TRUE(eventually(
      [&] {
        for (auto l = fg.read_line(100ms); !l.empty(); l = fg.read_line(100ms)) lines.push_back(l);
        return lines.size() >= 11;
      },
      5s))
      << lines.size() << " access lines";
  auto logged = [&](const std::string& path, const std::string& client) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find("\"client\":\"" + client + "\"") != std::string::npos &&
             l.find("\"path\":\"" + path + "\"") != std::string::npos;
    });
  };
  EXPECT_TRUE(logged("/denied", "::1"));
  EXPECT_TRUE(logged("/folded", "2001:db8:1:2::8"));
}

}  // namespace
}  // namespace floodgate::testing
