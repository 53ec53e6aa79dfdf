// What a new user ran into with the config (issue 20): warnings that are not contradictory,
// errors in file order and with their reason, routes that can never match, settings a reload
// cannot apply said as such, and /config showing what the instance runs with.
#include <gtest/gtest.h>

#include <map>

#include "admin/admin_server.hpp"
#include "floodgate/config/loader.hpp"

namespace {

using namespace floodgate::config;

EnvLookup polish_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string all_of(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) out += d.to_string() + "\n";
  return out;
}

const std::string kPolishHead =
    "server:\n  listen: 127.0.0.1:8080\n"
    "upstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n";

std::string route(const std::string& name, const std::string& match,
                  const std::string& extra = "") {
  return "  - name: " + name + "\n    match: " + match + "\n    upstream: origin\n" + extra +
         "    limits:\n      - { name: l, algorithm: fixed_window, limit: 10, window: 1m, "
         "key: [ip] }\n";
}

TEST(ConfigPolish, AnUnsetKeySecretVariableIsOneErrorNotAlsoABuiltInKeyWarning) {
  auto r =
      load_config_text(kPolishHead + "store:\n  key_secret: ${FLOODGATE_KEY_SECRET}\nroutes:\n" +
                           route("api", "{ path_prefix: / }"),
                       "f.yaml", polish_env({}));
  ASSERT_EQ(r.errors.size(), 1u) << all_of(r.errors);
  EXPECT_NE(r.errors[0].message.find("FLOODGATE_KEY_SECRET is not set"), std::string::npos);
  EXPECT_EQ(all_of(r.warnings).find("built-in key"), std::string::npos) << all_of(r.warnings);
  // Without any key_secret the warning stays.
  auto none = load_config_text(kPolishHead + "routes:\n" + route("api", "{ path_prefix: / }"),
                               "f.yaml", polish_env({}));
  EXPECT_NE(all_of(none.warnings).find("built-in key"), std::string::npos);
}

TEST(ConfigPolish, ErrorsAreListedInFileOrder) {
  // The routes are read after the store, but their error is on an earlier line.
  auto r = load_config_text(kPolishHead +
                                "routes:\n  - name: api\n    match: { path_prefix: / }\n"
                                "    upstream: nowhere\n"
                                "store:\n  backend: redis\n  redis: { address: \"nohost\" }\n",
                            "f.yaml", polish_env({}));
  ASSERT_GE(r.errors.size(), 2u) << all_of(r.errors);
  for (std::size_t i = 1; i < r.errors.size(); ++i)
    EXPECT_LE(r.errors[i - 1].line, r.errors[i].line) << all_of(r.errors);
}

TEST(ConfigPolish, AFileThatCannotBeReadSaysWhy) {
  auto r = load_config_file("/nonexistent/floodgate.yaml", polish_env({}));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(),
            "/nonexistent/floodgate.yaml:0:0: cannot read the file: No such file or directory");
}

TEST(ConfigPolish, ARouteAfterOneThatMatchesAllItsRequestsIsWarnedAbout) {
  auto r = load_config_text(kPolishHead + "routes:\n" + route("api", "{ path_prefix: /api/ }") +
                                route("all", "{ path_prefix: / }") +
                                route("login", "{ path: /login, methods: [POST] }") +
                                route("admin", "{ path_prefix: /admin/, host: a.example }") +
                                route("api-v2", "{ path_prefix: /api/v2/ }"),
                            "f.yaml", polish_env({}));
  ASSERT_TRUE(r.errors.empty()) << all_of(r.errors);
  const auto w = all_of(r.warnings);
  EXPECT_NE(w.find("routes[2]: can never match: routes[1] (\"all\") comes first"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("routes[3]: can never match"), std::string::npos) << w;
  EXPECT_NE(w.find("routes[4]: can never match: routes[0] (\"api\")"), std::string::npos) << w;
  // A route that only a narrower one precedes is fine.
  auto ok = load_config_text(kPolishHead + "routes:\n" + route("login", "{ path: /login }") +
                                 route("host", "{ path_prefix: /, host: a.example }") +
                                 route("post", "{ path_prefix: /, methods: [POST] }") +
                                 route("all", "{ path_prefix: / }"),
                             "f.yaml", polish_env({}));
  EXPECT_EQ(all_of(ok.warnings).find("can never match"), std::string::npos) << all_of(ok.warnings);
}

TEST(ConfigPolish, FailClosedOnTheMemoryBackendIsWarnedAbout) {
  auto r =
      load_config_text(kPolishHead + "store: { key_secret: 0123456789abcdef }\nroutes:\n" +
                           route("api", "{ path_prefix: / }", "    on_store_error: fail_closed\n"),
                       "f.yaml", polish_env({}));
  ASSERT_TRUE(r.errors.empty()) << all_of(r.errors);
  EXPECT_NE(all_of(r.warnings)
                .find("routes[0].on_store_error: fail_closed has no effect on the "
                      "memory backend"),
            std::string::npos)
      << all_of(r.warnings);
}

TEST(ConfigPolish, AReloadSaysWhatOnlyARestartApplies) {
  auto load = [](const std::string& listen, const std::string& store) {
    auto r = load_config_text("server:\n  listen: " + listen +
                                  "\nupstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n" +
                                  store + "routes:\n" + route("api", "{ path_prefix: / }"),
                              "f.yaml", polish_env({}));
    EXPECT_TRUE(r.errors.empty()) << all_of(r.errors);
    return r.config;
  };
  auto before = load("127.0.0.1:8080", "");
  EXPECT_TRUE(restart_only_changes(*before, *before).empty());
  auto moved = load("127.0.0.1:8081", "");
  auto changes = restart_only_changes(*before, *moved);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0],
            "server.listen: 127.0.0.1:8081 (http1) (was 127.0.0.1:8080 (http1)) takes effect only "
            "after a restart; still 127.0.0.1:8080 (http1)");
  auto redis = load("127.0.0.1:8080", "store: { backend: redis, redis: { address: r:6379 } }\n");
  changes = restart_only_changes(*before, *redis);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("store: redis r:6379, timeout 45ms (was memory)"), std::string::npos)
      << changes[0];
}

// Redis TLS is read at start like the address, and so is the per-decision timeout (each
// worker's store is built with it): a reload that changes them says so, and what runs (and
// /config shows) keeps the started ones. An access log path changed alone is kept too.
TEST(ConfigPolish, AReloadKeepsTheStartedRedisTlsTimeoutAndAccessLog) {
  auto load = [](const std::string& redis, const std::string& log) {
    auto r = load_config_text(
        "server:\n  listen: 127.0.0.1:8080\nupstreams:\n  origin: { url: "
        "\"http://127.0.0.1:9000\" }\nstore: { backend: redis, redis: { address: r:6379" +
            redis + " } }\n" + log + "routes:\n" + route("api", "{ path_prefix: / }"),
        "f.yaml", polish_env({}));
    EXPECT_TRUE(r.errors.empty()) << all_of(r.errors);
    return r.config;
  };
  auto started = load("", "");
  auto tls = load(", timeout: 80ms, tls: { server_name: redis.internal }", "");
  ASSERT_TRUE(tls->store.redis.tls && tls->store.redis.tls->context);
  auto changes = restart_only_changes(*started, *tls);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("store: redis r:6379, timeout 80ms over TLS (ca_file system, "
                            "server_name redis.internal) (was redis r:6379, timeout 45ms)"),
            std::string::npos)
      << changes[0];
  auto running = as_running(*started, tls);
  EXPECT_FALSE(running->store.redis.tls);
  EXPECT_EQ(running->store.redis.timeout, std::chrono::milliseconds(45));
  EXPECT_EQ(floodgate::admin::redacted_config_json(*running).find("\"tls\":{\"ca_file\""),
            std::string::npos);
  EXPECT_NE(floodgate::admin::redacted_config_json(*tls).find(
                R"("tls":{"ca_file":"","cert":"","key":"","server_name":"redis.internal"})"),
            std::string::npos);
  auto logged = load("", "log: { access_log: { path: /var/log/fg-access.log } }\n");
  EXPECT_EQ(as_running(*started, logged)->log.access_log_path, "");
}

TEST(ConfigPolish, ConfigJsonShowsClientIpTimeoutsAndJwtAndNoRedisForTheMemoryBackend) {
  auto r = load_config_text(
      "server:\n  listen: 127.0.0.1:8080\n"
      "  client_ip: { header: X-Real-IP, trusted_proxies: [10.0.0.0/8] }\n"
      "  timeouts: { header_read: 5s }\n"
      "upstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n"
      "store: { key_secret: 0123456789abcdef }\n"
      "jwt: { algorithms: [HS256], hs256_secret: a-very-secret-jwt-key, issuer: me }\n"
      "routes:\n" +
          route("api", "{ path_prefix: / }"),
      "f.yaml", polish_env({}));
  ASSERT_TRUE(r.errors.empty()) << all_of(r.errors);
  const auto json = floodgate::admin::redacted_config_json(*r.config);
  EXPECT_NE(json.find(R"("client_ip":{"header":"X-Real-IP","trusted_proxies":["10.0.0.0/8"])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("timeouts":{"header_read":"5s","idle":"1m","drain":"15s"})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("algorithms":["HS256"])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("leeway":"30s")"), std::string::npos) << json;
  EXPECT_EQ(json.find("a-very-secret-jwt-key"), std::string::npos) << json;
  EXPECT_EQ(json.find("6379"), std::string::npos) << "no Redis for the memory backend: " << json;
  EXPECT_NE(json.find(R"("max_keys":1000000)"), std::string::npos) << json;
}

}  // namespace
