// The access log line: "ts" on every line, and with log.replay_fields the request inputs a
// replay needs ("fields"), hashed where asked, absent ones left out; and the replay reads
// back what the proxy wrote.

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <boost/json.hpp>

#include <regex>
#include <string>
#include <vector>

#include "../support/base64url.hpp"
#include "exchange/access_log.hpp"
#include "exchange/pipeline.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/limit/utc_time.hpp"
#include "h1/http1_head.hpp"
#include "replay/log_record.hpp"

namespace {

using namespace floodgate;

const std::string kJwtSecret = "access-log-jwt-secret-0123456789";

config::ConfigPtr load(const std::string& log_section) {
  const std::string yaml =
      "server:\n  listen: 127.0.0.1:8080\n"
      "  client_ip: { header: X-Forwarded-For, trusted_proxies: [127.0.0.1/32] }\n"
      "log:\n" +
      log_section +
      "upstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n"
      "store: { key_secret: access-log-secret }\n"
      "jwt:\n  algorithms: [HS256]\n  hs256_secret: " +
      kJwtSecret +
      "\nroutes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
      "    limits: [{ name: per-key, algorithm: fixed_window, limit: 10, window: 1m, key: [ip] "
      "}]\n";
  auto r = config::load_config_text(yaml, "test.yaml", config::process_env());
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  return r.config;
}

std::string hs256_token(const std::string& payload) {
  using floodgate::testing::base64url;
  std::string input = base64url(R"({"alg":"HS256","typ":"JWT"})") + "." + base64url(payload);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), kJwtSecret.data(), static_cast<int>(kJwtSecret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &len);
  return input + "." + base64url(std::string(reinterpret_cast<char*>(mac), len));
}

// 2026-11-30T05:10:50.123456Z
const limit::Micros kArrived = limit::micros_of(2026, 11, 30, 5, 10, 50) + 123'456;

struct Logged {
  std::string text;
  boost::json::object json;
};

// The line of a request that a limit refused, as the session would log it: the exchange is
// built by the real pipeline step (route_exchange) from the request's head.
Logged line_for(const config::ConfigPtr& c, const http::RequestHead& req,
                const std::vector<std::pair<std::string, std::string>>& settled = {},
                const std::string& secret = "access-log-secret") {
  keys::KeyHasher hasher(secret);
  http::Exchange x;
  x.config = c;
  x.arrived = kArrived;
  http::take_http1_head(x, req, true);
  x.peer_ip = "127.0.0.1";
  x.peer = *config::parse_ip("127.0.0.1");
  http::route_exchange(x);
  x.status = 429;
  x.admission.decision = "limited";
  x.admission.limit = "per-key";
  x.admission.key = "rl:api";
  x.settled = settled;
  Logged out;
  out.text = http::access_line(x, std::chrono::microseconds(1500), hasher);
  out.json = boost::json::parse(out.text).as_object();
  return out;
}

http::RequestHead request(const std::string& target) {
  http::RequestHead req;
  req.set_method("GET");
  req.set_target(target);
  req.fields.set("Host", "API.example:8443");
  req.fields.set("X-Forwarded-For", "203.0.113.9");
  return req;
}

TEST(AccessLog, EveryLineHasAnRfc3339TimestampWithMicroseconds) {
  auto c = load("  access_log: true\n");
  ASSERT_TRUE(c);
  auto l = line_for(c, request("/a/b?x=1"));
  ASSERT_TRUE(l.json.contains("ts")) << l.text;
  const std::string ts(l.json.at("ts").as_string());
  EXPECT_EQ(ts, "2026-11-30T05:10:50.123456Z");
  EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")));
  limit::Micros back = 0;
  ASSERT_TRUE(limit::parse_utc(ts, back));
  EXPECT_EQ(back, kArrived);
  EXPECT_EQ(l.json.at("path").as_string(), "/a/b");  // no query: it may hold secrets
  EXPECT_EQ(l.json.at("decision").as_string(), "limited");
  EXPECT_EQ(l.json.at("status").as_int64(), 429);
  // Without replay fields, no inputs beyond the socket peer, the client it names (issue 20
  // item 4: the resolved client), the user agent and the request id.
  EXPECT_FALSE(l.json.contains("fields")) << l.text;
  EXPECT_FALSE(l.json.contains("settle")) << l.text;
  EXPECT_EQ(l.json.at("client").as_string(), "203.0.113.9");
  EXPECT_TRUE(l.json.contains("user_agent"));
  EXPECT_TRUE(l.json.contains("request_id"));
}

TEST(AccessLog, ReplayFieldsRecordTheListedInputs) {
  auto c = load(
      "  access_log: true\n"
      "  replay_fields: [ip, host, \"header:X-Api-Key\", \"header:X-Absent\", \"query:k\", "
      "\"query:absent\", \"jwt:tenant\", \"jwt:absent\"]\n");
  ASSERT_TRUE(c);
  auto req = request("/a?z=2&k=v%201&k=second");
  req.fields.set("X-Api-Key", "key-1");
  req.fields.set("Authorization",
                 "Bearer " + hs256_token(R"({"sub":"u1","tenant":"acme","exp":4102444800})"));
  auto l = line_for(c, req);
  ASSERT_TRUE(l.json.contains("fields")) << l.text;
  const auto& f = l.json.at("fields").as_object();
  EXPECT_EQ(f.at("ip").as_string(), "203.0.113.9");  // the client, through a trusted proxy
  EXPECT_EQ(f.at("host").as_string(), "API.example");
  EXPECT_EQ(f.at("header:x-api-key").as_string(), "key-1");
  EXPECT_EQ(f.at("query:k").as_string(), "v%201");  // raw, the first occurrence
  EXPECT_EQ(f.at("jwt:tenant").as_string(), "acme");
  // What the request does not have is left out, not logged empty.
  EXPECT_EQ(f.size(), 5u) << l.text;
  EXPECT_FALSE(f.contains("header:x-absent"));
  EXPECT_FALSE(f.contains("query:absent"));
  EXPECT_FALSE(f.contains("jwt:absent"));
  EXPECT_FALSE(l.json.contains("settle"));
}

TEST(AccessLog, HashedFieldsAreKeyedHashes) {
  auto c = load(
      "  access_log: true\n  replay_fields: [ip, \"header:X-Api-Key\", host]\n"
      "  replay_hashed: [ip, \"header:x-api-key\"]\n");
  ASSERT_TRUE(c);
  static const std::regex hash(R"(#[0-9a-f]{32})");
  auto fields_of = [&](const std::string& ip, const std::string& key,
                       const std::string& secret = "access-log-secret") {
    auto req = request("/");
    req.fields.set("X-Forwarded-For", ip);
    req.fields.set("X-Api-Key", key);
    auto l = line_for(c, req, {}, secret);
    EXPECT_EQ(l.text.find(key), std::string::npos) << l.text;
    EXPECT_EQ(l.text.find(ip), std::string::npos) << l.text;
    return l.json.at("fields").as_object();
  };
  auto a = fields_of("203.0.113.9", "key-1");
  for (const char* name : {"ip", "header:x-api-key"})
    EXPECT_TRUE(std::regex_match(std::string(a.at(name).as_string()), hash)) << a;
  EXPECT_EQ(a.at("host").as_string(), "API.example");  // not hashed
  // The same input, the same hash; another input, another; another secret, another.
  EXPECT_EQ(fields_of("203.0.113.9", "key-1"), a);
  auto b = fields_of("203.0.113.10", "key-2");
  EXPECT_NE(b.at("ip"), a.at("ip"));
  EXPECT_NE(b.at("header:x-api-key"), a.at("header:x-api-key"));
  auto other_secret = fields_of("203.0.113.9", "key-1", "another-secret");
  EXPECT_NE(other_secret.at("ip"), a.at("ip"));
  // The field name is part of the hashed material: one value under two names differs.
  auto same_value = fields_of("203.0.113.9", "203.0.113.9");
  EXPECT_NE(same_value.at("ip"), same_value.at("header:x-api-key"));
}

// Issue 34 item 3: "client" is the address the lists matched, whole; hashed, it is the /64
// the keys counted (a hash cannot be folded afterwards), so a replay keys as the proxy did.
TEST(AccessLog, AnIpv6ClientIsLoggedWholeAndHashedByItsPrefix) {
  auto logged = [](const config::ConfigPtr& c, const std::string& ip) {
    auto req = request("/");
    req.fields.set("X-Forwarded-For", ip);
    auto l = line_for(c, req);
    EXPECT_EQ(l.json.at("fields").at("ip"), l.json.at("client")) << l.text;
    return std::string(l.json.at("client").as_string());
  };
  auto clear = load("  access_log: true\n  replay_fields: [ip]\n");
  ASSERT_TRUE(clear);
  EXPECT_EQ(logged(clear, "2001:db8:1:2::7"), "2001:db8:1:2::7");
  EXPECT_EQ(logged(clear, "::1"), "::1");
  auto hashed = load("  access_log: true\n  replay_fields: [ip]\n  replay_hashed: [ip]\n");
  ASSERT_TRUE(hashed);
  EXPECT_EQ(logged(hashed, "2001:db8:1:2::7"), logged(hashed, "2001:db8:1:2::8"));
  EXPECT_NE(logged(hashed, "2001:db8:1:2::7"), logged(hashed, "2001:db8:1:3::7"));
  EXPECT_NE(logged(hashed, "203.0.113.9"), logged(hashed, "203.0.113.10"));
}

TEST(AccessLog, SettleHeadersAreRecordedWithReplayFields) {
  auto c = load("  access_log: true\n  replay_fields: [ip]\n");
  ASSERT_TRUE(c);
  auto l = line_for(c, request("/"), {{"x-tokens-used", "42"}});
  ASSERT_TRUE(l.json.contains("settle")) << l.text;
  EXPECT_EQ(l.json.at("settle").as_object().at("x-tokens-used").as_string(), "42");
}

TEST(AccessLog, ValuesAreJsonEscaped) {
  auto c = load("  access_log: true\n  replay_fields: [\"header:X-Api-Key\"]\n");
  ASSERT_TRUE(c);
  auto req = request("/p\"a\\th");
  req.fields.set("X-Api-Key", "quote\" back\\slash \x01");
  auto l = line_for(c, req);
  EXPECT_EQ(l.json.at("path").as_string(), "/p\"a\\th");
  EXPECT_EQ(l.json.at("fields").at("header:x-api-key").as_string(), "quote\" back\\slash \x01");
}

// What the proxy writes, the replay reads: the same time, method, path and inputs.
TEST(AccessLog, ReplayReadsBackWhatTheProxyWrote) {
  auto c = load(
      "  access_log: true\n"
      "  replay_fields: [ip, host, \"header:X-Api-Key\", \"query:k\", \"jwt:tenant\"]\n"
      "  replay_hashed: [\"jwt:tenant\"]\n");
  ASSERT_TRUE(c);
  auto req = request("/items/7?k=abc");
  req.set_method("POST");
  req.fields.set("X-Api-Key", "key \"1\"");
  req.fields.set("Authorization", "Bearer " + hs256_token(R"({"tenant":"acme","exp":4102444800})"));
  auto l = line_for(c, req, {{"x-tokens-used", "42"}});

  replay::LogRecord r;
  std::string scratch;
  auto result = replay::parse_access_json(l.text, r, scratch);
  ASSERT_EQ(result.kind, replay::LineKind::request) << result.why << "\n" << l.text;
  EXPECT_EQ(r.at, kArrived);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/items/7");
  EXPECT_EQ(r.client, "203.0.113.9");
  EXPECT_EQ(r.host, "API.example");
  EXPECT_EQ(r.peer, "127.0.0.1");
  EXPECT_EQ(r.status, 429);
  EXPECT_TRUE(r.live_refused);
  EXPECT_TRUE(r.has_fields);
  EXPECT_EQ(r.duration_us, 1500);
  std::map<std::string, std::string> fields;
  for (const auto& [k, v] : r.fields) fields[std::string(k)] = std::string(v);
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields["header:x-api-key"], "key \"1\"");
  EXPECT_EQ(fields["query:k"], "abc");
  EXPECT_TRUE(std::regex_match(fields["jwt:tenant"], std::regex("#[0-9a-f]{32}")));
  ASSERT_EQ(r.settle.size(), 1u);
  EXPECT_EQ(r.settle[0].first, "x-tokens-used");
  EXPECT_EQ(r.settle[0].second, "42");
}

}  // namespace
