// HTTP/2 at the edge, with real clients: curl (built with nghttp2) and h2load for ordinary
// traffic, python3-h2 (h2_hostile.py) for frames a well-behaved client would not send. Every
// stream goes through the same pipeline as an HTTP/1.1 request: routes, limits, the deny
// cache, the same statuses and headers; bodies stream both ways.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "proxy_yaml.hpp"
#include "test_pki.hpp"

namespace {

using namespace floodgate::testing;
using namespace std::chrono_literals;

std::string output_of(const std::string& command, int seconds = 30) {
  return command_output(command, seconds);
}

std::string url(std::uint16_t port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// "2xx 4xx" counts from h2load's summary.
std::pair<int, int> h2load_statuses(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(status codes: (\d+) 2xx, \d+ 3xx, (\d+) 4xx)")))
    return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

std::string hostile(std::uint16_t port, const std::string& which) {
  return output_of("/usr/bin/python3 " FLOODGATE_SOURCE_DIR "/tests/integration/h2_hostile.py " +
                       std::to_string(port) + " " + which,
                   20);
}

class Http2 : public ::testing::Test {
 protected:
  Origin origin;
  // A plain listener for HTTP/1.1 and HTTP/2 with prior knowledge, two limited routes.
  std::string config(const std::string& server_extra = "") {
    return "server:\n  threads: 1\n  listen:\n    - { address: \"127.0.0.1:0\", protocols: [http1, "
           "h2c] }\n" +
           server_extra + "upstreams:\n  origin: { url: \"" + http_url(origin) +
           "\" }\nroutes:\n"
           "  - name: five\n    match: { path_prefix: /five }\n    upstream: origin\n"
           "    limits: [{ name: five, algorithm: fixed_window, limit: 5, window: 1h, key: [ip] "
           "}]\n"
           "  - name: two-at-once\n    match: { path_prefix: /slow }\n    upstream: origin\n"
           "    limits: [{ name: two, algorithm: concurrency, limit: 2, key: [route] }]\n"
           "  - name: all\n    match: { path_prefix: / }\n    upstream: origin\n";
  }
};

TEST_F(Http2, PriorKnowledgeAndHttp11ShareAPlainListener) {
  Proxy proxy(config());
  const auto fmt = " -o /dev/null -w '%{http_code} %{http_version}' ";
  EXPECT_EQ(
      output_of("curl -s --http2-prior-knowledge" + std::string(fmt) + url(proxy.port(), "/hello")),
      "200 2");
  EXPECT_EQ(output_of("curl -s --http1.1" + std::string(fmt) + url(proxy.port(), "/hello")),
            "200 1.1");
  EXPECT_EQ(origin.requests(), 2u);
}

TEST_F(Http2, BodiesStreamBothWays) {
  Proxy proxy(config());
  auto file = write_temp_file("h2-body", std::string(3'000'000, 'x') + "end");
  // The same bytes reach the origin over HTTP/2 as over HTTP/1.1.
  auto over = [&](const std::string& flag) {
    auto json =
        output_of("curl -s " + flag + " --data-binary @" + file + " " + url(proxy.port(), "/echo"));
    std::smatch m;
    EXPECT_TRUE(
        std::regex_search(json, m, std::regex(R"re("body_bytes":(\d+),"body_fnv":"(\d+)")re")))
        << json.substr(0, 300);
    return m.size() == 3 ? m[1].str() + " " + m[2].str() : json.substr(0, 100);
  };
  auto h2 = over("--http2-prior-knowledge");
  EXPECT_EQ(h2, over("--http1.1"));
  EXPECT_EQ(h2.substr(0, h2.find(' ')), "3000003");
  EXPECT_EQ(output_of("curl -s --http2-prior-knowledge -o /dev/null -w '%{size_download}' " +
                      url(proxy.port(), "/bytes/5000000")),
            "5000000");
  EXPECT_EQ(output_of("curl -s --http2-prior-knowledge -o /dev/null -w '%{size_download}' '" +
                      url(proxy.port(), "/bytes/100000?chunked=1") + "'"),
            "100000");
}

TEST_F(Http2, StreamsAreLimitedLikeRequests) {
  Proxy proxy(config());
  // 50 streams over one connection, 10 at a time: exactly the limit passes.
  auto out = output_of("h2load -n 50 -c 1 -m 10 " + url(proxy.port(), "/five"));
  EXPECT_EQ(h2load_statuses(out), std::make_pair(5, 45)) << out;
  EXPECT_EQ(origin.requests(), 5u);
  // A refusal carries the same headers as over HTTP/1.1, in lower case.
  auto head =
      output_of("curl -s --http2-prior-knowledge -D - -o /dev/null " + url(proxy.port(), "/five"));
  EXPECT_NE(head.find("HTTP/2 429"), std::string::npos) << head;
  EXPECT_NE(head.find("x-ratelimit-limit: 5"), std::string::npos) << head;
  EXPECT_NE(head.find("retry-after: "), std::string::npos) << head;
  EXPECT_NE(head.find("ratelimit-policy: \"five\";q=5;w=3600"), std::string::npos) << head;
}

TEST_F(Http2, AConcurrencyLimitCountsOpenStreams) {
  Proxy proxy(config());
  // Six streams at once, each held 300 ms by the origin: two are served.
  auto out = output_of("h2load -n 6 -c 1 -m 6 " + url(proxy.port(), "/slow/300"));
  EXPECT_EQ(h2load_statuses(out), std::make_pair(2, 4)) << out;
  // Their units came back when the streams ended.
  out = output_of("h2load -n 2 -c 1 -m 2 " + url(proxy.port(), "/slow/10"));
  EXPECT_EQ(h2load_statuses(out), std::make_pair(2, 0)) << out;
}

TEST_F(Http2, ManyStreamsOverFewConnections) {
  Proxy proxy(config());
  auto out = output_of("h2load -n 20000 -c 4 -m 32 " + url(proxy.port(), "/hello"), 60);
  EXPECT_NE(out.find("20000 succeeded, 0 failed, 0 errored"), std::string::npos) << out;
  EXPECT_EQ(h2load_statuses(out), std::make_pair(20000, 0)) << out;
}

// A header list over max_header_bytes gets 431, as over HTTP/1.1, and is not forwarded.
TEST_F(Http2, AnOversizedHeaderListIsAnswered431) {
  Proxy proxy(config());
  const auto big = " -H 'x-big: " + std::string(20'000, 'a') + "' ";
  EXPECT_EQ(output_of("curl -s --http2-prior-knowledge -o /dev/null -w '%{http_code}'" + big +
                      url(proxy.port(), "/hello")),
            "431");
  EXPECT_EQ(origin.requests(), 0u);
}

// The HTTP/2 smuggling matrix (h2_hostile.py `matrix`): what an HTTP/2-to-HTTP/1.1 proxy must
// never turn into an upstream request (RFC 9113 8.1-8.3 and the downgrade attacks: a field or
// pseudo-header that would split, reframe or re-target the HTTP/1.1 request). nghttp2's
// messaging checks reset most with PROTOCOL_ERROR; floodgate answers 400 to a host or
// :authority that is not a valid one, disagrees, repeats, and to CONNECT. Then what is allowed.
TEST_F(Http2, SmugglingMatrix) {
  Proxy proxy(config());
  std::map<std::string, std::string> got;
  std::istringstream lines(hostile(proxy.port(), "matrix"));
  for (std::string line; std::getline(lines, line);) {
    auto colon = line.find(": ");
    if (colon != std::string::npos) got[line.substr(0, colon)] = line.substr(colon + 2);
  }
  // Each case's expected outcome, by name (h2_hostile.py's matrix).
  const std::pair<const char*, const char*> outcomes[] = {
      {"reset PROTOCOL_ERROR",
       "connection keep-alive proxy-connection upgrade transfer-encoding-chunked "
       "transfer-encoding-identity te-gzip te-trailers-and-gzip "
       "upper-case-name space-in-name colon-in-name empty-name crlf-in-value lf-in-value "
       "cr-in-value nul-in-value crlf-in-cookie "
       "missing-method missing-scheme missing-path empty-path duplicate-method duplicate-path "
       "duplicate-authority unknown-pseudo status-in-request pseudo-after-field upper-case-pseudo "
       "space-in-path crlf-in-path space-in-method crlf-in-method space-in-authority "
       "crlf-in-authority path-in-authority host-twice "
       "length-short length-long length-without-data length-not-a-number length-two-values "
       "extended-connect"},
      {"status 400", "userinfo-in-authority port-not-a-number host-invalid host-disagrees connect"},
      {"status 200",
       "ok-te-trailers ok-host-agrees ok-host-only ok-cookie-crumbs ok-post-with-length"},
  };
  std::map<std::string, std::string> expected;
  for (const auto& [outcome, names] : outcomes) {
    std::istringstream in(names);
    for (std::string name; in >> name;) expected[name] = outcome;
  }
  EXPECT_EQ(got.size(), expected.size());
  for (const auto& [name, outcome] : expected) {
    auto it = got.find(name);
    EXPECT_EQ(it == got.end() ? "(not run)" : it->second, outcome) << name;
  }
  // Only the allowed ones reached the origin.
  EXPECT_EQ(origin.requests(), 5u);
  std::cout << "[ h2 smuggling ] " << got.size() << " cases: " << expected.size() - 5
            << " refused (reset or 400), 5 allowed, origin saw " << origin.requests() << "\n";
}

TEST_F(Http2, FloodsEndTheConnection) {
  Proxy proxy(config("  http2: { max_concurrent_streams: 4, max_resets_per_second: 50 }\n"));
  // Rapid reset (CVE-2023-44487): GOAWAY, and the reset streams reach nobody.
  EXPECT_EQ(hostile(proxy.port(), "rapid-reset").rfind("goaway ", 0), 0u);
  // Past max_concurrent_streams, streams are refused, not queued.
  auto streams = hostile(proxy.port(), "too-many-streams");
  EXPECT_EQ(streams, "answered 4 refused 16") << streams;
  EXPECT_LE(origin.requests(), 4u);
  // Empty DATA frames that never end the body (CVE-2019-9518): GOAWAY.
  EXPECT_EQ(hostile(proxy.port(), "empty-data-flood"), "goaway ENHANCE_YOUR_CALM");
}

// A header block that never ends holds nothing past header_read: the connection closes, as an
// HTTP/1.1 connection whose head stalls does.
TEST_F(Http2, AStalledHeaderBlockIsTimedOut) {
  Proxy proxy(config("  timeouts: { header_read: 300ms }\n"));
  auto out = hostile(proxy.port(), "stalled-header-block");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(out, m, std::regex(R"(closed after (\d+) ms)"))) << out;
  EXPECT_GE(std::stoi(m[1]), 250) << out;
  EXPECT_LT(std::stoi(m[1]), 3000) << out;
  EXPECT_EQ(origin.requests(), 0u);
}

// SIGTERM's drain: open streams finish (GOAWAY tells the client to open no more).
TEST_F(Http2, ADrainLetsOpenStreamsFinish) {
  Proxy proxy(config());
  std::string out;
  std::thread client(
      [&] { out = output_of("h2load -n 2 -c 1 -m 2 " + url(proxy.port(), "/slow/400")); });
  std::this_thread::sleep_for(150ms);
  const auto started = std::chrono::steady_clock::now();
  proxy.drain(5s);
  const auto took = std::chrono::steady_clock::now() - started;
  client.join();
  EXPECT_EQ(h2load_statuses(out), std::make_pair(2, 0)) << out;
  EXPECT_LT(took, 2s);  // it waited for the streams, not for the grace
}

TEST(Http2Tls, AlpnNegotiatesH2ByDefault) {
  Origin origin;
  TestPki pki;
  auto cert = pki.issue("shop.test", {"shop.test"});
  Proxy proxy(ProxyYaml{.upstream_url = http_url(origin), .listen = tls_listen({cert})}.text());
  const std::string base =
      "curl -s --cacert " + pki.ca_file() + " --resolve shop.test:" + std::to_string(proxy.port()) +
      ":127.0.0.1 -o /dev/null -w " +
      "'%{http_code} %{http_version}' https://shop.test:" + std::to_string(proxy.port()) + "/hello";
  EXPECT_EQ(output_of(base + " --http2"), "200 2");
  EXPECT_EQ(output_of(base + " --http1.1"), "200 1.1");
}

}  // namespace
