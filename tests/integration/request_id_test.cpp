// X-Request-Id and W3C traceparent (issue 20, item 4), against a real origin that echoes what
// it received: an id is generated (or kept from a trusted proxy, never from anyone else),
// forwarded, put in floodgate's own answers (header and body) and in the access log line; a
// valid traceparent is passed through untouched, a missing one started with the request id as
// its trace-id, a malformed one replaced and its tracestate dropped. HTTP/2 the same.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <regex>

#include "harness.hpp"
#include "proxy_yaml.hpp"

namespace floodgate::testing {
namespace {

namespace json = boost::json;

std::string config(const Origin& origin) {
  return "server:\n  listen: [127.0.0.1:0]\n  threads: 1\n"
         "  client_ip: { trusted_proxies: [10.9.9.9/32] }\n"
         "log: { access_log: true }\n"
         "upstreams:\n  origin: { url: \"" +
         http_url(origin) +
         "\" }\n"
         "store: { key_secret: request-id-test-secret-0123456789 }\n"
         "routes:\n"
         "  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
         "    limits:\n"
         "      - { name: two, algorithm: fixed_window, limit: 2, window: 1h, key: [ip] }\n"
         "      - { name: trial, algorithm: fixed_window, limit: 1, window: 1h, key: [ip], mode: "
         "shadow }\n";
}

// The headers the origin received, from /echo's JSON (names lower-case).
json::object echoed(const Response& r) {
  auto v = json::parse(r.body());
  json::object out;
  for (const auto& pair : v.at("headers").as_array()) {  // [[name, value], ...]
    std::string lower(pair.as_array().at(0).as_string());
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out[lower] = pair.as_array().at(1);
  }
  return out;
}

std::string text(const json::object& o, const char* key) {
  auto it = o.find(key);
  return it == o.end() ? "<absent>" : std::string(it->value().as_string());
}

TEST(RequestId, GeneratedForwardedAnsweredAndLoggedWithTraceContext) {
  Origin origin;
  LogCapture log;
  Proxy proxy(config(origin), nullptr, log.logger());
  static const std::regex hex32("[0-9a-f]{32}");

  // No id, no trace: both started; the trace-id is the request id.
  auto first = get(proxy.port(), "/echo", "User-Agent: probe/1.0\r\n");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->result_int(), 200);
  auto h = echoed(*first);
  const auto id = text(h, "x-request-id");
  EXPECT_TRUE(std::regex_match(id, hex32)) << id;
  EXPECT_TRUE(std::regex_match(text(h, "traceparent"), std::regex("00-" + id + "-[0-9a-f]{16}-01")))
      << text(h, "traceparent");

  // A client's own id is not trusted (it could collide with another's on purpose) ...
  auto spoofed = get(proxy.port(), "/echo", "X-Request-Id: mine-123\r\n");
  ASSERT_TRUE(spoofed);
  EXPECT_NE(text(echoed(*spoofed), "x-request-id"), "mine-123");

  // ... and its valid traceparent and tracestate pass untouched.
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto traced =
      get(proxy.port(), "/echo?x", "traceparent: " + parent + "\r\ntracestate: vendor=1\r\n");
  ASSERT_TRUE(traced);
  EXPECT_EQ(traced->result_int(), 429);  // the limit of two is spent
  // floodgate's own answer carries the id in a header and in its JSON body.
  const auto refusal_id = std::string(traced->base()["X-Request-Id"]);
  EXPECT_TRUE(std::regex_match(refusal_id, hex32));
  EXPECT_NE(traced->body().find("\"request_id\":\"" + refusal_id + "\""), std::string::npos)
      << traced->body();
  EXPECT_EQ(without_request_id(traced->body()).find("request_id"), std::string::npos);

  // The access log names each request by its id, with the client, user agent and the shadow
  // limit that would have refused.
  ASSERT_TRUE(log.wait_for(3, std::chrono::seconds(3)));
  auto lines = log.lines();
  auto line0 = json::parse(lines[0]).as_object();
  EXPECT_EQ(text(line0, "request_id"), id);
  EXPECT_EQ(text(line0, "client"), "127.0.0.1");
  EXPECT_EQ(text(line0, "user_agent"), "probe/1.0");
  EXPECT_FALSE(line0.contains("shadow_limit"));  // the trial's one request
  EXPECT_EQ(line0.at("bytes_in").as_int64(), 0);
  EXPECT_EQ(line0.at("bytes_out").as_int64(), static_cast<std::int64_t>(first->body().size()));
  auto line1 = json::parse(lines[1]).as_object();
  EXPECT_EQ(text(line1, "shadow_limit"), "trial");
  EXPECT_EQ(text(line1, "decision"), "admitted");
  auto line2 = json::parse(lines[2]).as_object();
  EXPECT_EQ(text(line2, "request_id"), refusal_id);
  EXPECT_EQ(line2.at("bytes_out").as_int64(), static_cast<std::int64_t>(traced->body().size()));
}

TEST(RequestId, KeptFromATrustedProxyAndMalformedTraceparentsRestarted) {
  Origin origin;
  // The trusted proxy is 127.0.0.1 here: the test's own connections.
  auto yaml = substitute(config(origin), "10.9.9.9/32", "127.0.0.1/32");
  Proxy proxy(yaml);
  auto kept = get(proxy.port(), "/echo",
                  "X-Request-Id: edge-7f3a.1\r\ntraceparent: 00-zz-bad\r\ntracestate: a=b\r\n");
  ASSERT_TRUE(kept);
  auto h = echoed(*kept);
  EXPECT_EQ(text(h, "x-request-id"), "edge-7f3a.1");
  // Restarted: a new trace-id (not the kept id, which is not 32 hex digits), tracestate gone.
  EXPECT_TRUE(
      std::regex_match(text(h, "traceparent"), std::regex("00-[0-9a-f]{32}-[0-9a-f]{16}-01")))
      << text(h, "traceparent");
  EXPECT_EQ(text(h, "tracestate"), "<absent>");
  // A kept id that is not a sane token is replaced.
  auto odd = get(proxy.port(), "/echo", "X-Request-Id: has space\r\n");
  ASSERT_TRUE(odd);
  EXPECT_NE(text(echoed(*odd), "x-request-id"), "has space");
}

TEST(RequestId, Http2StreamsGetThemToo) {
  Origin origin;
  LogCapture log;
  Proxy proxy("server:\n  listen:\n    - { address: \"127.0.0.1:0\", protocols: [http1, h2c] }\n" +
                  config(origin).substr(config(origin).find("  threads")),
              nullptr, log.logger());
  const auto url = "http://127.0.0.1:" + std::to_string(proxy.port());
  auto out = command_output("curl -s --http2-prior-knowledge -d hello " + url + "/echo", 20);
  auto h = echoed(*[&] {
    Response r;
    r.body() = out;
    return std::optional<Response>(r);
  }());
  EXPECT_TRUE(std::regex_match(text(h, "x-request-id"), std::regex("[0-9a-f]{32}"))) << out;
  // An answer of floodgate's own over HTTP/2: the id in the header and the body.
  command_output("curl -s --http2-prior-knowledge " + url + "/x", 20);
  auto refused =
      command_output("curl -s -D - --http2-prior-knowledge " + url + "/x | tr -d '\\r'", 20);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(refused, m, std::regex("x-request-id: ([0-9a-f]{32})"))) << refused;
  EXPECT_NE(refused.find("\"request_id\":\"" + m[1].str() + "\""), std::string::npos) << refused;
  // Body bytes both ways, over HTTP/2 too.
  ASSERT_TRUE(log.wait_for(3, std::chrono::seconds(3)));
  auto line0 = json::parse(log.lines()[0]).as_object();
  EXPECT_EQ(line0.at("bytes_in").as_int64(), 5);
  EXPECT_EQ(line0.at("bytes_out").as_int64(), static_cast<std::int64_t>(out.size()));
}

}  // namespace
}  // namespace floodgate::testing
