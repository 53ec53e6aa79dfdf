// Contract behaviours on the wire that other tests touched only loosely: hop-by-hop fields of
// responses, a remembered refusal's headers and its forgetting on reload, the exact one-line
// bodies of floodgate's own errors, a rejected reload counted, and timeouts bounded from below
// as well as from above.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "floodgate_process.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

std::string field(const Response& r, std::string_view name) {
  auto it = r.base().find(name);
  return it == r.base().end() ? "<absent>" : std::string(it->value());
}

// ------------------------------------------------------------------- hop-by-hop responses

TEST(HopByHop, FieldsOfTheOriginsConnectionAreNotRelayedToTheClient) {
  Origin origin;
  Proxy proxy(one_route_config(origin, "  threads: 1\n"));
  // The origin answers with every hop-by-hop field (RFC 9110 7.6.1), one of them named only
  // by its Connection header, and one end-to-end field.
  const std::string target =
      "/respond?Connection=X-Hop&X-Hop=secret&Keep-Alive=timeout=5&Proxy-Connection=keep-alive"
      "&Proxy-Authenticate=Basic&Trailer=X-Checksum&Upgrade=h2c&TE=trailers&X-End-To-End=kept";
  const char* hop[] = {"X-Hop",   "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Trailer",
                       "Upgrade", "TE"};
  auto direct = get(origin.port(), target);
  ASSERT_TRUE(direct);
  for (auto name : hop) ASSERT_NE(field(*direct, name), "<absent>") << "the origin sends " << name;
  ASSERT_NE(field(*direct, "Connection").find("X-Hop"), std::string::npos);

  Client c(proxy.port());
  auto r = c.request("GET " + target + " HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  EXPECT_EQ(r->body(), "responded");
  for (auto name : hop) EXPECT_EQ(field(*r, name), "<absent>") << name;
  // Connection, if present, is the proxy's own: nothing of the origin's options in it.
  EXPECT_EQ(field(*r, "Connection").find("X-Hop"), std::string::npos) << field(*r, "Connection");
  EXPECT_EQ(field(*r, "X-End-To-End"), "kept");
  // The client's connection is the proxy's to keep: still usable after all that.
  auto again = c.request("GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->body(), "ok");
}

// ------------------------------------------------------- remembered refusals and reloads

std::string deny_config(const Origin& origin, int limit, const std::string& extra_route = "") {
  return "server:\n  listen: [127.0.0.1:0]\n  threads: 1\n"
         "upstreams:\n  origin: { url: \"http://127.0.0.1:" +
         std::to_string(origin.port()) +
         "\" }\nstore: { key_secret: contract-test-secret-0123456789 }\nroutes:\n" + extra_route +
         "  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
         "    limits:\n      - { name: hourly, algorithm: fixed_window, limit: " +
         std::to_string(limit) +
         ", window: 1h, key: [ip], cost: { from: \"header:X-Cost\", default: 1, max: 2 } }\n";
}

// What a refusal says, field by field.
const char* kRefusalFields[] = {
    "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy",
    "RateLimit",         "Retry-After",           "Content-Type"};

TEST(DenyCache, ARememberedRefusalAnswersAsTheStoreDidAndIsForgottenWhenItsLimitChanges) {
  Origin origin;
  const limit::Micros s = limit::kMicrosPerSecond;
  const limit::Micros hour_start = (1'800'000'000 / 3600) * 3600 * s;
  limit::FakeClock clock(hour_start + 600 * s);  // 10 minutes into the window: 50 to go
  Proxy proxy(deny_config(origin, 2), &clock);
  auto counters = [&] {
    auto m = admin::render_prometheus(proxy.metrics());
    return std::pair(metric(m, R"(floodgate_decision_seconds_count{backend="memory"})"),
                     metric(m, R"(floodgate_deny_cache_hits_total{route="api"})"));
  };
  auto send = [&](int cost) {
    auto r = get(proxy.port(), "/x", "X-Cost: " + std::to_string(cost) + "\r\n");
    EXPECT_TRUE(r);
    return r ? *r : Response{};
  };

  EXPECT_EQ(send(1).result_int(), 200);  // 1 of 2 left: nothing to remember yet
  auto by_store = send(2);               // does not fit: the store refuses, and it is remembered
  ASSERT_EQ(by_store.result_int(), 429);
  EXPECT_EQ(counters(), std::pair(std::uint64_t(2), std::uint64_t(0)));
  EXPECT_EQ(field(by_store, "Retry-After"), "3000");

  clock.advance(10 * s);
  auto by_cache = send(2);
  ASSERT_EQ(by_cache.result_int(), 429);
  EXPECT_EQ(counters(), std::pair(std::uint64_t(2), std::uint64_t(1))) << "the store was asked";
  // The same answer, with Retry-After (and RateLimit's t=) counted down to the same moment.
  for (auto name : kRefusalFields) {
    auto expected = substitute(field(by_store, name), "3000", "2990");
    EXPECT_EQ(field(by_cache, name), expected) << name;
  }
  EXPECT_EQ(without_request_id(by_cache.body()),
            substitute(without_request_id(by_store.body()), "3000", "2990"));
  EXPECT_EQ(field(by_store, "RateLimit"), "\"hourly\";r=0;t=3000");

  // A reload that leaves the limit as it was keeps the refusal (another route came).
  proxy.source().publish(load_or_fail(deny_config(
      origin, 2, "  - name: other\n    match: { path_prefix: /other }\n    upstream: origin\n")));
  EXPECT_EQ(send(2).result_int(), 429);
  EXPECT_EQ(counters(), std::pair(std::uint64_t(2), std::uint64_t(2)));

  // A reload that raises the limit forgets it: admitted at once, no time having passed, by
  // the store, which still holds the first request's unit (5 - 1 - 2 left).
  proxy.source().publish(load_or_fail(deny_config(origin, 5)));
  auto admitted = send(2);
  EXPECT_EQ(admitted.result_int(), 200);
  EXPECT_EQ(field(admitted, "X-RateLimit-Limit"), "5");
  EXPECT_EQ(field(admitted, "X-RateLimit-Remaining"), "2");
  EXPECT_EQ(counters(), std::pair(std::uint64_t(3), std::uint64_t(2)));
  EXPECT_EQ(origin.requests(), 2u);
}

// ------------------------------------------------------------- floodgate's own error bodies

struct ErrorCase {
  const char* what;
  std::string request;
  int status;
  const char* body;
};

TEST(ErrorBodies, EachOwnErrorHasItsOneLineTextBody) {
  Origin origin;
  Proxy proxy(substitute(R"(
server:
  listen: [127.0.0.1:0]
  threads: 1
  max_body_bytes: 1KiB
  max_header_bytes: 4KiB
upstreams:
  origin: { url: "http://{ORIGIN}", response_timeout: 300ms }
  nowhere: { url: "http://127.0.0.1:1", connect_timeout: 500ms }
store: { key_secret: contract-test-secret-0123456789 }
jwt: { algorithms: [HS256], hs256_secret: contract-jwt-secret }
routes:
  - name: dead
    match: { path_prefix: /dead }
    upstream: nowhere
  - name: partners
    match: { path_prefix: /partners }
    upstream: origin
    limits: [{ name: tenant, algorithm: fixed_window, limit: 100, window: 1h, key: [jwt:tenant] }]
  - name: costly
    match: { path_prefix: /costly }
    upstream: origin
    limits:
      - { name: c, algorithm: token_bucket, capacity: 10, refill_rate: 1/s, key: [ip], cost: { from: "header:X-Cost", default: 1 } }
  - name: all
    match: { path_prefix: /, methods: [GET, POST] }
    upstream: origin
)",
                         "{ORIGIN}", "127.0.0.1:" + std::to_string(origin.port())));
  const std::vector<ErrorCase> cases = {
      {"malformed", "GARBAGE\r\n\r\n", 400, "bad request\n"},
      {"cost not an integer", "GET /costly HTTP/1.1\r\nHost: t\r\nX-Cost: 1.5\r\n\r\n", 400,
       "bad request\n"},
      {"no token", "GET /partners HTTP/1.1\r\nHost: t\r\n\r\n", 401, "a valid token is required\n"},
      {"forged token",
       "GET /partners HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
       "eyJhbGciOiJIUzI1NiJ9.eyJ0ZW5hbnQiOiJ4In0.c2lnbmF0dXJl\r\n\r\n",
       401, "a valid token is required\n"},
      {"no route", "DELETE /x HTTP/1.1\r\nHost: t\r\n\r\n", 404, "no route for this request\n"},
      {"body too large", "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", 413,
       "request body too large\n"},
      {"header too large",
       "GET /x HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(6000, 'a') + "\r\n\r\n", 431,
       "request header too large\n"},
      {"upstream unreachable", "GET /dead HTTP/1.1\r\nHost: t\r\n\r\n", 502,
       "upstream unreachable\n"},
      {"upstream too slow", "GET /slow/3000 HTTP/1.1\r\nHost: t\r\n\r\n", 504,
       "upstream timed out\n"},
  };
  for (const auto& c : cases) {
    Client client(proxy.port());
    auto r = client.request(c.request);
    ASSERT_TRUE(r) << c.what;
    EXPECT_EQ(r->result_int(), c.status) << c.what;
    // One line: the status's, with the request id the X-Request-Id header names (also when
    // the head itself could not be read: that is an exchange too).
    EXPECT_EQ(without_request_id(r->body()), c.body) << c.what;
    const auto id = field(*r, "X-Request-Id");
    EXPECT_NE(id, "<absent>") << c.what;
    EXPECT_EQ(r->body(),
              std::string(c.body).substr(0, std::strlen(c.body) - 1) + " (request id " + id + ")\n")
        << c.what;
    EXPECT_EQ(field(*r, "Content-Type"), "text/plain; charset=utf-8") << c.what;
    EXPECT_EQ(field(*r, "Content-Length"), std::to_string(r->body().size())) << c.what;
  }
  EXPECT_EQ(origin.requests(), 1u) << "only the slow request reached the origin";
}

// --------------------------------------------------------------------- rejected reloads

TEST(Reload, ARejectedReloadIsCountedAndChangesNothing) {
  Origin origin;
  auto port = free_port(), admin = free_port();
  auto config = [&](const std::string& prefix, const std::string& route_extra = "") {
    return "server:\n  listen: [127.0.0.1:" + std::to_string(port) +
           "]\n  threads: 2\n  timeouts: { drain: 1s }\nadmin: { listen: 127.0.0.1:" +
           std::to_string(admin) +
           " }\nlog: { level: error }\nupstreams:\n  origin: { url: "
           "\"http://127.0.0.1:" +
           std::to_string(origin.port()) +
           "\" }\nroutes:\n  - name: r\n    match: { path_prefix: " + prefix +
           " }\n    upstream: origin\n" + route_extra;
  };
  auto path = write_temp_file("reload-counted", config("/a"));
  ChildProcess fg({FLOODGATE_BINARY, "--config", path});
  // The admin listener and the workers' listeners start on their own threads: wait for both.
  wait_serving(admin, "/healthz");
  wait_serving(port);
  auto reloads = [&](const char* result) {
    auto m = get(admin, "/metrics");
    return m ? metric(m->body(),
                      std::string("floodgate_config_reloads_total{result=\"") + result + "\"}")
             : UINT64_MAX;
  };
  auto status = [&](const std::string& target) {
    auto r = get(port, target);
    return r ? r->result_int() : -1;
  };
  EXPECT_EQ(reloads("ok"), 0u);
  EXPECT_EQ(reloads("rejected"), 0u);

  // Not YAML at all, then YAML with an error only validation finds (an unknown key).
  const std::string bad[] = {"server: [oops\n", config("/b", "    limitz: []\n")};
  for (std::uint64_t i = 0; i < 2; ++i) {
    std::ofstream(path) << bad[i];
    kill(fg.pid(), SIGHUP);
    EXPECT_TRUE(eventually([&] { return reloads("rejected") == i + 1; }, 5s))
        << "rejected: " << reloads("rejected");
    EXPECT_EQ(reloads("ok"), 0u);
    EXPECT_EQ(status("/a/1"), 200) << "the old routes still answer";
    EXPECT_EQ(status("/b/1"), 404);
  }

  std::ofstream(path) << config("/b");
  kill(fg.pid(), SIGHUP);
  EXPECT_TRUE(eventually([&] { return reloads("ok") == 1; }, 5s));
  EXPECT_EQ(reloads("rejected"), 2u);
  EXPECT_TRUE(eventually([&] { return status("/b/1") == 200; }, 5s));
  EXPECT_EQ(status("/a/1"), 404);
}

// --------------------------------------------------------- timeouts, bounded on both sides

// The watchdog computes its deadlines from CLOCK_MONOTONIC_COARSE, which lags the precise
// clock by up to a kernel tick (4 ms here), and adds one tick so that a timeout does not fire
// early. On a VM whose ticks arrive late the lag was measured at up to 6 ms: the lower bounds
// allow what a late tick leaves (a few ms) and no more; they allowed 20 ms before the tick was
// added, when timeouts fired 1-6 ms early.
constexpr Ms kCoarseLag{5};

std::string timeouts_config(const Origin& origin) {
  return one_route_config(origin, "  threads: 1\n  timeouts: { header_read: 300ms, idle: 400ms }\n",
                          "response_timeout: 300ms");
}

// Each bound: no sooner than the timeout (less the coarse clock's lag), not much later.
void expect_between(std::chrono::steady_clock::duration took, Ms timeout, const char* what) {
  std::cout << "[ timeouts ] " << what << " " << timeout.count() << " ms: took "
            << std::chrono::duration_cast<Ms>(took).count() << " ms\n";
  EXPECT_GE(took, timeout - kCoarseLag) << what;
  EXPECT_LT(took, timeout + 1500ms) << what;
}

TEST(Timeouts, UpstreamResponseTimeoutIsNeitherEarlyNorLate) {
  Origin origin;
  Proxy proxy(timeouts_config(origin));
  Client c(proxy.port());
  auto start = std::chrono::steady_clock::now();
  auto r = c.request("GET /slow/5000 HTTP/1.1\r\nHost: t\r\n\r\n");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 504);
  expect_between(took, 300ms, "response_timeout");
  // A response inside the budget is not cut: 100 ms of a 300 ms budget.
  auto ok = get(proxy.port(), "/slow/100");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->result_int(), 200);
}

TEST(Timeouts, HeaderReadTimeoutIsNeitherEarlyNorLate) {
  Origin origin;
  Proxy proxy(timeouts_config(origin));
  auto start = std::chrono::steady_clock::now();
  Client slow(proxy.port());
  slow.send("GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ");  // never finishes its header
  ASSERT_TRUE(slow.closed_by_peer(3s));
  expect_between(std::chrono::steady_clock::now() - start, 300ms, "header_read");
  EXPECT_EQ(origin.requests(), 0u);
}

TEST(Timeouts, IdleTimeoutIsNeitherEarlyNorLate) {
  Origin origin;
  Proxy proxy(timeouts_config(origin));
  Client c(proxy.port());
  // The idle clock starts once the response is written: after this moment.
  auto start = std::chrono::steady_clock::now();
  auto r = c.request("GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result_int(), 200);
  ASSERT_TRUE(c.closed_by_peer(3s));
  expect_between(std::chrono::steady_clock::now() - start, 400ms, "idle");
}

}  // namespace
}  // namespace floodgate::testing
