// Allow and deny lists through the proxy (issue 20, item 3), with a real origin: a denied
// caller gets 403 and the origin never sees it, an allowed one passes a limit it would break,
// the resolved client (behind a trusted proxy) is what the CIDRs match, HTTP/2 answers the
// same, and the real binary reads its list file again on SIGHUP.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string lists_config(const Origin& origin, const std::string& listen = "[127.0.0.1:0]") {
  return "server:\n  listen: " + listen +
         "\n  threads: 2\n  client_ip: { trusted_proxies: [127.0.0.1/32] }\n"
         "log: { access_log: true }\n"
         "upstreams:\n  origin: { url: \"" +
         http_url(origin) +
         "\" }\n"
         "store: { key_secret: lists-test-secret-0123456789abcdef }\n"
         "lists:\n"
         "  deny: { cidrs: [203.0.113.0/24, \"2001:db8::/32\"], values: { \"header:X-Api-Key\": "
         "[leaked] } }\n"
         "  allow: { cidrs: [10.0.0.0/8] }\n"
         "routes:\n"
         "  - name: api\n    match: { path_prefix: /api }\n    upstream: origin\n"
         "    lists: { allow: { values: { \"header:X-Partner\": [acme] } } }\n"
         "    limits: [{ name: two, algorithm: fixed_window, limit: 2, window: 1h, key: [ip] }]\n"
         "  - name: open\n    match: { path_prefix: / }\n    upstream: origin\n";
}

int status(std::uint16_t port, const std::string& target, const std::string& headers) {
  auto r = get(port, target, headers);
  return r ? r->result_int() : -1;
}

std::string from(const char* ip) {
  return std::string("X-Forwarded-For: ") + ip + "\r\n";
}

TEST(Lists, DenyAnswers403BeforeAnyLimitAndAllowSkipsThem) {
  Origin origin;
  LogCapture log;
  Proxy proxy(lists_config(origin), nullptr, log.logger());
  const auto port = proxy.port();

  // A caller on no list: two requests, then the limit.
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.1")), 200);
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.1")), 200);
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.1")), 429);
  // Denied: by CIDR (v4 and v6, on a route with limits and one without) and by a header
  // value; the answer is floodgate's own, and nothing reaches the origin.
  const auto before = origin.requests();
  auto denied = get(port, "/api/x", from("203.0.113.9"));
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->result_int(), 403);
  EXPECT_EQ(without_request_id(denied->body()), "forbidden\n");
  EXPECT_EQ(status(port, "/page", from("2001:db8::7")), 403);
  EXPECT_EQ(status(port, "/page", from("192.0.2.1") + "X-Api-Key: leaked\r\n"), 403);
  // A deny wins over the allow that also names the caller.
  EXPECT_EQ(status(port, "/api/x", from("203.0.113.9") + "X-Partner: acme\r\n"), 403);
  EXPECT_EQ(origin.requests(), before);
  // Allowed, globally by CIDR or on the route by a header value: past a limit of two.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(status(port, "/api/x", from("10.1.2.3")), 200);
    EXPECT_EQ(status(port, "/api/x", from("192.0.2.77") + "X-Partner: acme\r\n"), 200);
  }
  EXPECT_EQ(origin.requests(), before + 10);
  // The partner's value counts only on its own route's list; without it, the limit applies.
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.77")), 200);
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.77")), 200);
  EXPECT_EQ(status(port, "/api/x", from("192.0.2.77")), 429);

  // Counted by route and outcome, and in the access log.
  const auto text = admin::render_prometheus(proxy.metrics());
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="api",outcome="denied"})"), 2u) << text;
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="open",outcome="denied"})"), 2u);
  EXPECT_EQ(metric(text, R"(floodgate_requests_total{route="api",outcome="allowed"})"), 10u);
  ASSERT_TRUE(log.wait_for(20, 5s));
  // Counted, not looked up by position: two workers write their lines in the order they
  // finish, which is not always the order of the requests.
  const auto lines = log.lines();
  auto count = [&](const char* text) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(text) != std::string::npos; });
  };
  EXPECT_EQ(count(R"("status":403,"decision":"denied")"), 4);
  EXPECT_EQ(count(R"("status":200,"decision":"allowed")"), 10);
}

TEST(Lists, Http2ClientsGetTheSameAnswers) {
  Origin origin;
  Proxy proxy(lists_config(origin, "[{ address: \"127.0.0.1:0\", protocols: [http1, h2c] }]"));
  auto curl = [&](const std::string& ip) {
    return command_output(
        "curl -s --http2-prior-knowledge -o /dev/null -w '%{http_version} "
        "%{http_code}' -H 'X-Forwarded-For: " +
            ip + "' http://127.0.0.1:" + std::to_string(proxy.port()) + "/api/y",
        20);
  };
  EXPECT_EQ(curl("203.0.113.200"), "2 403");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(curl("10.200.0.1"), "2 200");
  EXPECT_EQ(origin.requests(), 4u);
}

TEST(Lists, TheRealBinaryReadsItsListFileAgainOnSighupAndKeepsTheOldOneWhenTheNewIsBad) {
  Origin origin;
  const auto port = free_port();
  const auto list = write_temp_file("lists-deny.txt", "# nobody yet\n");
  const auto yaml = write_temp_file(
      "lists-serve.yaml", "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
                              "]\n  threads: 2\n  client_ip: { trusted_proxies: [127.0.0.1/32] }\n"
                              "upstreams:\n  origin: { url: \"" +
                              http_url(origin) + "\" }\nlists:\n  deny: { file: \"" + list +
                              "\" }\nroutes:\n  - name: all\n    match: { path_prefix: / }\n"
                              "    upstream: origin\n");
  auto fg = start_floodgate(yaml);
  wait_serving(port);
  EXPECT_EQ(status(port, "/a", from("198.51.100.20")), 200);

  // The file gains the caller's network: a reload applies it, nothing else changes.
  write_temp_file("lists-deny.txt", "198.51.100.0/24\n");
  kill(fg->pid(), SIGHUP);
  EXPECT_TRUE(eventually([&] { return status(port, "/a", from("198.51.100.20")) == 403; }, 5s));
  EXPECT_EQ(status(port, "/a", from("198.51.100.21")), 403);
  EXPECT_EQ(status(port, "/a", from("192.0.2.1")), 200);

  // A bad line: the reload is refused, naming the list's file, line and column, and the list
  // that was serving still serves.
  write_temp_file("lists-deny.txt", "192.0.2.0/24\n192.0.2.999\n");
  kill(fg->pid(), SIGHUP);
  std::string log;
  const auto rejected = wait_for_line(*fg, "reload rejected", 5s, log);
  EXPECT_NE(rejected.find(list + ":2:"), std::string::npos) << log;
  EXPECT_NE(wait_for_line(*fg, "the previous config keeps serving", 5s, log), "") << log;
  EXPECT_EQ(status(port, "/a", from("198.51.100.20")), 403);
  EXPECT_EQ(status(port, "/a", from("192.0.2.1")), 200);

  auto code = fg->signal_and_wait(SIGTERM, 5s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace floodgate::testing
