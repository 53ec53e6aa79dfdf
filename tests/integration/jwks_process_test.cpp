// jwt.jwks on the real binary (issue 34 items 10 and 11): a JWKS url's secrets are shown
// neither in /config, nor in the log, nor in a config error; and a set of thousands of keys
// is cut to the bound, with a warning, at the cost of the bound's keys only.
#include <gtest/gtest.h>

#include <thread>

#include "../support/jwt_signing.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "identity_provider.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// The binary with `yaml`, its log (stderr) on the pipe: not waited for, so that a test can
// time its start.
struct Floodgate {
  std::uint16_t port = free_port();
  std::uint16_t admin = free_port();
  std::unique_ptr<ChildProcess> process;
  std::string log;  // read so far

  void start(const std::string& name, const std::string& jwt_yaml, const Origin& origin) {
    const auto path = write_temp_file(
        name,
        "server: { listen: [127.0.0.1:" + std::to_string(port) + "], threads: 1 }\n" +
            "admin: { listen: 127.0.0.1:" + std::to_string(admin) + " }\n" + jwt_yaml +
            "upstreams: { origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) +
            "\" } }\nroutes:\n  - name: api\n    match: { path_prefix: / }\n"
            "    upstream: origin\n    limits:\n      - { name: per-tenant, algorithm: "
            "fixed_window, limit: 100, window: 1h, key: [\"jwt:tenant\"] }\n");
    process = start_floodgate(path);
  }
  // The log's lines that arrive within `for_how_long`, added to `log`.
  const std::string& read_log(std::chrono::milliseconds for_how_long) {
    const auto until = std::chrono::steady_clock::now() + for_how_long;
    while (std::chrono::steady_clock::now() < until) {
      auto line = process->read_line(100ms);
      if (!line.empty()) log += line + "\n";
    }
    return log;
  }
  std::string admin_get(const std::string& target) const {
    return command_output("curl -s 'http://127.0.0.1:" + std::to_string(admin) + target + "'", 20);
  }
};

std::string jwt_yaml(const std::string& url, const TestPki& pki) {
  return "jwt:\n  algorithms: [RS256, ES256]\n  jwks: { url: \"" + url +
         "\", refresh: 1h, ca_file: \"" + pki.ca_file() + "\" }\n";
}

TEST(JwksProcess, TheUrlsSecretsAreShownNeitherInConfigNorInTheLogNorInAnError) {
  TestPki pki;
  IdentityProvider idp(pki);
  const Key key = ec_key();
  idp.publish({jwk_of(key, "k1")});
  Origin origin;
  Floodgate fg;
  fg.start("jwks-secret", jwt_yaml(idp.url() + "?api_key=SECRET-7f3a&v=2", pki), origin);
  wait_serving(fg.admin, "/healthz");
  const auto config = fg.admin_get("/config");
  EXPECT_EQ(config.find("SECRET"), std::string::npos) << config;
  EXPECT_NE(config.find("/.well-known/jwks.json?api_key=***&v=***"), std::string::npos) << config;
  // The provider goes down, and a token with an unknown kid makes floodgate fetch again: the
  // warning names the url, redacted too.
  idp.down(true);
  get(fg.port, "/x",
      "Authorization: Bearer " +
          sign("ES256", header_with_kid("ES256", "k2"), R"({"tenant":"a","exp":4102444800})", key) +
          "\r\n");
  EXPECT_TRUE(eventually([&] { return idp.hits() >= 2; }, 5s));
  const auto& log = fg.read_log(1500ms);
  EXPECT_NE(log.find("jwks: 1 key(s) from https://localhost:"), std::string::npos) << log;
  EXPECT_NE(log.find("jwks.json?api_key=***&v=*** failed: answered 503"), std::string::npos) << log;
  EXPECT_EQ(log.find("SECRET"), std::string::npos) << log;

  // A password in the url is refused, and not repeated; nor is a query's value in the error
  // for a url that is not https.
  for (const auto& [url, expected] : std::vector<std::pair<std::string, std::string>>{
           {"https://user:Hunter2x9c1e@localhost:1/jwks",
            "credentials in a url floodgate fetches are not supported"},
           {"http://localhost:1/jwks?api_key=SECRET-7f3a",
            "got \"http://localhost:1/jwks?api_key=***\""},
           {"https://us er:Hunter2x9c1e@localhost:1/jwks",
            "got \"https://***@localhost:1/jwks\""}}) {
    const auto path = write_temp_file(
        "jwks-userinfo", jwt_yaml(url, pki) +
                             "server: { listen: [127.0.0.1:0] }\nupstreams: { origin: { url: "
                             "\"http://127.0.0.1:1\" } }\nroutes:\n  - { name: api, match: { "
                             "path_prefix: / }, upstream: origin }\n");
    const auto out = command_output(
        std::string(FLOODGATE_BINARY) + " --check-config '" + path + "' 2>&1; echo \"exit $?\"",
        20);
    EXPECT_NE(out.find("exit 2"), std::string::npos) << out;
    EXPECT_NE(out.find(expected), std::string::npos) << out;
    EXPECT_EQ(out.find("Hunter2"), std::string::npos) << out;
    EXPECT_EQ(out.find("SECRET"), std::string::npos) << out;
  }
}

// 2,000 copies of one RSA key under their own kids (about 0.85 MB, under the 1 MiB a fetch
// reads): each costs about 3 ms to check, so reading all of them held the start for seconds.
// Only the first 64 are read.
TEST(JwksProcess, ALargeSetIsCutToTheBoundWithAWarningAndCostsOnlyTheBound) {
  TestPki pki;
  IdentityProvider idp(pki);
  const Key key = rsa_key();
  std::vector<std::string> jwks;
  for (int i = 0; i < 2000; ++i) jwks.push_back(jwk_of(key, "k" + std::to_string(i)));
  idp.publish(jwks);
  Origin origin;
  Floodgate fg;
  const auto started = std::chrono::steady_clock::now();
  fg.start("jwks-large", jwt_yaml(idp.url(), pki), origin);
  // The set is fetched (and parsed) before the admin listener is up.
  auto up = [&] {
    try {
      return get(fg.admin, "/healthz").has_value();
    } catch (const std::exception&) {
      return false;  // not listening yet
    }
  };
  ASSERT_TRUE(eventually(up, 30s));
  const auto start_time = std::chrono::steady_clock::now() - started;
  EXPECT_LT(start_time, 3s)
      << std::chrono::duration_cast<std::chrono::milliseconds>(start_time).count()
      << " ms to start";
  std::cout << "start with a set of 2000 RSA keys: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(start_time).count() << " ms\n";
  const auto metrics = fg.admin_get("/metrics");
  EXPECT_EQ(metric(metrics, "floodgate_jwks_keys"), 64u) << metrics;
  const auto& log = fg.read_log(500ms);
  EXPECT_NE(log.find("publishes more signature keys than the 64 read: the other 1936 are "
                     "ignored"),
            std::string::npos)
      << log;
  // A token signed by the key under a kept kid verifies; under a dropped one it does not.
  auto status = [&](const std::string& kid) {
    auto r = get(fg.port, "/x",
                 "Authorization: Bearer " +
                     sign("RS256", header_with_kid("RS256", kid),
                          R"({"tenant":"a","exp":4102444800})", key) +
                     "\r\n");
    return r ? r->result_int() : -1;
  };
  EXPECT_EQ(status("k63"), 200);
  EXPECT_NE(status("k64"), 200);
}

}  // namespace
}  // namespace floodgate::testing
