// A request whose head floodgate refuses before it could be routed (a header past
// max_header_bytes, a line that is no HTTP) is an exchange like any other, on HTTP/1.1 as on
// HTTP/2: answered with a request id in its header and body, counted among floodgate's own
// answers, and access-logged. The real binary, a real origin, curl for both protocols.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"  // free_port

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

TEST(RefusedHeads, AreAnsweredCountedAndLoggedAlikeOnBothProtocols) {
  Origin origin;
  const auto port = free_port(), admin = free_port();
  const auto yaml = write_temp_file(
      "refused-heads.yaml",
      "server:\n"
      "  listen: [{ address: \"127.0.0.1:" +
          std::to_string(port) +
          "\", protocols: [http1, h2c] }]\n"
          "  threads: 1\n"
          "  max_header_bytes: 4KiB\n"
          "admin: { listen: \"127.0.0.1:" +
          std::to_string(admin) +
          "\" }\n"
          "log: { access_log: true }\n"
          "upstreams:\n  origin: { url: \"" +
          http_url(origin) +
          "\" }\n"
          "routes:\n  - { name: all, match: { path_prefix: / }, upstream: origin }\n");
  ChildProcess fg({floodgate_binary(), std::string("--config"), yaml});
  wait_serving(port);
  const auto url = "http://127.0.0.1:" + std::to_string(port) + "/x";
  const std::string big = " -H 'X-Big: " + std::string(6000, 'a') + "'";
  // Status, the X-Request-Id header, and the body's last line.
  auto curl = [&](const std::string& options) {
    return command_output("curl -s -D - " + options + big + " '" + url + "'", 10);
  };
  for (const auto& options : {std::string("--http1.1"), std::string("--http2-prior-knowledge")}) {
    const auto out = curl(options);
    EXPECT_NE(out.find(" 431"), std::string::npos) << options << ":\n" << out;
    const auto at = out.find("x-request-id: ") != std::string::npos ? out.find("x-request-id: ")
                                                                    : out.find("X-Request-Id: ");
    ASSERT_NE(at, std::string::npos) << options << ":\n" << out;
    const auto id = out.substr(at + 14, 32);
    EXPECT_NE(out.find("request header too large (request id " + id + ")"), std::string::npos)
        << options << ":\n"
        << out;
  }
  // Not HTTP at all: 400, with its id too.
  Client client(port);
  const auto garbage = client.request("GARBAGE\r\n\r\n");
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->result_int(), 400);
  const auto id = garbage->base().find("X-Request-Id");
  ASSERT_NE(id, garbage->base().end());
  EXPECT_EQ(garbage->body(), "bad request (request id " + std::string(id->value()) + ")\n");
  EXPECT_TRUE(client.closed_by_peer(2s));

  // One access line each (the serving check's request first), with the protocol it came on.
  std::vector<std::string> lines;
  ASSERT_TRUE(eventually(
      [&] {
        for (auto l = fg.read_line(100ms); !l.empty(); l = fg.read_line(100ms))
          if (l.find("\"type\":\"access\"") != std::string::npos) lines.push_back(l);
        return lines.size() >= 4;
      },
      5s))
      << lines.size() << " access lines";
  auto logged = [&](const std::string& protocol, int status) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find("\"protocol\":\"" + protocol + "\"") != std::string::npos &&
             l.find("\"status\":" + std::to_string(status)) != std::string::npos;
    });
  };
  EXPECT_EQ(logged("http1", 431), 1);
  EXPECT_EQ(logged("h2", 431), 1);
  EXPECT_EQ(logged("http1", 400), 1);
  // Counted among floodgate's own answers, with no route.
  const auto text =
      command_output("curl -s http://127.0.0.1:" + std::to_string(admin) + "/metrics", 10);
  EXPECT_EQ(metric(text, R"(floodgate_own_responses_total{route="",status="431"})"), 2u);
  EXPECT_EQ(metric(text, R"(floodgate_own_responses_total{route="",status="400"})"), 1u);
  EXPECT_EQ(origin.requests(), 1u) << "only the serving check reached the origin";
}

}  // namespace
}  // namespace floodgate::testing
