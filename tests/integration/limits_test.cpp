// Limits through the proxy with a real origin: what the client is told, what the origin
// sees, and who shares a bucket with whom.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <future>
#include <thread>

#include "floodgate_process.hpp"  // write_temp_file
#include "harness.hpp"
#include "redis_server.hpp"  // free_port

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::string config_with(const Origin& origin, const std::string& routes,
                        const std::string& extra = "") {
  return substitute(R"(
server:
  listen: [127.0.0.1:0]
  threads: 2
  client_ip: { trusted_proxies: [127.0.0.1/32] }
upstreams:
  origin: { url: "http://{ORIGIN}" }
store: { key_secret: integration-test-secret-0123456789 }
)" + extra + "routes:\n" +
                        routes,
                    "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port()));
}

std::string header(const Response& r, const char* name) {
  return std::string((*r.base().find(name)).value());
}
bool has_header(const Response& r, const char* name) {
  return r.base().find(name) != r.base().end();
}

std::optional<Response> send(std::uint16_t port, const std::string& target,
                             const std::string& headers = "") {
  return get(port, target, headers);
}

TEST(Limits, TokenBucketBurstIsLimitedWithHonestHeaders) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: burst, algorithm: token_bucket, capacity: 5, refill_rate: 1/m, key: [ip] }
)"));
  for (int i = 0; i < 5; ++i) {
    auto r = send(proxy.port(), "/x");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->result_int(), 200);
    EXPECT_EQ(header(*r, "X-RateLimit-Limit"), "5");
    EXPECT_EQ(header(*r, "X-RateLimit-Remaining"), std::to_string(4 - i));
    EXPECT_EQ(header(*r, "RateLimit-Policy"), "\"burst\";q=5;w=300");
    EXPECT_EQ(header(*r, "RateLimit"),
              "\"burst\";r=" + std::to_string(4 - i) + ";t=" + std::to_string(60 * (i + 1)));
    auto reset = std::stoll(header(*r, "X-RateLimit-Reset"));
    auto expect = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count() +
                  60 * (i + 1);
    EXPECT_NEAR(static_cast<double>(reset), static_cast<double>(expect), 2.0);
  }
  for (int i = 0; i < 5; ++i) {
    auto r = send(proxy.port(), "/x");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->result_int(), 429);
    auto retry = std::stoll(header(*r, "Retry-After"));
    EXPECT_GE(retry, 59);
    EXPECT_LE(retry, 60);
    EXPECT_EQ(header(*r, "X-RateLimit-Remaining"), "0");
    EXPECT_EQ(header(*r, "Content-Type"), "application/json");
    EXPECT_EQ(without_request_id(r->body()),
              "{\"error\":\"rate_limited\",\"limit\":\"burst\",\"retry_after\":" +
                  std::to_string(retry) + "}\n");
    EXPECT_EQ(header(*r, "RateLimit"), "\"burst\";r=0;t=" + std::to_string(retry));
  }
  EXPECT_EQ(origin.requests(), 5u);  // refused requests never reached it
}

TEST(Limits, SlidingWindowDoesNotLetTwiceTheLimitThroughAtTheBoundary) {
  Origin origin;
  limit::FakeClock clock;
  const limit::Micros minute = 60 * limit::kMicrosPerSecond;
  clock.set((1'800'000'000 / 60) * minute + 59 * limit::kMicrosPerSecond);  // hh:mm:59
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: minute, algorithm: sliding_window, limit: 100, window: 60s, key: [ip] }
)"),
              &clock);
  int admitted_first = 0, admitted_second = 0;
  Client c(proxy.port());
  for (int i = 0; i < 100; ++i)
    admitted_first += c.request("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")->result_int() == 200;
  clock.advance(2 * limit::kMicrosPerSecond);  // hh:(mm+1):01
  for (int i = 0; i < 100; ++i)
    admitted_second += c.request("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")->result_int() == 200;
  EXPECT_EQ(admitted_first, 100);
  // 100 * (59/60) = 98.3 of the previous window still counts: one more fits, not 100.
  EXPECT_EQ(admitted_second, 1);
  EXPECT_EQ(origin.requests(), 101u);
}

TEST(Limits, ForwardedForIsBelievedOnlyFromTrustedProxies) {
  Origin origin;
  const std::string routes = R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: per-ip, algorithm: fixed_window, limit: 1, window: 1h, key: [ip] }
)";
  {
    Proxy proxy(config_with(origin, routes));  // 127.0.0.1 is trusted: XFF names the client
    EXPECT_EQ(send(proxy.port(), "/", "X-Forwarded-For: 198.51.100.1\r\n")->result_int(), 200);
    EXPECT_EQ(send(proxy.port(), "/", "X-Forwarded-For: 198.51.100.2\r\n")->result_int(), 200);
    EXPECT_EQ(send(proxy.port(), "/", "X-Forwarded-For: 198.51.100.1\r\n")->result_int(), 429);
    // A client prepending a spoofed address is still keyed on what the trusted hop saw.
    EXPECT_EQ(
        send(proxy.port(), "/", "X-Forwarded-For: 203.0.113.7, 198.51.100.2\r\n")->result_int(),
        429);
  }
  {
    auto untrusted = substitute(config_with(origin, routes), "trusted_proxies: [127.0.0.1/32]",
                                "trusted_proxies: [10.0.0.0/8]");
    Proxy proxy(untrusted);  // the peer is not trusted: XFF is ignored, all share 127.0.0.1
    EXPECT_EQ(send(proxy.port(), "/", "X-Forwarded-For: 198.51.100.1\r\n")->result_int(), 200);
    EXPECT_EQ(send(proxy.port(), "/", "X-Forwarded-For: 198.51.100.2\r\n")->result_int(), 429);
  }
}

TEST(Limits, RefusedRequestChargesNoOtherLimit) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: per-user, algorithm: token_bucket, capacity: 2, refill_rate: 1/h, key: ["header:X-User"] }
      - { name: per-ip, algorithm: fixed_window, limit: 3, window: 1h, key: [ip] }
)"));
  EXPECT_EQ(send(proxy.port(), "/", "X-User: a\r\n")->result_int(), 200);
  EXPECT_EQ(send(proxy.port(), "/", "X-User: a\r\n")->result_int(), 200);
  auto refused = send(proxy.port(), "/", "X-User: a\r\n");  // per-user refuses: per-ip must not pay
  EXPECT_EQ(refused->result_int(), 429);
  EXPECT_NE(refused->body().find("\"limit\":\"per-user\""), std::string::npos);
  auto third = send(proxy.port(), "/", "X-User: b\r\n");
  EXPECT_EQ(third->result_int(), 200);  // per-ip's third unit
  EXPECT_EQ(header(*third, "RateLimit").rfind("\"per-ip\";r=0;t=", 0), 0u)
      << header(*third, "RateLimit");
  auto fourth = send(proxy.port(), "/", "X-User: c\r\n");
  EXPECT_EQ(fourth->result_int(), 429);
  EXPECT_NE(fourth->body().find("\"limit\":\"per-ip\""), std::string::npos);
  EXPECT_EQ(origin.requests(), 3u);
}

TEST(Limits, CostComesFromAHeaderWithDefaultMaxAndValidation) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: llm
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: tokens
        algorithm: token_bucket
        capacity: 10
        refill_rate: 1/h
        key: [ip]
        cost: { from: "header:X-Cost", default: 2, max: 8 }
)"));
  auto r1 = send(proxy.port(), "/", "X-Cost: 7\r\n");
  EXPECT_EQ(r1->result_int(), 200);
  EXPECT_EQ(header(*r1, "X-RateLimit-Remaining"), "3");
  EXPECT_EQ(send(proxy.port(), "/", "X-Cost: 5\r\n")->result_int(), 429);
  EXPECT_EQ(send(proxy.port(), "/", "X-Cost: -1\r\n")->result_int(), 400);
  EXPECT_EQ(send(proxy.port(), "/", "X-Cost: 1.5\r\n")->result_int(), 400);
  auto dflt = send(proxy.port(), "/");  // absent: the default, 2
  EXPECT_EQ(dflt->result_int(), 200);
  EXPECT_EQ(header(*dflt, "X-RateLimit-Remaining"), "1");
  auto zero = send(proxy.port(), "/", "X-Cost: 0\r\n");
  EXPECT_EQ(zero->result_int(), 200);
  EXPECT_EQ(origin.requests(), 2u + 1u);
}

TEST(Limits, OnMissingKeyRejectsSkipsOrShares) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: reject
    match: { path_prefix: /reject }
    upstream: origin
    limits:
      - { name: k, algorithm: fixed_window, limit: 5, window: 1h, key: ["header:X-Key"] }
  - name: skip
    match: { path_prefix: /skip }
    upstream: origin
    limits:
      - { name: k, algorithm: fixed_window, limit: 1, window: 1h, key: ["query:key"], on_missing_key: skip }
  - name: shared
    match: { path_prefix: /shared }
    upstream: origin
    limits:
      - { name: k, algorithm: fixed_window, limit: 2, window: 1h, key: ["header:X-Key"], on_missing_key: shared }
)"));
  auto rejected = send(proxy.port(), "/reject");
  EXPECT_EQ(rejected->result_int(), 401);
  EXPECT_EQ(send(proxy.port(), "/reject", "X-Key: a\r\n")->result_int(), 200);
  for (int i = 0; i < 3; ++i) {
    auto r = send(proxy.port(), "/skip");
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_FALSE(has_header(*r, "X-RateLimit-Limit"));
  }
  EXPECT_EQ(send(proxy.port(), "/skip?key=z")->result_int(), 200);
  EXPECT_EQ(send(proxy.port(), "/skip?key=z")->result_int(), 429);
  EXPECT_EQ(send(proxy.port(), "/shared")->result_int(), 200);
  EXPECT_EQ(send(proxy.port(), "/shared")->result_int(), 200);
  EXPECT_EQ(send(proxy.port(), "/shared")->result_int(),
            429);  // every anonymous caller: one bucket
  EXPECT_EQ(send(proxy.port(), "/shared", "X-Key: own\r\n")->result_int(), 200);
}

std::string b64url(const unsigned char* data, std::size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(static_cast<std::size_t>(len));
  for (auto& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!out.empty() && out.back() == '=') out.pop_back();
  return out;
}

std::string hs256(const std::string& payload, const std::string& secret) {
  std::string header = R"({"alg":"HS256","typ":"JWT"})";
  std::string signing =
      b64url(reinterpret_cast<const unsigned char*>(header.data()), header.size()) + "." +
      b64url(reinterpret_cast<const unsigned char*>(payload.data()), payload.size());
  unsigned char mac[32];
  unsigned len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(signing.data()), signing.size(), mac, &len);
  return signing + "." + b64url(mac, len);
}

TEST(Limits, VerifiedJwtTenantsWithTiers) {
  Origin origin;
  LogCapture log;
  log.logger()->set_level(spdlog::level::debug);
  Proxy proxy(
      config_with(origin, R"(
  - name: partners
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: tenant
        algorithm: fixed_window
        limit: 3
        window: 1h
        key: [jwt:tenant]
        overrides: { by: jwt:tier, values: { gold: { limit: 5 }, free: { limit: 1 } } }
)",
                  "jwt: { algorithms: [HS256], hs256_secret: jwt-test-secret, audience: api }\n"),
      nullptr, nullptr, log.logger());
  auto exp = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count() +
                            600);
  auto token = [&](const std::string& tenant, const std::string& tier,
                   const std::string& secret = "jwt-test-secret", const std::string& aud = "api") {
    return "Authorization: Bearer " +
           hs256(R"({"tenant":")" + tenant + R"(","tier":")" + tier + R"(","aud":")" + aud +
                     R"(","exp":)" + exp + "}",
                 secret) +
           "\r\n";
  };
  auto count_ok = [&](const std::string& auth, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += send(proxy.port(), "/", auth)->result_int() == 200;
    return ok;
  };
  EXPECT_EQ(count_ok(token("acme", "gold"), 8), 5);
  EXPECT_EQ(count_ok(token("tiny", "free"), 3), 1);
  EXPECT_EQ(count_ok(token("plain", "unknown-tier"), 5), 3);  // base limit
  EXPECT_EQ(send(proxy.port(), "/", token("evil", "gold", "wrong-secret"))->result_int(), 401);
  EXPECT_EQ(
      send(proxy.port(), "/", token("evil", "gold", "jwt-test-secret", "other-aud"))->result_int(),
      401);
  EXPECT_EQ(send(proxy.port(), "/")->result_int(), 401);  // no token
  EXPECT_EQ(origin.requests(), 9u);
  // Why each 401, at debug level.
  std::string all;
  for (const auto& l : log.lines()) all += l + "\n";
  for (const char* why : {"JWT bad_signature", "JWT wrong_audience", "JWT missing"})
    EXPECT_NE(all.find("limit tenant rejected the request (401): " + std::string(why)),
              std::string::npos)
        << why << "\n"
        << all;
}

TEST(Limits, ShadowLimitsNeverRefuseNorShowInHeaders) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: trial, algorithm: token_bucket, capacity: 1, refill_rate: 1/h, key: [ip], mode: shadow }
      - { name: real, algorithm: token_bucket, capacity: 100, refill_rate: 1/h, key: [ip] }
)"));
  for (int i = 0; i < 5; ++i) {
    auto r = send(proxy.port(), "/");
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_EQ(header(*r, "RateLimit-Policy").rfind("\"real\"", 0), 0u);
  }
  EXPECT_EQ(origin.requests(), 5u);
}

TEST(Limits, ConcurrencyLeasesAreReleasedWhenTheResponseEnds) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: inflight, algorithm: concurrency, limit: 1, key: [ip] }
)"));
  auto slow = std::async(std::launch::async, [&] { return send(proxy.port(), "/slow/600"); });
  std::this_thread::sleep_for(200ms);
  auto second = send(proxy.port(), "/fast");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->result_int(), 429);
  EXPECT_EQ(header(*second, "Retry-After"), "1");
  EXPECT_EQ(slow.get()->result_int(), 200);
  // A lease returns just after the last byte of its response is written, so the client can be
  // a hair faster than the release: allow it a moment.
  auto eventually_admitted = [&](const std::string& target) {
    int status = 0;
    for (int i = 0; i < 50 && status != 200; ++i) {
      if (i) std::this_thread::sleep_for(10ms);
      status = send(proxy.port(), target)->result_int();
    }
    return status == 200;
  };
  EXPECT_TRUE(eventually_admitted("/after"));   // the slow request's lease came back
  EXPECT_TRUE(eventually_admitted("/after2"));  // and so did that one's
}

TEST(Limits, SettlementChargesTheTrueCostAfterTheResponse) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: llm
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: tokens
        algorithm: token_bucket
        capacity: 100
        refill_rate: 1/h
        key: [ip]
        cost: 10
        settle: response_header:X-Tokens-Used
)"));
  auto first = send(proxy.port(), "/respond?X-Tokens-Used=50");
  EXPECT_EQ(header(*first, "X-RateLimit-Remaining"), "90");          // charged 10 up front
  auto second = send(proxy.port(), "/respond?X-Tokens-Used=bogus");  // invalid: changes nothing
  EXPECT_EQ(header(*second, "X-RateLimit-Remaining"), "40");         // 100 - 50 (settled) - 10
  auto third = send(proxy.port(), "/respond?X-Tokens-Used=0");       // 40 - 10, then 10 refunded
  EXPECT_EQ(header(*third, "X-RateLimit-Remaining"), "30");
  auto fourth = send(proxy.port(), "/x");
  EXPECT_EQ(header(*fourth, "X-RateLimit-Remaining"), "30");  // 40 - 10
}

// Brute-force protection that does not punish successful logins: `count: {status: [401]}`
// checks every request but keeps the charge only for a 401. Over HTTP/1.1 and HTTP/2 (curl).
TEST(Limits, ACountingLimitChargesOnlyTheStatusesItCounts) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: login
    match: { path_prefix: / }
    upstream: origin
    limits:
      - name: failed-logins
        algorithm: sliding_window
        limit: 3
        window: 1h
        key: [ip]
        count: { status: [401, 403] }
)"));
  const std::string ok = "/respond?__status=200", denied = "/respond?__status=401";
  auto from = [](const std::string& ip) { return "X-Forwarded-For: " + ip + "\r\n"; };

  // Twenty good logins cost nothing: each is checked and passes. Its header counts its own
  // unit, given back when the response has been sent: on one keep-alive connection, before
  // the next request is read, so each sees the whole 3 less its own.
  Client keep_alive(proxy.port());
  for (int i = 0; i < 20; ++i) {
    auto r = keep_alive.request("GET " + ok + " HTTP/1.1\r\nHost: t\r\n" + from("198.51.100.1") +
                                "\r\n");
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->result_int(), 200) << i;
    EXPECT_EQ(header(*r, "X-RateLimit-Remaining"), "2") << i;
  }
  // Three failed ones are charged; the fourth attempt of any kind is refused before it
  // reaches the origin.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(send(proxy.port(), denied, from("198.51.100.2"))->result_int(), 401) << i;
  EXPECT_EQ(send(proxy.port(), ok, from("198.51.100.2"))->result_int(), 429);
  EXPECT_EQ(send(proxy.port(), denied, from("198.51.100.2"))->result_int(), 429);
  EXPECT_EQ(origin.requests(), 23u);
  // The caller with twenty good logins still has its three failures to spend.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(send(proxy.port(), denied, from("198.51.100.1"))->result_int(), 401) << i;
  EXPECT_EQ(send(proxy.port(), ok, from("198.51.100.1"))->result_int(), 429);
}

// A request holds its unit while the origin thinks, and no longer: the refusal it causes is
// not remembered (the next request, once the answer is a 200, passes at once).
TEST(Limits, ACountingLimitHoldsAUnitOnlyUntilTheStatusIsKnown) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: login
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: failed, algorithm: fixed_window, limit: 1, window: 1h, key: [ip], count: { status: [401] } }
)"));
  auto slow = std::async(std::launch::async, [&] { return send(proxy.port(), "/slow/600"); });
  std::this_thread::sleep_for(150ms);  // decided, and waiting for its origin
  bool held = false;                   // the slow request's unit, while its origin takes 600 ms
  for (int i = 0; i < 100 && !held; ++i) {
    held = send(proxy.port(), "/x")->result_int() == 429;
    if (!held) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(held);
  EXPECT_EQ(slow.get()->result_int(), 200);
  // Given back with the 200: admitted again at once, twice (no refusal was cached).
  EXPECT_EQ(send(proxy.port(), "/y")->result_int(), 200);
  EXPECT_EQ(send(proxy.port(), "/z")->result_int(), 200);
}

TEST(Limits, ACountingLimitCountsHttp2StreamsAndOwnAnswersByTheStatusSent) {
  Origin origin;
  // Upstream `gone` is a closed port: floodgate answers 502 itself, and that is the status a
  // counting limit sees.
  auto yaml = substitute(R"(
server:
  listen: [{ address: "127.0.0.1:0", protocols: [http1, h2c] }]
  threads: 2
  client_ip: { trusted_proxies: [127.0.0.1/32] }
upstreams:
  origin: { url: "http://{ORIGIN}" }
  gone: { url: "http://{GONE}" }
store: { key_secret: integration-test-secret-0123456789 }
routes:
  - name: gone
    match: { path_prefix: /gone }
    upstream: gone
    limits:
      - { name: errors, algorithm: fixed_window, limit: 2, window: 1h, key: [ip], count: { status: [5xx] } }
  - name: login
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: failed, algorithm: token_bucket, capacity: 2, refill_rate: 1/h, key: [ip], count: { status: ["400-403"] } }
)",
                         "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port()));
  Proxy proxy(substitute(yaml, "{GONE}", "127.0.0.1:" + std::to_string(free_port())));
  auto curl = [&](const std::string& target) {
    return command_output(
        "curl -s --http2-prior-knowledge -o /dev/null -w '%{http_version} "
        "%{http_code}' -H 'X-Forwarded-For: 192.0.2.7' http://127.0.0.1:" +
            std::to_string(proxy.port()) + target,
        20);
  };
  for (int i = 0; i < 5; ++i) EXPECT_EQ(curl("/respond?__status=200"), "2 200") << i;
  EXPECT_EQ(curl("/respond?__status=404"), "2 404");  // not in 400-403
  EXPECT_EQ(curl("/respond?__status=403"), "2 403");
  EXPECT_EQ(curl("/respond?__status=400"), "2 400");
  EXPECT_EQ(curl("/respond?__status=200"), "2 429");
  EXPECT_EQ(origin.requests(), 8u);

  EXPECT_EQ(curl("/gone/1"), "2 502");
  EXPECT_EQ(curl("/gone/2"), "2 502");
  EXPECT_EQ(curl("/gone/3"), "2 429");
}

// Branded refusals: the config's `refusal:` for every route without its own, a route's own
// page from a file, over HTTP/1.1 and HTTP/2; the rate-limit headers stay.
TEST(Limits, RefusalPagesReplaceTheBuiltInJson) {
  Origin origin;
  const auto page = write_temp_file("refusal.html",
                                    "<h1>Slow down</h1><p>{limit}: back in {retry_after} s</p>\n");
  auto yaml = substitute(R"(
server:
  listen: [{ address: "127.0.0.1:0", protocols: [http1, h2c] }]
  threads: 2
upstreams:
  origin: { url: "http://{ORIGIN}" }
store: { key_secret: integration-test-secret-0123456789 }
refusal:
  content_type: application/json
  body: '{"error":"slow_down","limit":"{limit}","retry_after":{retry_after}}'
routes:
  - name: shop
    match: { path_prefix: /shop }
    upstream: origin
    refusal: { status: 503, content_type: text/html; charset=utf-8, file: "{PAGE}" }
    limits: [{ name: shop-ip, algorithm: fixed_window, limit: 1, window: 1h, key: [ip] }]
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits: [{ name: api-ip, algorithm: token_bucket, capacity: 1, refill_rate: 1/m, key: [ip] }]
)",
                         "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port()));
  Proxy proxy(substitute(yaml, "{PAGE}", page));

  EXPECT_EQ(send(proxy.port(), "/shop/1")->result_int(), 200);
  auto shop = send(proxy.port(), "/shop/2");
  EXPECT_EQ(shop->result_int(), 503);
  EXPECT_EQ(header(*shop, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(has_header(*shop, "Retry-After"));
  EXPECT_EQ(shop->body(),
            "<h1>Slow down</h1><p>shop-ip: back in " + header(*shop, "Retry-After") + " s</p>\n");

  EXPECT_EQ(send(proxy.port(), "/api/1")->result_int(), 200);
  auto api = send(proxy.port(), "/api/2");
  EXPECT_EQ(api->result_int(), 429);
  EXPECT_EQ(header(*api, "Content-Type"), "application/json");
  EXPECT_EQ(header(*api, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(api->body(), R"({"error":"slow_down","limit":"api-ip","retry_after":)" +
                             header(*api, "Retry-After") + "}");

  // The same page over HTTP/2.
  auto h2 = command_output(
      "curl -s --http2-prior-knowledge -w ' %{http_version} %{http_code} "
      "%{content_type}' http://127.0.0.1:" +
          std::to_string(proxy.port()) + "/shop/3",
      20);
  EXPECT_TRUE(h2.starts_with("<h1>Slow down</h1><p>shop-ip: back in ")) << h2;
  EXPECT_TRUE(h2.ends_with(" 2 503 text/html; charset=utf-8")) << h2;
  EXPECT_EQ(origin.requests(), 2u);
}

// `rollout: 50%`: about half of the callers are refused past the limit, the others only
// counted as the shadow would-refuse; a caller stays on its side; the metrics say which.
TEST(Limits, ARolloutEnforcesAStableShareOfKeys) {
  Origin origin;
  Proxy proxy(config_with(origin, R"(
  - name: api
    match: { path_prefix: / }
    upstream: origin
    limits:
      - { name: per-ip, algorithm: fixed_window, limit: 1, window: 1h, key: [ip], rollout: 50% }
)"));
  constexpr int kCallers = 200;
  std::vector<int> second(kCallers), third(kCallers);
  auto ip = [](int i) {
    return "X-Forwarded-For: 10.9." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
           "\r\n";
  };
  for (int i = 0; i < kCallers; ++i) EXPECT_EQ(send(proxy.port(), "/a", ip(i))->result_int(), 200);
  for (int i = 0; i < kCallers; ++i) second[i] = send(proxy.port(), "/b", ip(i))->result_int();
  for (int i = 0; i < kCallers; ++i) third[i] = send(proxy.port(), "/c", ip(i))->result_int();
  EXPECT_EQ(second, third);  // each caller on its side of the rollout
  const auto refused = std::count(second.begin(), second.end(), 429);
  EXPECT_EQ(std::count(second.begin(), second.end(), 200), kCallers - refused);
  EXPECT_GT(refused, kCallers / 2 - 30);  // 50% of 200, give or take the hash
  EXPECT_LT(refused, kCallers / 2 + 30);
  auto text = admin::render_prometheus(proxy.metrics());
  const std::string series = R"(floodgate_limit_refusals_total{route="api",limit="per-ip",mode=")";
  EXPECT_EQ(metric(text, series + R"(enforced"})"), static_cast<std::uint64_t>(2 * refused));
  EXPECT_EQ(metric(text, series + R"(shadow"})"),
            static_cast<std::uint64_t>(2 * (kCallers - refused)));
}

}  // namespace
}  // namespace floodgate::testing
