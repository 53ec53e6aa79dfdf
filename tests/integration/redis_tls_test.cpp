// Redis over TLS (`store.redis.tls`, issue 39 item 4) against Debian's redis-server on its
// tls-port only, with certificates the test makes: decisions and the overrides go over TLS
// with a client certificate; a server the CA does not vouch for, or whose certificate names
// another host, is refused (the route's policy applies, the log says why); a server that wants
// a client certificate and gets none is retried with backoff, not in a loop; --check-config
// names a bad file. The far-store figures over TLS are in lease_test.cpp.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <thread>

#include "delay_proxy.hpp"
#include "floodgate_process.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// `config` (a redis_config with timeout 500ms) with `tls` (a YAML map) in store.redis.
std::string with_redis_tls(const std::string& config, const std::string& tls) {
  return substitute(config, "timeout: 500ms }", "timeout: 500ms, tls: " + tls + " }");
}

const std::string kPerIpRoute = R"(
  - name: ip
    match: { path_prefix: /ip }
    upstream: origin
    limits: [{ name: per-ip, algorithm: token_bucket, capacity: 3, refill_rate: 1/h, key: [ip] }]
)";

int tls_status(std::uint16_t port, const std::string& target) {
  auto r = get(port, target);
  return r ? static_cast<int>(r->result_int()) : -1;
}

// A Proxy whose log the test reads (everything at info and above), through a sink that
// the workers write and the test reads under one mutex.
struct LoggedProxy {
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<Proxy> proxy;
  explicit LoggedProxy(const std::string& yaml) {
    log = std::make_shared<spdlog::logger>("tls-redis", sink);
    log->set_level(spdlog::level::info);
    proxy = std::make_unique<Proxy>(yaml, nullptr, nullptr, log);
  }
  std::uint16_t port() const { return proxy->port(); }
  std::string lines() const {
    std::string out;
    for (const auto& line : sink->last_formatted()) out += line;
    return out;
  }
  bool logged(const std::string& needle, std::chrono::milliseconds within) const {
    return eventually([&] { return lines().find(needle) != std::string::npos; }, within);
  }
};

TEST(RedisTls, DecidesOverTlsWithAClientCertificate) {
  TlsRedis tls;
  auto& redis = tls.redis;
  Origin origin;
  LoggedProxy p(with_redis_tls(
      redis_config(0, origin.port(), redis.port(), kOpenAndClosedRoutes + kProbeRoute, "500ms"),
      tls.tls_yaml()));
  wait_enforced(p.port());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tls_status(p.port(), "/closed"), 200) << i;
  EXPECT_EQ(tls_status(p.port(), "/closed"), 429);
  // The state is in this server (reached only over TLS), and the log says how it was reached.
  EXPECT_NE(redis.cli("--scan --pattern '*closed*'"), "");
  EXPECT_TRUE(p.logged("connected (TLS)", 1s)) << p.lines();
}

TEST(RedisTls, AServerTheCaDoesNotVouchForIsRefusedAndThePolicyApplies) {
  // The server asks for no client certificate; the client does not trust the server.
  TlsRedis tls({.self_signed = true, .auth_clients = "no"});
  auto& redis = tls.redis;
  Origin origin;
  LoggedProxy p(with_redis_tls(
      redis_config(0, origin.port(), redis.port(), kOpenAndClosedRoutes, "500ms"), tls.tls_yaml()));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(tls_status(p.port(), "/closed"), 503);
  EXPECT_EQ(tls_status(p.port(), "/open"), 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // not connected: no waiting
  EXPECT_TRUE(p.logged("certificate verify failed", 5s)) << p.lines();
  EXPECT_EQ(redis.cli("--scan --pattern '*'"), "");  // nothing was ever written
}

TEST(RedisTls, TheCertificateMustNameTheServerAsAddressedOrAsServerName) {
  TlsRedis tls({.dns = {"redis.test"}, .ips = {}});  // no IP in it
  auto& redis = tls.redis;
  Origin origin;
  const auto config =
      redis_config(0, origin.port(), redis.port(), kOpenAndClosedRoutes + kProbeRoute, "500ms");
  {
    // Addressed as 127.0.0.1, which the certificate does not list.
    LoggedProxy p(with_redis_tls(config, tls.tls_yaml()));
    EXPECT_EQ(tls_status(p.port(), "/closed"), 503);
    EXPECT_TRUE(p.logged("certificate verify failed: IP address mismatch", 5s)) << p.lines();
  }
  // server_name says which name to expect (and sends it as SNI).
  LoggedProxy p(with_redis_tls(config, tls.tls_yaml(true, ", server_name: redis.test")));
  wait_enforced(p.port());
  EXPECT_EQ(tls_status(p.port(), "/closed"), 200);
}

// TLS 1.3 tells a client its certificate was wanted only after the handshake, on the first
// read: the connection then drops like any other, and attempts back off (50 ms doubling to
// 1 s) rather than repeating every 50 ms.
TEST(RedisTls, WithoutTheClientCertificateItWantsTheServerRefusesAndAttemptsBackOff) {
  TlsRedis tls;
  auto& redis = tls.redis;
  DelayProxy counter(redis.port(), 0ms);  // counts the connections
  Origin origin;
  auto config = substitute(
      with_redis_tls(redis_config(0, origin.port(), counter.port(), kOpenAndClosedRoutes, "500ms"),
                     tls.tls_yaml(false)),
      "threads: 2", "threads: 1");
  LoggedProxy p(config);
  const auto start = std::chrono::steady_clock::now();
  int refused = 0;
  while (std::chrono::steady_clock::now() - start < 3s) {
    refused += tls_status(p.port(), "/closed") == 503;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(refused, 40);  // every decision failed: nothing was ever decided
  EXPECT_EQ(redis.cli("--scan --pattern '*'"), "");
  // 3 s of 50 ms attempts would be 60; backing off to 1 s apart, about 7.
  EXPECT_LE(counter.connections(), 12u);
  EXPECT_GE(counter.connections(), 3u);
  std::printf("[ redis tls ] no client certificate: %llu connections in 3 s\n",
              static_cast<unsigned long long>(counter.connections()));
}

// The overrides' own connection (the admin API's and the poller's) speaks TLS too: an
// exemption PUT through the real binary's admin API lands in the TLS-only server and applies.
TEST(RedisTls, TheAdminApisOverridesGoOverTlsToo) {
  TlsRedis tls;
  auto& redis = tls.redis;
  Origin origin;
  const auto port = free_port(), admin = free_port();
  const auto path =
      write_temp_file("redis-tls-admin.yaml",
                      with_redis_tls(redis_config(port, origin.port(), redis.port(), kPerIpRoute,
                                                  "500ms", admin_with_test_token(admin)),
                                     tls.tls_yaml()));
  auto fg = start_floodgate(path);
  wait_serving(admin, "/healthz");
  wait_listening(port);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tls_status(port, "/ip"), 200) << i;
  EXPECT_EQ(tls_status(port, "/ip"), 429);
  auto put = put_exemption(admin, "per-ip", "ip=127.0.0.1");
  EXPECT_EQ(put.substr(0, 3), "200") << put;
  EXPECT_TRUE(eventually([&] { return tls_status(port, "/ip") == 200; }, 2s));
  EXPECT_NE(redis.cli("HKEYS 'rl:{overrides}'").find("127.0.0.1"), std::string::npos);
}

struct CheckResult {
  int exit_code;
  std::string output;
};

CheckResult check_config(const std::string& name, const std::string& yaml) {
  auto path = write_temp_file(name, yaml);
  auto out =
      command_output(floodgate_binary() + " --check-config " + path + " 2>&1; echo \" rc=$?\"", 20);
  const auto rc = out.rfind(" rc=");
  return {std::stoi(out.substr(rc + 4)), out.substr(0, rc)};
}

TEST(RedisTls, CheckConfigNamesAMissingFileAndAKeyThatIsNotTheCertificates) {
  TestPki pki;
  auto a = pki.issue("a", {"a"});
  auto b = pki.issue("b", {"b"});
  const auto base = redis_config(8080, 9000, 6380, kOpenAndClosedRoutes, "500ms");
  auto missing = check_config("redis-tls-missing.yaml",
                              with_redis_tls(base, "{ ca_file: /nonexistent/redis-ca.pem }"));
  EXPECT_NE(missing.exit_code, 0) << missing.output;
  EXPECT_NE(missing.output.find("store.redis.tls.ca_file: cannot read /nonexistent/redis-ca.pem"),
            std::string::npos)
      << missing.output;
  auto mismatch =
      check_config("redis-tls-mismatch.yaml",
                   with_redis_tls(base, "{ ca_file: " + pki.ca_file() + ", cert: " + a.cert +
                                            ", key: " + b.key + " }"));
  EXPECT_NE(mismatch.exit_code, 0) << mismatch.output;
  EXPECT_NE(mismatch.output.find("store.redis.tls.key: the key in " + b.key +
                                 " does not match the certificate in " + a.cert),
            std::string::npos)
      << mismatch.output;
  auto half = check_config("redis-tls-half.yaml", with_redis_tls(base, "{ cert: " + a.cert + " }"));
  EXPECT_NE(half.exit_code, 0);
  EXPECT_NE(half.output.find("store.redis.tls.cert: a client certificate needs both"),
            std::string::npos)
      << half.output;
  auto good =
      check_config("redis-tls-good.yaml",
                   with_redis_tls(base, "{ ca_file: " + pki.ca_file() + ", cert: " + a.cert +
                                            ", key: " + a.key + ", server_name: redis.test }"));
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_NE(good.output.find("TLS"), std::string::npos) << good.output;
}

}  // namespace
}  // namespace floodgate::testing
