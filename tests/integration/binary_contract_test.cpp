// The contract on the real binary: each capability that the in-process tests prove at speed
// (HTTP/2 over TLS and h2c, gRPC, on_exceed: delay, calendar quotas, JA4 and cookie keys,
// upstream pools, refusal pages read again on SIGHUP, admin overrides of delay, quota and
// rollout limits) once more through `floodgate --config FILE` as main wires it: its own
// listeners, workers, store factory, reload and admin API. Tests are named Binary.<capability>
// so that CI's log counts them per capability.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "../support/jwt_signing.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate_process.hpp"
#include "grpc_peer.hpp"
#include "h2_upstream_config.hpp"
#include "harness.hpp"
#include "identity_provider.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// One floodgate process serving `yaml` (written to a temp file named `name`).
struct Binary {
  std::string path;
  std::unique_ptr<ChildProcess> fg;
  Binary(const std::string& name, const std::string& yaml)
      : path(write_temp_file(name, yaml)), fg(start_floodgate(path)) {}
  ~Binary() {
    fg.reset();
    std::filesystem::remove(path);
  }
};

std::string port_text(std::uint16_t p) {
  return std::to_string(p);
}

// The lines curl prints for `urls` fetched at once (`-w` per transfer, in the order they end).
std::vector<std::string> curl_lines(const std::string& options, const std::string& format,
                                    const std::vector<std::string>& urls) {
  std::string command = "curl -s " + options + " -w '" + format + "\\n'";
  if (urls.size() > 1) command += " --parallel --parallel-immediate --parallel-max 50";
  for (const auto& u : urls) command += " -o /dev/null '" + u + "'";  // -o: one per url
  std::istringstream in(command_output(command, 60));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

std::string header_of(const Response& r, const char* name) {
  auto it = r.base().find(name);
  return it == r.base().end() ? std::string() : std::string(it->value());
}

TEST(Binary, Http2OverTlsByAlpnAndH2cDecideEveryStream) {
  Origin origin;
  TestPki pki;
  const auto cert = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  const auto tls_port = free_port(), h2c_port = free_port();
  Binary b("binary-h2",
           "server:\n  threads: 2\n  listen:\n"
           "    - { address: \"127.0.0.1:" +
               port_text(tls_port) + "\", tls: { certificates: [{ cert: \"" + cert.chain +
               "\", key: \"" + cert.key +
               "\" }] } }\n"
               "    - { address: \"127.0.0.1:" +
               port_text(h2c_port) +
               "\", protocols: [http1, h2c] }\n"
               "upstreams:\n  origin: { url: \"http://127.0.0.1:" +
               port_text(origin.port()) +
               "\" }\nroutes:\n"
               "  - name: api\n    match: { path_prefix: /api }\n    upstream: origin\n"
               "    limits: [{ name: three, algorithm: fixed_window, limit: 3, "
               "window: 1h, key: [ip] }]\n"
               "  - name: up\n    match: { path_prefix: /__up }\n    upstream: origin\n");
  wait_serving(h2c_port);
  get(origin.port(), "/__reset");
  // TLS with ALPN: curl offers h2 and http/1.1, the listener's order picks h2.
  auto tls = curl_lines("--http2 --cacert " + pki.ca_file(), "%{http_version} %{http_code}",
                        {"https://127.0.0.1:" + port_text(tls_port) + "/api/a"});
  ASSERT_EQ(tls.size(), 1u);
  EXPECT_EQ(tls[0], "2 200");
  // h2c with prior knowledge: five streams on one connection, the limit's two left.
  auto h2load = command_output(
      "h2load -n 5 -c 1 -m 5 http://127.0.0.1:" + port_text(h2c_port) + "/api/b", 30);
  EXPECT_NE(h2load.find("status codes: 2 2xx, 0 3xx, 3 4xx, 0 5xx"), std::string::npos) << h2load;
  EXPECT_EQ(origin.requests(), 3u);  // refused streams never reach it
}

TEST(Binary, GrpcCallsPassAndARefusalIsResourceExhausted) {
  GrpcServer server;
  const auto port = free_port();
  Binary b("binary-grpc",
           substitute(grpc_config(h2_upstream("grpc", server.port()),
                                  "  - name: unary\n    match: { path_prefix: "
                                  "/floodgate.test.Echo/Unary }\n    upstream: grpc\n"
                                  "    limits: [{ name: two, algorithm: fixed_window, limit: 2, "
                                  "window: 1h, key: [ip] }]\n"
                                  "  - name: all\n    match: { path_prefix: / }\n    upstream: "
                                  "grpc\n"),
                      "127.0.0.1:0", "127.0.0.1:" + port_text(port)));
  wait_listening(port);
  auto streamed = grpc_call(port, "server", 20);
  EXPECT_EQ(grpc_code(streamed), "OK") << boost::json::serialize(streamed);
  EXPECT_EQ(grpc_trailing(streamed, "x-tokens-used"), "20");
  EXPECT_EQ(grpc_code(grpc_call(port, "unary")), "OK");
  EXPECT_EQ(grpc_code(grpc_call(port, "unary")), "OK");
  auto third = grpc_call(port, "unary");
  EXPECT_EQ(grpc_code(third), "RESOURCE_EXHAUSTED") << boost::json::serialize(third);
  EXPECT_FALSE(grpc_trailing(third, "grpc-retry-pushback-ms").empty());
  EXPECT_EQ(grpc_trailing(third, "x-ratelimit-limit"), "2");
}

// Five requests at once against a bucket of 1 refilling 5 a second, held up to 500 ms: one
// passes at once, two are held (about 200 and 400 ms) and forwarded, two would wait longer
// than max_delay and are refused.
TEST(Binary, DelayHoldsWhatFitsMaxDelayAndRefusesTheRest) {
  Origin origin;
  const auto port = free_port();
  Binary b("binary-delay",
           "server:\n  threads: 2\n  listen: [127.0.0.1:" + port_text(port) +
               "]\nupstreams:\n  origin: { url: \"http://127.0.0.1:" + port_text(origin.port()) +
               "\" }\nroutes:\n"
               "  - name: paced\n    match: { path_prefix: /paced }\n    upstream: origin\n"
               "    limits: [{ name: paced, algorithm: token_bucket, capacity: 1, refill_rate: "
               "5/s, key: [route], on_exceed: delay, max_delay: 500ms }]\n"
               "  - name: up\n    match: { path_prefix: /__up }\n    upstream: origin\n");
  wait_serving(port);
  get(origin.port(), "/__reset");
  const std::string url = "http://127.0.0.1:" + port_text(port) + "/paced";
  auto lines = curl_lines("", "%{http_code} %{time_total}", {url, url, url, url, url});
  ASSERT_EQ(lines.size(), 5u) << ::testing::PrintToString(lines);
  std::map<std::string, int> codes;
  double slowest_admitted = 0;
  for (const auto& l : lines) {
    const auto space = l.find(' ');
    const auto code = l.substr(0, space);
    ++codes[code];
    if (code == "200")
      slowest_admitted = std::max(slowest_admitted, std::stod(l.substr(space + 1)));
  }
  EXPECT_EQ(codes["200"], 3) << ::testing::PrintToString(lines);
  EXPECT_EQ(codes["429"], 2) << ::testing::PrintToString(lines);
  // The last one held waited for its unit: about 400 ms (the bucket's refill, not a timer's).
  EXPECT_GE(slowest_admitted, 0.3) << ::testing::PrintToString(lines);
  EXPECT_EQ(origin.requests(), 3u);
}

// A day's quota in a zone with a half-hour offset, on the embedded store: the refusal points at
// the next local midnight there, by the system's own zone database (date(1)).
TEST(Binary, QuotaRefusesUntilTheNextLocalMidnight) {
  Origin origin;
  const auto port = free_port();
  const auto midnight = next_local_midnight("Asia/Kolkata");
  const auto now_s = [] { return limit::SystemClock().now() / limit::kMicrosPerSecond; };
  Binary b("binary-quota",
           "server:\n  threads: 2\n  listen: [127.0.0.1:" + port_text(port) +
               "]\nupstreams:\n  origin: { url: \"http://127.0.0.1:" + port_text(origin.port()) +
               "\" }\nroutes:\n"
               "  - name: daily\n    match: { path_prefix: /daily }\n    upstream: origin\n"
               "    limits: [{ name: day, algorithm: quota, period: day, timezone: Asia/Kolkata, "
               "limit: 2, key: [ip] }]\n"
               "  - name: up\n    match: { path_prefix: /__up }\n    upstream: origin\n");
  wait_serving(port);
  for (int i = 0; i < 2; ++i) {
    auto r = get(port, "/daily");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->result_int(), 200);
    EXPECT_EQ(header_of(*r, "X-RateLimit-Reset"), std::to_string(midnight));
  }
  auto refused = get(port, "/daily");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 429);
  EXPECT_EQ(header_of(*refused, "X-RateLimit-Reset"), std::to_string(midnight));
  EXPECT_NEAR(std::stod(header_of(*refused, "Retry-After")),
              static_cast<double>(midnight - now_s()), 2.0);
  EXPECT_EQ(header_of(*refused, "RateLimit-Policy"), "\"day\";q=2;w=86400");
}

// Keys that outlast an address: the TLS client's stack (JA4) and a session cookie. Every curl
// run with the same options sends the same ClientHello shape; TLS 1.2 only is another JA4.
TEST(Binary, Ja4AndCookieKeysCountTheirOwnCallers) {
  Origin origin;
  TestPki pki;
  const auto cert = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  const auto port = free_port();
  Binary b(
      "binary-keys",
      "server:\n  threads: 2\n  listen:\n    - { address: \"127.0.0.1:" + port_text(port) +
          "\", tls: { certificates: [{ cert: \"" + cert.chain + "\", key: \"" + cert.key +
          "\" }] } }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" + port_text(origin.port()) +
          "\" }\nroutes:\n"
          "  - name: stack\n    match: { path_prefix: /stack }\n    upstream: origin\n"
          "    limits: [{ name: per-stack, algorithm: fixed_window, limit: 2, window: 1h, "
          "key: [\"tls:ja4\"] }]\n"
          "  - name: session\n    match: { path_prefix: /session }\n    upstream: origin\n"
          "    limits: [{ name: per-session, algorithm: fixed_window, limit: 1, window: 1h, "
          "key: [\"cookie:sid\"] }]\n");
  wait_listening(port);
  const std::string base = "https://127.0.0.1:" + port_text(port);
  const std::string tls = "--cacert " + pki.ca_file() + " ";
  auto status = [&](const std::string& options, const std::string& target) {
    auto lines = curl_lines(tls + options, "%{http_code}", {base + target});
    return lines.empty() ? std::string("none") : lines[0];
  };
  EXPECT_EQ(status("", "/stack"), "200");
  EXPECT_EQ(status("", "/stack"), "200");
  EXPECT_EQ(status("", "/stack"), "429");               // the same stack, a new connection
  EXPECT_EQ(status("--tls-max 1.2", "/stack"), "200");  // another ClientHello: its own count
  EXPECT_EQ(status("-b sid=alpha", "/session"), "200");
  EXPECT_EQ(status("-b 'theme=dark; sid=alpha'", "/session"), "429");
  EXPECT_EQ(status("-b sid=beta", "/session"), "200");
}

// A pool of two origins: requests are spread over both; with one gone, every request is still
// answered by the other (a connection that cannot be made goes once to another server).
TEST(Binary, UpstreamPoolSpreadsAndSkipsAServerThatIsGone) {
  Origin a;
  std::optional<Origin> b(std::in_place);
  const auto port = free_port();
  Binary fg("binary-pool",
            "server:\n  threads: 1\n  listen: [127.0.0.1:" + port_text(port) +
                "]\nupstreams:\n  pool:\n    servers: [{ url: \"http://127.0.0.1:" +
                port_text(a.port()) + "\" }, { url: \"http://127.0.0.1:" + port_text(b->port()) +
                "\" }]\n    balance: round_robin\nroutes:\n"
                "  - name: all\n    match: { path_prefix: / }\n    upstream: pool\n");
  wait_serving(port);
  get(a.port(), "/__reset");
  get(b->port(), "/__reset");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(get(port, "/x")->result_int(), 200) << i;
  EXPECT_EQ(a.requests(), 5u);
  EXPECT_EQ(b->requests(), 5u);
  b.reset();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(get(port, "/y")->result_int(), 200) << i;
  EXPECT_EQ(a.requests(), 15u);
}

// A refusal page from a file next to the config, read again on SIGHUP: the reload counted by
// the admin listener, the next refusal in the new words.
TEST(Binary, ARefusalPageIsReadAgainOnSighup) {
  Origin origin;
  const auto port = free_port(), admin = free_port();
  const auto dir =
      std::filesystem::temp_directory_path() / ("fg-refusal-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "429.html") << "<h1>slow down: {limit}, again in {retry_after} s</h1>";
  const auto config = (dir / "floodgate.yaml").string();
  std::ofstream(config) << "server:\n  threads: 2\n  listen: [127.0.0.1:" + port_text(port) +
                               "]\nadmin: { listen: 127.0.0.1:" + port_text(admin) +
                               " }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" +
                               port_text(origin.port()) +
                               "\" }\nroutes:\n"
                               "  - name: shop\n    match: { path_prefix: /shop }\n"
                               "    upstream: origin\n"
                               "    refusal: { status: 503, content_type: text/html, file: "
                               "429.html }\n"
                               "    limits: [{ name: once, algorithm: fixed_window, limit: 1, "
                               "window: 1h, key: [ip] }]\n"
                               "  - name: up\n    match: { path_prefix: /__up }\n"
                               "    upstream: origin\n";
  auto fg = start_floodgate(config);
  wait_serving(port);
  EXPECT_EQ(get(port, "/shop")->result_int(), 200);
  auto refused = get(port, "/shop");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->result_int(), 503);
  EXPECT_EQ(header_of(*refused, "Content-Type"), "text/html");
  EXPECT_EQ(refused->body().rfind("<h1>slow down: once, again in ", 0), 0u) << refused->body();

  std::ofstream(dir / "429.html") << "<h1>closed for {route}</h1>";
  kill(fg->pid(), SIGHUP);
  ASSERT_TRUE(eventually(
      [&] {
        return metric(get(admin, "/metrics")->body(),
                      R"(floodgate_config_reloads_total{result="ok"})") == 1;
      },
      10s));
  auto again = get(port, "/shop");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->result_int(), 503);
  EXPECT_EQ(again->body(), "<h1>closed for shop</h1>");
  fg.reset();
  std::filesystem::remove_all(dir);
}

// jwt.jwks as main wires it: the binary fetches the issuer's keys before serving, verifies by
// kid, fetches again for a kid it has not seen (the issuer rotated to an Ed25519 key), and a
// SIGHUP naming another issuer's url (down) drops the keys it had: another issuer's keys are
// never trusted for it.
TEST(Binary, JwksKeysRotateByKidAndAReloadToAnotherIssuerDropsThem) {
  TestPki pki;
  IdentityProvider idp(pki);
  const Key first = rsa_key(), second = ed25519_key();
  idp.publish({jwk_of(first, "2026-11")});
  Origin origin;
  const auto port = free_port();
  auto yaml = [&](const std::string& url) {
    return "server:\n  threads: 2\n  listen: [127.0.0.1:" + port_text(port) +
           "]\njwt:\n  algorithms: [RS256, EdDSA]\n  jwks: { url: \"" + url +
           "\", refresh: 1h, ca_file: \"" + pki.ca_file() +
           "\" }\nupstreams:\n  origin: { url: \"http://127.0.0.1:" + port_text(origin.port()) +
           "\" }\nroutes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
           "    limits: [{ name: per-tenant, algorithm: fixed_window, limit: 100, window: 1h, "
           "key: [\"jwt:tenant\"] }]\n";
  };
  Binary b("binary-jwks", yaml(idp.url()));
  wait_listening(port);
  auto bearer = [&](const Key& key, const std::string& kid) {
    const auto alg = EVP_PKEY_is_a(key.get(), "RSA") ? "RS256" : "EdDSA";
    auto r =
        get(port, "/x",
            "Authorization: Bearer " +
                sign(alg, header_with_kid(alg, kid), R"({"tenant":"acme","exp":4102444800})", key) +
                "\r\n");
    return r ? r->result_int() : -1;
  };
  EXPECT_EQ(bearer(first, "2026-11"), 200);
  EXPECT_EQ(bearer(second, "2026-11"), 401);  // not the issuer's key

  idp.publish({jwk_of(first, "2026-11"), jwk_of(second, "2026-12")});
  EXPECT_TRUE(eventually([&] { return bearer(second, "2026-12") == 200; }, 5s))
      << "the new kid was never fetched";
  EXPECT_EQ(bearer(first, "2026-11"), 200);

  idp.down(true);
  std::ofstream(b.path) << yaml(idp.url() + "?v=2");
  kill(b.fg->pid(), SIGHUP);
  std::string seen;
  ASSERT_FALSE(wait_for_line(*b.fg, "is now serving", 10s, seen).empty()) << seen;
  EXPECT_TRUE(eventually([&] { return bearer(first, "2026-11") == 401; }, 5s));
}

// Admin overrides through the binary's API on Redis reach every kind of limit they may meet:
// an on_exceed: delay bucket exempted (no longer held), a calendar quota raised, a limit being
// rolled out given its own quota. Two instances share the store; the change is made on one and
// holds on both.
TEST(Binary, OverridesReachDelayQuotaAndRolloutLimits) {
  RedisServer redis;
  Origin origin;
  const std::string routes = R"(
  - name: paced
    match: { path_prefix: /paced }
    upstream: origin
    limits: [{ name: paced, algorithm: token_bucket, capacity: 1, refill_rate: 1/s, key: [ip], on_exceed: delay, max_delay: 5s }]
  - name: daily
    match: { path_prefix: /daily }
    upstream: origin
    limits: [{ name: daily, algorithm: quota, period: day, limit: 1, key: [ip] }]
  - name: rolled
    match: { path_prefix: /rolled }
    upstream: origin
    limits: [{ name: rolled, algorithm: fixed_window, limit: 1, window: 1h, key: [ip], rollout: 100% }]
)" + kProbeRoute;
  const auto p1 = free_port(), p2 = free_port(), a1 = free_port(), a2 = free_port();
  Binary one("binary-overrides-1", redis_config(p1, origin.port(), redis.port(), routes, "1s",
                                                admin_with_test_token(a1)));
  Binary two("binary-overrides-2", redis_config(p2, origin.port(), redis.port(), routes, "1s",
                                                admin_with_test_token(a2)));
  wait_enforced(p1);
  wait_enforced(p2);
  const std::string me = "ip=127.0.0.1";

  // Before: the quota and the rolled-out limit admit one each; the paced one holds the second.
  EXPECT_EQ(get(p1, "/daily")->result_int(), 200);
  EXPECT_EQ(get(p2, "/daily")->result_int(), 429);
  EXPECT_EQ(get(p1, "/rolled")->result_int(), 200);
  EXPECT_EQ(get(p2, "/rolled")->result_int(), 429);
  EXPECT_EQ(get(p1, "/paced")->result_int(), 200);
  auto held_at = std::chrono::steady_clock::now();
  EXPECT_EQ(get(p2, "/paced")->result_int(), 200);
  EXPECT_GE(std::chrono::steady_clock::now() - held_at, 500ms);  // held for its unit

  EXPECT_EQ(put_override(a1, "daily", me, R"({"limit": 3, "ttl": "10m"})").substr(0, 3), "200");
  EXPECT_EQ(put_override(a1, "rolled", me, R"({"limit": 2, "ttl": "10m"})").substr(0, 3), "200");
  EXPECT_EQ(put_exemption(a1, "paced", me).substr(0, 3), "200");
  // On the other instance within a second: the quota is 3 (1 spent), the rolled-out limit 2.
  ASSERT_TRUE(eventually([&] { return get(p2, "/daily")->result_int() == 200; }, 3s));
  EXPECT_EQ(get(p2, "/daily")->result_int(), 200);
  EXPECT_EQ(get(p1, "/daily")->result_int(), 429);
  ASSERT_TRUE(eventually([&] { return get(p2, "/rolled")->result_int() == 200; }, 3s));
  EXPECT_EQ(get(p1, "/rolled")->result_int(), 429);
  // Exempt: ten in a row, none held.
  ASSERT_TRUE(eventually(
      [&] {
        const auto t = std::chrono::steady_clock::now();
        return get(p2, "/paced")->result_int() == 200 &&
               std::chrono::steady_clock::now() - t < 200ms;
      },
      8s));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(get(i % 2 ? p1 : p2, "/paced")->result_int(), 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // held, they would take 10 s
}

}  // namespace
}  // namespace floodgate::testing
