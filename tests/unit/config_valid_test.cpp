// Configs that must load: the shipped ones under config/, and what the loader makes of a full
// config such as the one in SPEC.md.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "admin/admin_server.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/tls/contexts.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace fs = std::filesystem;
using namespace floodgate::config;
using namespace std::chrono_literals;

namespace {

// Any ${VAR} resolves, so that a shipped config is judged on its structure, not on the
// environment of the machine running the tests.
// Variables a shipped config gives a `:-default` for are left unset, so the default is used.
EnvLookup any_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    static const std::set<std::string> defaulted = {"FLOODGATE_LISTEN", "FLOODGATE_ADMIN",
                                                    "ORIGIN_URL", "REDIS_ADDRESS", "API_LIMIT",
                                                    "FLOODGATE_POP",
                                                    // two tokens: one value for both is an error
                                                    "ONCALL_TOKEN", "DEPLOY_TOKEN"};
    if (defaulted.count(name)) return std::nullopt;
    return "test-value-0123456789";
  };
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string errors_of(const LoadResult& r) {
  std::string out;
  for (const auto& d : r.errors) out += "\n  " + d.to_string();
  return out;
}

// ---------------------------------------------------------------- shipped configs

std::vector<std::string> shipped_configs() {
  std::vector<std::string> out;
  for (const char* sub : {"config", "config/examples"}) {
    fs::path dir = fs::path(FLOODGATE_SOURCE_DIR) / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() &&
          (e.path().extension() == ".yaml" || e.path().extension() == ".yml"))
        out.push_back(fs::relative(e.path(), FLOODGATE_SOURCE_DIR).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class ShippedConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedConfig, LoadsWithoutErrors) {
  auto path = (fs::path(FLOODGATE_SOURCE_DIR) / GetParam()).string();
  auto r = load_config_file(path, any_env());
  EXPECT_TRUE(r.errors.empty()) << GetParam() << ":" << errors_of(r);
  ASSERT_NE(r.config, nullptr);
  EXPECT_EQ(r.config->source, path);
  if (r.config->feed) return;  // config_source: what it serves is fetched
  // Something to serve: HTTP listeners, or only Envoy's rate limit service.
  EXPECT_FALSE(r.config->server.listen.empty() && r.config->rls.listen.empty());
  EXPECT_FALSE(r.config->routes.empty());
}

std::string shipped_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string out;
  for (char c : info.param) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// config/ may hold no examples yet; the suite then has nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ShippedConfig);
INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfig, ::testing::ValuesIn(shipped_configs()),
                         shipped_name);

TEST(LoadConfigFile, MissingFileIsAnError) {
  auto r = load_config_file("/nonexistent/floodgate.yaml", any_env());
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, "/nonexistent/floodgate.yaml");
}

// ---------------------------------------------------------------- the SPEC.md example

// Public keys for the jwt section: the loader reads and checks them (RSA >= 2048 bits, EC P-256).
constexpr const char* kRsaPublicKey =
    "-----BEGIN PUBLIC KEY-----\n"
    "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAq8yI4plt0sQtftA3oLmb\n"
    "8T9lrTSnazVX9/Mze85axI+XRPicMbq4FxDZAiri0UNCU4J2Bdj8I0a+v05OohTy\n"
    "xEPiMBZit0JBFfijtM9mq75+yfHK6avpajGH8E0E4YUTDSX/byL3xweh/UddR+t3\n"
    "Sbf/N9OP0VwACcymcCma5kCQL3LEnY9OuTk2ngQFg7zbWkmn2O3Lc0s8JyFNEJQP\n"
    "4v1Tuajy6Hg+Zyvr3FGmGdgSCal8Ff7g19DClyugrLWT96icsdHZCoNlSYh/EP+X\n"
    "ReZTLyqdqCJ7ijVVUMLCVBMXE+r52dnPAvEQ5BafOtYVUG3Z+ZbGY81KsD5SCPP7\n"
    "TQIDAQAB\n"
    "-----END PUBLIC KEY-----\n";
constexpr const char* kEcPublicKey =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEh6jV0VypP68oanoadjSMEPG45Sb2\n"
    "nzltKr6XPr6RXFZfnLrl8B2RIvVsWcYdSRAIy9DkKzvGJ+3PfwLNafTJLg==\n"
    "-----END PUBLIC KEY-----\n";

// Writes `text` to a file under the test temp dir and returns its path.
// Unique per process: ctest runs tests of this binary in parallel processes, and two of them
// rewriting one shared file let a reader see it half written.
std::string temp_file(const std::string& name, const std::string& text) {
  auto path = (fs::path(::testing::TempDir()) / (std::to_string(::getpid()) + "-" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

constexpr const char* kSpecExample = R"yaml(
server:
  listen:
    - 0.0.0.0:8080
    - address: 0.0.0.0:8443
      tls:
        certificates:
          - { cert: "${TLS_DIR}/shop.pem", key: "${TLS_DIR}/shop.key" }
          - { cert: "${TLS_DIR}/api.pem",  key: "${TLS_DIR}/api.key" }
        min_version: "1.3"
    - "[::]:8080"
  threads: 0
  pop: fra1
  client_ip:
    header: CF-Connecting-IP
    trusted_proxies: [127.0.0.1/32, 10.0.0.0/8, "2001:db8::/32"]
    ipv6_prefix: 56
  timeouts: { header_read: 10s, idle: 1m, drain: 1500ms }
  max_header_bytes: 16KiB
  max_body_bytes: 10MiB

admin:
  listen: 127.0.0.1:9901

log: { level: warn, format: json, access_log: true }

upstreams:
  origin:
    url: http://127.0.0.1:9000
    connect_timeout: 1s
    response_timeout: 30s
    max_idle_connections: 128
  secure-origin:
    url: https://Origin.example
    ca_file: "${TLS_DIR}/demo-ca.pem"
  v6:
    url: "http://[::1]:9001"

store:
  backend: redis
  redis:
    address: 127.0.0.1:6379
    nodes: [127.0.0.1:7000, "[::1]:7001"]
    username: ""
    password: ${REDIS_PASSWORD}
    timeout: 45ms
  key_prefix: rl
  key_secret: ${FLOODGATE_KEY_SECRET}
  instances: 3

jwt:
  header: Authorization
  algorithms: [HS256, RS256, ES256, HS256]
  hs256_secret: ${JWT_SECRET}
  public_keys: ["${JWT_RSA_KEY}", "${JWT_EC_KEY}"]
  issuer: https://issuer.example
  audience: api
  leeway: 30s

routes:
  - name: checkout
    match: { path_prefix: /api/checkout, methods: [post, Get], host: Shop.Example }
    upstream: origin
    on_store_error: fail_closed
    limits:
      - name: ip-burst
        algorithm: token_bucket
        capacity: 20
        refill_rate: 10/s
        key: [ip]
      - name: ip-minute
        algorithm: sliding_window
        limit: 100
        window: 60s
        key: [ip, "header:X-Api-Key", "query:page", method]
  - name: partners
    match: { path_prefix: /api/ }
    upstream: secure-origin
    on_store_error: local
    limits:
      - name: tenant
        algorithm: sliding_window
        limit: 1000
        window: 60s
        key: [jwt:tenant]
        on_missing_key: shared
        overrides:
          by: jwt:tier
          values: { gold: { limit: 10000 }, free: { limit: 100, window: 1h } }
      - name: llm-tokens
        algorithm: token_bucket
        capacity: 200000
        refill_rate: 2000/s
        key: [jwt:tenant]
        cost: { from: header:X-Estimated-Tokens, default: 1000, max: 100000 }
        settle: response_header:X-Tokens-Used
        mode: shadow
      - name: slow
        algorithm: gcra
        capacity: 5
        refill_rate: 30/m
        key: [route]
      - name: inflight
        algorithm: concurrency
        limit: 8
        key: [ip]
  - name: exact
    match: { path: /healthz, host: "${EDGE_HOST:-Edge.Example}" }
    upstream: origin
    limits:
      - name: fw
        algorithm: fixed_window
        limit: 50
        window: 10s
        key: [path]
        cost: 5
  - name: default
    match: { path_prefix: / }
    upstream: origin
)yaml";

// Certificates are read at load: the example points at the demo ones in the repository.
const std::string kTlsDir = std::string(FLOODGATE_SOURCE_DIR) + "/config/examples/tls";

class SpecExample : public ::testing::Test {
 protected:
  void SetUp() override {
    rsa_key = temp_file("floodgate-test-rsa.pub", kRsaPublicKey);
    ec_key = temp_file("floodgate-test-ec.pub", kEcPublicKey);
    result = load_config_text(kSpecExample, "spec.yaml",
                              env_of({{"REDIS_PASSWORD", "redis-pw"},
                                      {"FLOODGATE_KEY_SECRET", "0123456789abcdef-secret"},
                                      {"JWT_SECRET", "jwt-secret"},
                                      {"JWT_RSA_KEY", rsa_key},
                                      {"JWT_EC_KEY", ec_key},
                                      {"TLS_DIR", kTlsDir}}));
    ASSERT_TRUE(result.errors.empty()) << errors_of(result);
    ASSERT_NE(result.config, nullptr);
    c = result.config.get();
  }
  const Route& route(const std::string& name) {
    auto it = std::find_if(c->routes.begin(), c->routes.end(),
                           [&](const Route& r) { return r.name == name; });
    if (it == c->routes.end()) {
      ADD_FAILURE() << "no route " << name;
      static const Route none;
      return none;
    }
    return *it;
  }
  std::string rsa_key, ec_key;
  LoadResult result;
  const Config* c = nullptr;
};

TEST_F(SpecExample, NoWarningsWhenKeySecretIsSet) {
  EXPECT_TRUE(result.warnings.empty());
  EXPECT_EQ(c->source, "spec.yaml");
}

TEST_F(SpecExample, Listeners) {
  ASSERT_EQ(c->server.listen.size(), 3u);
  const auto& plain = c->server.listen[0];
  EXPECT_EQ(plain.address.host, "0.0.0.0");
  EXPECT_EQ(plain.address.port, 8080);
  EXPECT_FALSE(plain.tls.has_value());

  const auto& tls = c->server.listen[1];
  EXPECT_EQ(tls.address.port, 8443);
  ASSERT_TRUE(tls.tls.has_value());
  ASSERT_EQ(tls.tls->certificates.size(), 2u);
  EXPECT_EQ(tls.tls->certificates[0].cert, kTlsDir + "/shop.pem");  // the default one
  EXPECT_EQ(tls.tls->certificates[0].key, kTlsDir + "/shop.key");
  EXPECT_EQ(tls.tls->certificates[1].cert, kTlsDir + "/api.pem");
  ASSERT_NE(tls.tls->contexts, nullptr);  // loaded, and SNI picks by name
  EXPECT_EQ(tls.tls->contexts->select("api.example"), 1u);
  EXPECT_EQ(tls.tls->contexts->select("API.Example."), 1u);
  EXPECT_EQ(tls.tls->contexts->select("x.api.example"), 1u);    // *.api.example
  EXPECT_EQ(tls.tls->contexts->select("a.b.api.example"), 0u);  // a wildcard is one label
  EXPECT_EQ(tls.tls->contexts->select("shop.example"), 0u);
  EXPECT_EQ(tls.tls->contexts->select("unknown.example"), 0u);  // the first is the default
  EXPECT_EQ(tls.tls->min_version, "1.3");

  const auto& v6 = c->server.listen[2];
  EXPECT_EQ(v6.address.host, "::");
  EXPECT_EQ(v6.address.port, 8080);
  EXPECT_EQ(v6.address.to_string(), "[::]:8080");
}

TEST_F(SpecExample, ServerScalars) {
  EXPECT_EQ(c->server.threads, 0);
  EXPECT_EQ(c->server.pop, "fra1");
  EXPECT_EQ(c->server.timeouts.header_read, 10s);
  EXPECT_EQ(c->server.timeouts.idle, 60s);
  EXPECT_EQ(c->server.timeouts.drain, 1500ms);
  EXPECT_EQ(c->server.max_header_bytes, 16u * 1024);
  EXPECT_EQ(c->server.max_body_bytes, 10u * 1024 * 1024);
  ASSERT_TRUE(c->admin.listen.has_value());
  EXPECT_EQ(c->admin.listen->to_string(), "127.0.0.1:9901");
  EXPECT_EQ(c->log.level, LogLevel::warn);
  EXPECT_EQ(c->log.format, LogFormat::json);
  EXPECT_TRUE(c->log.access_log);
}

TEST_F(SpecExample, ClientIpAndTrustedProxies) {
  const auto& ci = c->server.client_ip;
  EXPECT_EQ(ci.header, "CF-Connecting-IP");
  EXPECT_EQ(ci.ipv6_prefix, 56);
  ASSERT_EQ(ci.trusted_proxies.size(), 3u);
  auto trusted = [&](const char* ip) {
    auto addr = parse_ip(ip);
    EXPECT_TRUE(addr.has_value()) << ip;
    return std::any_of(ci.trusted_proxies.begin(), ci.trusted_proxies.end(),
                       [&](const Cidr& cidr) { return cidr.contains(*addr); });
  };
  EXPECT_TRUE(trusted("127.0.0.1"));
  EXPECT_FALSE(trusted("127.0.0.2"));
  EXPECT_TRUE(trusted("10.255.0.1"));
  EXPECT_FALSE(trusted("11.0.0.1"));
  EXPECT_TRUE(trusted("2001:db8:ffff::1"));
  EXPECT_FALSE(trusted("2001:db9::1"));
  EXPECT_TRUE(trusted("::ffff:10.1.2.3"));  // IPv4-mapped is the IPv4 address
}

TEST_F(SpecExample, Upstreams) {
  ASSERT_EQ(c->upstreams.size(), 3u);
  auto find = [&](const std::string& name) -> const UpstreamServer& {
    auto it = std::find_if(c->upstreams.begin(), c->upstreams.end(),
                           [&](const Upstream& u) { return u.name == name; });
    if (it == c->upstreams.end() || it->servers.size() != 1) {
      ADD_FAILURE() << "no upstream " << name << " of one server";
      static const UpstreamServer none;
      return none;
    }
    return it->servers.front();
  };
  const auto& origin = find("origin");
  EXPECT_EQ(origin.url, "http://127.0.0.1:9000");
  EXPECT_FALSE(origin.tls);
  EXPECT_EQ(origin.host, "127.0.0.1");
  EXPECT_EQ(origin.port, 9000);
  EXPECT_EQ(origin.connect_timeout, 1s);
  EXPECT_EQ(origin.response_timeout, 30s);
  EXPECT_EQ(origin.max_idle_connections, 128u);

  const auto& secure = find("secure-origin");
  EXPECT_TRUE(secure.tls);
  EXPECT_EQ(secure.port, 443);  // the https default
  EXPECT_EQ(secure.ca_file, kTlsDir + "/demo-ca.pem");
  EXPECT_NE(secure.tls_context, nullptr);
  EXPECT_EQ(secure.connect_timeout, 1s);  // defaults
  EXPECT_EQ(secure.response_timeout, 30s);

  const auto& v6 = find("v6");
  EXPECT_EQ(v6.host, "::1");  // without brackets
  EXPECT_EQ(v6.port, 9001);
}

TEST_F(SpecExample, StoreAndEnvironmentExpansion) {
  const auto& s = c->store;
  EXPECT_EQ(s.backend, StoreBackend::redis);
  EXPECT_EQ(s.redis.address.to_string(), "127.0.0.1:6379");
  ASSERT_EQ(s.redis.nodes.size(), 2u);
  EXPECT_EQ(s.redis.nodes[0].port, 7000);
  EXPECT_EQ(s.redis.nodes[1].host, "::1");
  EXPECT_EQ(s.redis.password, "redis-pw");
  EXPECT_EQ(s.redis.username, "");
  EXPECT_EQ(s.redis.timeout, 45ms);
  EXPECT_EQ(s.key_prefix, "rl");
  EXPECT_EQ(s.key_secret, "0123456789abcdef-secret");
  EXPECT_EQ(s.instances, 3);
}

TEST_F(SpecExample, Jwt) {
  ASSERT_TRUE(c->jwt.has_value());
  const auto& j = *c->jwt;
  EXPECT_EQ(j.header, "Authorization");
  // order kept, duplicates dropped
  EXPECT_EQ(j.algorithms, (std::vector<JwtAlgorithm>{JwtAlgorithm::hs256, JwtAlgorithm::rs256,
                                                     JwtAlgorithm::es256}));
  EXPECT_EQ(j.hs256_secret, "jwt-secret");
  EXPECT_EQ(j.public_keys, (std::vector<std::string>{rsa_key, ec_key}));
  EXPECT_EQ(j.issuer, "https://issuer.example");
  EXPECT_EQ(j.audience, "api");
  EXPECT_EQ(j.leeway, 30s);
}

TEST_F(SpecExample, RoutesKeepTheirOrderAndResolveUpstreams) {
  ASSERT_EQ(c->routes.size(), 4u);
  EXPECT_EQ(c->routes[0].name, "checkout");
  EXPECT_EQ(c->routes[1].name, "partners");
  EXPECT_EQ(c->routes[2].name, "exact");
  EXPECT_EQ(c->routes[3].name, "default");
  EXPECT_EQ(c->upstream_of(c->routes[0]).name, "origin");
  EXPECT_EQ(c->upstream_of(c->routes[1]).name, "secure-origin");
  EXPECT_EQ(c->routes[0].on_store_error, OnStoreError::fail_closed);
  EXPECT_EQ(c->routes[1].on_store_error, OnStoreError::local);
  EXPECT_EQ(c->routes[3].on_store_error, OnStoreError::fail_open);  // default
  EXPECT_TRUE(c->routes[3].limits.empty());
}

TEST_F(SpecExample, RouteMatchIsNormalised) {
  const auto& m = route("checkout").match;
  EXPECT_EQ(m.path_prefix, "/api/checkout");
  EXPECT_EQ(m.path, "");
  EXPECT_EQ(m.methods, (std::vector<std::string>{"POST", "GET"}));
  EXPECT_EQ(m.host, "shop.example");

  const auto& exact = route("exact").match;
  EXPECT_EQ(exact.path, "/healthz");
  EXPECT_EQ(exact.path_prefix, "");
  EXPECT_EQ(exact.host, "edge.example");  // ${EDGE_HOST:-...} fell back, then lower-cased
  EXPECT_TRUE(exact.methods.empty());
}

TEST_F(SpecExample, BucketAndWindowLimits) {
  const auto& limits = route("checkout").limits;
  ASSERT_EQ(limits.size(), 2u);
  const auto& burst = limits[0];
  EXPECT_EQ(burst.name, "ip-burst");
  EXPECT_EQ(burst.algorithm, Algorithm::token_bucket);
  EXPECT_EQ(burst.params.capacity, 20);
  EXPECT_DOUBLE_EQ(burst.params.refill_rate.per_second, 10.0);
  EXPECT_EQ(burst.params.refill_rate.text, "10/s");
  EXPECT_EQ(burst.cost.fixed, 1);
  EXPECT_EQ(burst.cost.max, 20);  // defaults to the capacity
  EXPECT_TRUE(burst.cost.from_header.empty());
  EXPECT_EQ(burst.on_missing_key, OnMissingKey::reject);  // the default
  EXPECT_EQ(burst.mode, LimitMode::enforce);
  ASSERT_EQ(burst.key.size(), 1u);
  EXPECT_EQ(burst.key[0].kind, KeyPart::Kind::ip);

  const auto& minute = limits[1];
  EXPECT_EQ(minute.algorithm, Algorithm::sliding_window);
  EXPECT_EQ(minute.params.limit, 100);
  EXPECT_EQ(minute.params.window, 60s);
  EXPECT_EQ(minute.cost.max, 100);  // defaults to the limit
  ASSERT_EQ(minute.key.size(), 4u);
  EXPECT_EQ(minute.key[1].kind, KeyPart::Kind::header);
  EXPECT_EQ(minute.key[1].name, "x-api-key");  // header names are case-insensitive
  EXPECT_EQ(minute.key[1].text, "header:X-Api-Key");
  EXPECT_EQ(minute.key[2].kind, KeyPart::Kind::query);
  EXPECT_EQ(minute.key[2].name, "page");
  EXPECT_EQ(minute.key[3].kind, KeyPart::Kind::method);
}

TEST_F(SpecExample, OverrideTiers) {
  const auto& tenant = route("partners").limits.at(0);
  EXPECT_EQ(tenant.on_missing_key, OnMissingKey::shared);
  ASSERT_EQ(tenant.key.size(), 1u);
  EXPECT_EQ(tenant.key[0].kind, KeyPart::Kind::jwt);
  EXPECT_EQ(tenant.key[0].name, "tenant");
  ASSERT_TRUE(tenant.overrides.has_value());
  EXPECT_EQ(tenant.overrides->by.kind, KeyPart::Kind::jwt);
  EXPECT_EQ(tenant.overrides->by.name, "tier");
  ASSERT_EQ(tenant.overrides->values.size(), 2u);
  const auto& gold = tenant.overrides->values.at("gold");
  EXPECT_EQ(gold.limit, 10000);
  EXPECT_EQ(gold.window, 60s);  // not overridden: inherited from the limit
  const auto& free_tier = tenant.overrides->values.at("free");
  EXPECT_EQ(free_tier.limit, 100);
  EXPECT_EQ(free_tier.window, 1h);
  // No cost given: max defaults to the smallest ceiling among the limit and its tiers, so
  // that no tier can be asked for more than it could ever grant.
  EXPECT_EQ(tenant.cost.max, 100);
}

TEST_F(SpecExample, CostSettleAndShadow) {
  const auto& llm = route("partners").limits.at(1);
  EXPECT_EQ(llm.name, "llm-tokens");
  EXPECT_EQ(llm.params.capacity, 200000);
  EXPECT_DOUBLE_EQ(llm.params.refill_rate.per_second, 2000.0);
  EXPECT_EQ(llm.cost.from_header, "X-Estimated-Tokens");
  EXPECT_EQ(llm.cost.fixed, 1000);
  EXPECT_EQ(llm.cost.max, 100000);
  EXPECT_EQ(llm.settle_header, "X-Tokens-Used");
  EXPECT_EQ(llm.mode, LimitMode::shadow);

  const auto& slow = route("partners").limits.at(2);
  EXPECT_EQ(slow.algorithm, Algorithm::gcra);
  EXPECT_DOUBLE_EQ(slow.params.refill_rate.per_second, 0.5);  // 30/m
  EXPECT_EQ(slow.key.at(0).kind, KeyPart::Kind::route);

  const auto& inflight = route("partners").limits.at(3);
  EXPECT_EQ(inflight.algorithm, Algorithm::concurrency);
  EXPECT_EQ(inflight.params.limit, 8);

  const auto& fw = route("exact").limits.at(0);
  EXPECT_EQ(fw.algorithm, Algorithm::fixed_window);
  EXPECT_EQ(fw.params.window, 10s);
  EXPECT_EQ(fw.cost.fixed, 5);  // a scalar cost is a fixed cost
  EXPECT_EQ(fw.cost.max, 50);
  EXPECT_EQ(fw.key.at(0).kind, KeyPart::Kind::path);
}

// ---------------------------------------------------------------- smaller cases

constexpr const char* kMinimal = R"yaml(
server:
  listen: 0.0.0.0:8080
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - name: default
    match: { path_prefix: / }
    upstream: origin
)yaml";

TEST(LoadConfig, MinimalConfigGetsTheDocumentedDefaults) {
  auto r = load_config_text(kMinimal, "min.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_NE(r.config, nullptr);
  const auto& c = *r.config;
  ASSERT_EQ(c.server.listen.size(), 1u);  // a single scalar is one listener
  EXPECT_EQ(c.server.listen[0].address.port, 8080);
  EXPECT_EQ(c.server.threads, 0);
  EXPECT_EQ(c.server.client_ip.ipv6_prefix, 64);
  EXPECT_EQ(c.server.timeouts.header_read, 10s);
  EXPECT_EQ(c.server.timeouts.idle, 60s);
  EXPECT_EQ(c.server.timeouts.drain, 15s);
  EXPECT_EQ(c.server.max_header_bytes, 16u * 1024);
  EXPECT_EQ(c.server.max_body_bytes, 10u * 1024 * 1024);
  EXPECT_EQ(c.server.max_connections, 10'000);
  EXPECT_EQ(c.store.backend, StoreBackend::memory);
  EXPECT_EQ(c.store.instances, 1);
  EXPECT_FALSE(c.jwt.has_value());
  EXPECT_FALSE(c.admin.listen.has_value());
  EXPECT_EQ(c.upstreams.at(0).servers.at(0).port, 9000);
  EXPECT_TRUE(c.routes.at(0).limits.empty());
  // No limits, so nothing is hashed: a missing key_secret is not worth a warning.
  EXPECT_TRUE(r.warnings.empty());
}

TEST(LoadConfig, MaxConnectionsZeroMeansNoLimit) {
  std::string text = kMinimal;
  text.replace(text.find("upstreams:"), 0, "  max_connections: 0\n");
  auto r = load_config_text(text, "max.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_EQ(r.config->server.max_connections, 0);
  EXPECT_NE(summarize(*r.config).find("max_connections: no limit"), std::string::npos);
}

TEST(LoadConfig, MissingKeySecretIsAWarningWhenLimitsHashClients) {
  std::string yaml =
      std::string(kMinimal) +
      "    limits:\n"
      "      - { name: l, algorithm: fixed_window, limit: 5, window: 1s, key: [ip] }\n";
  auto r = load_config_text(yaml, "w.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_NE(r.config, nullptr);  // a warning does not refuse the config
  ASSERT_EQ(r.config->routes.at(0).limits.size(), 1u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].message.find("key_secret"), std::string::npos);
}

std::string with_pop(const std::string& pop) {
  return "server:\n  listen: 0.0.0.0:8080\n  pop: \"" + pop +
         "\"\nupstreams:\n  origin: { url: \"http://127.0.0.1:9000\" }\n"
         "routes:\n  - name: default\n    match: { path_prefix: / }\n    upstream: origin\n";
}

std::string pop_of(const std::string& pop, const EnvLookup& env) {
  auto r = load_config_text(with_pop(pop), "pop.yaml", env);
  EXPECT_TRUE(r.errors.empty()) << errors_of(r);
  return r.config ? r.config->server.pop : "<error>";
}

TEST(LoadConfig, EnvironmentVariables) {
  auto env = env_of({{"POP", "ams2"}, {"EMPTY", ""}, {"A", "x"}, {"B", "y"}});
  EXPECT_EQ(pop_of("${POP}", env), "ams2");
  EXPECT_EQ(pop_of("${POP:-fra1}", env), "ams2");          // set: the default is not used
  EXPECT_EQ(pop_of("${UNSET:-fra1}", env), "fra1");        // unset: the default
  EXPECT_EQ(pop_of("${EMPTY:-fra1}", env), "fra1");        // empty counts as unset with :-
  EXPECT_EQ(pop_of("pop-${A}-${B}.1", env), "pop-x-y.1");  // several, inside text
  EXPECT_EQ(pop_of("plain", env), "plain");

  auto r = load_config_text(with_pop("${UNSET}"), "pop.yaml", env);
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("UNSET is not set"), std::string::npos);

  r = load_config_text(with_pop("${POP"), "pop.yaml", env);
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("unterminated"), std::string::npos);
}

TEST(LoadConfig, EnvironmentVariableInRoutePath) {
  // The "must start with /" check must look at the expanded value, not the raw text.
  std::string yaml = R"yaml(
server:
  listen: 0.0.0.0:8080
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - name: api
    match: { path_prefix: "${API_PREFIX:-/api/}" }
    upstream: origin
  - name: exact
    match: { path: "${HEALTH_PATH}" }
    upstream: origin
)yaml";
  auto r = load_config_text(yaml, "env-path.yaml", env_of({{"HEALTH_PATH", "/healthz"}}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_EQ(r.config->routes[0].match.path_prefix, "/api/");
  EXPECT_EQ(r.config->routes[1].match.path, "/healthz");
}

TEST(LoadConfig, ShortKeySecretIsOnlyAWarning) {
  std::string yaml = std::string(kMinimal) + "store:\n  key_secret: short\n";
  auto r = load_config_text(yaml, "s.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_NE(r.config, nullptr);
  EXPECT_EQ(r.config->store.key_secret, "short");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].message.find("shorter than 16 bytes"), std::string::npos);
}

TEST(LoadConfig, EveryErrorIsReportedNotOnlyTheFirst) {
  std::string yaml = R"yaml(
server:
  listen: nowhere
  threads: many
upstreams:
  origin: { url: "gopher://x" }
routes: []
)yaml";
  auto r = load_config_text(yaml, "many.yaml", env_of({}));
  EXPECT_EQ(r.config, nullptr);
  EXPECT_EQ(r.errors.size(), 4u) << errors_of(r);
}

TEST(LoadConfig, TlsKeyThatDoesNotMatchItsCertificateIsAnErrorAtTheKey) {
  std::string yaml = R"yaml(
server:
  listen:
    - address: 127.0.0.1:8443
      tls:
        certificates:
          - { cert: "${TLS_DIR}/shop.pem", key: "${TLS_DIR}/api.key" }
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - { name: all, match: { path_prefix: / }, upstream: origin }
)yaml";
  auto r = load_config_text(yaml, "mismatch.yaml", env_of({{"TLS_DIR", kTlsDir}}));
  EXPECT_EQ(r.config, nullptr);
  ASSERT_EQ(r.errors.size(), 1u) << errors_of(r);
  EXPECT_EQ(r.errors[0].line, 7);
  EXPECT_EQ(r.errors[0].column, 49);  // the key's value
  EXPECT_NE(r.errors[0].message.find("api.key does not match the certificate in"),
            std::string::npos)
      << r.errors[0].message;
}

TEST(LoadConfig, ExpiredTlsCertificateIsOnlyAWarning) {
  // Generated by the test: an EC key and a certificate whose validity ended yesterday.
  auto dir = fs::path(::testing::TempDir()) / ("expired-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::unique_ptr<EVP_PKEY, void (*)(EVP_PKEY*)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  std::unique_ptr<X509, void (*)(X509*)> cert(X509_new(), &X509_free);
  ASSERT_TRUE(key && cert);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -10L * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), -86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("old.example"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key.get());
  ASSERT_GT(X509_sign(cert.get(), key.get(), EVP_sha256()), 0);
  auto write = [&](const std::string& name, auto&& writer) {
    std::unique_ptr<BIO, int (*)(BIO*)> bio(BIO_new_file((dir / name).c_str(), "w"), &BIO_free);
    ASSERT_TRUE(bio && writer(bio.get()));
  };
  write("old.pem", [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()) == 1; });
  write("old.key", [&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  });
  std::string yaml = R"yaml(
server:
  listen:
    - address: 127.0.0.1:8443
      tls:
        certificates: [{ cert: "${DIR}/old.pem", key: "${DIR}/old.key" }]
upstreams:
  origin: { url: "http://127.0.0.1:9000" }
routes:
  - { name: all, match: { path_prefix: / }, upstream: origin }
)yaml";
  auto r = load_config_text(yaml, "old.yaml", env_of({{"DIR", dir.string()}}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].message.find("expired on"), std::string::npos) << r.warnings[0].message;
  fs::remove_all(dir);
}

// ---------------------------------------------------------------- request path hygiene

TEST(LoadConfig, AllowEncodedSlashesIsPerRouteAndOffByDefault) {
  std::string yaml = std::string(kMinimal) +
                     "  - name: objects\n"
                     "    match: { path_prefix: /objects/ }\n"
                     "    allow_encoded_slashes: true\n"
                     "    upstream: origin\n";
  auto r = load_config_text(yaml, "slashes.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_FALSE(r.config->routes.at(0).allow_encoded_slashes);
  EXPECT_TRUE(r.config->routes.at(1).allow_encoded_slashes);
  EXPECT_NE(summarize(*r.config).find("allow_encoded_slashes"), std::string::npos);
}

TEST(LoadConfig, RouteHostLosesItsTrailingDot) {
  std::string yaml = std::string(kMinimal) +
                     "  - name: shop\n"
                     "    match: { host: Shop.Example. }\n"
                     "    upstream: origin\n";
  auto r = load_config_text(yaml, "host.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_EQ(r.config->routes.at(1).match.host, "shop.example");
}

// Refused (see the upstream_url_with_credentials fixture), and the password is in no message:
// --check-config prints them, and a url that fails to parse is echoed.
TEST(LoadConfig, UpstreamCredentialsAreRefusedWithoutEchoingThem) {
  for (const char* url : {"http://admin:s3cret@127.0.0.1:9000", "ftp://admin:s3cret@127.0.0.1",
                          "http://admin:s3cret@", "https://admin:s3cret@127.0.0.1/base",
                          // '/', '?' and '#' end the authority: the url no longer parses
                          "http://admin:s3/cret@127.0.0.1", "http://admin:s3?cret@127.0.0.1",
                          "http://admin:s3#cret@127.0.0.1"}) {
    std::string yaml = kMinimal;
    yaml.replace(yaml.find("http://127.0.0.1:9000"), 21, url);
    auto r = load_config_text(yaml, "cred.yaml", env_of({}));
    EXPECT_EQ(r.config, nullptr) << url;
    ASSERT_FALSE(r.errors.empty()) << url;
    for (const auto& e : r.errors)
      for (const char* secret : {"s3cret", "cret@"})
        EXPECT_EQ(e.to_string().find(secret), std::string::npos) << e.to_string();
  }
}

}  // namespace

namespace {

std::string leased_config(const std::string& store, const std::string& lease) {
  return "server:\n  listen: 0.0.0.0:8080\nupstreams:\n  origin: { url: \"http://127.0.0.1:9000\" "
         "}\n" +
         store +
         "routes:\n  - name: api\n    match: { path_prefix: / }\n    upstream: origin\n"
         "    limits:\n      - { name: tenant, algorithm: token_bucket, capacity: 1000,\n"
         "          refill_rate: 100/s, key: [route], lease: " +
         lease + " }\n";
}

const std::string kRedisStore =
    "store:\n  backend: redis\n  redis: { address: \"127.0.0.1:6379\" }\n"
    "  key_secret: test-secret-0123456789\n  instances: 3\n";

}  // namespace

TEST(LoadConfig, ALeaseDefaultsToATenthOfTheCapacityPerInstanceAndTwoSeconds) {
  auto r = load_config_text(leased_config(kRedisStore, "{}"), "lease.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_TRUE(r.warnings.empty());
  const auto& lease = *r.config->routes[0].limits[0].lease;
  EXPECT_EQ(lease.size, 1000 / (10 * 3));
  EXPECT_EQ(lease.ttl, 2000ms);
  // A bucket: what the other two hold, and what all three may have spent unreported.
  EXPECT_EQ(lease.early_refusal_bound(3, Algorithm::token_bucket), (2 + 3) * 33);
  EXPECT_EQ(lease.early_refusal_bound(3, Algorithm::fixed_window), 2 * 33);
}

TEST(LoadConfig, CheckConfigPrintsEachLeasedLimitsBound) {
  auto r = load_config_text(leased_config(kRedisStore, "{ size: 50, ttl: 5s }"), "lease.yaml",
                            env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  EXPECT_NE(summarize(*r.config).find("leased: 50 units per lease, returned after 5s; early "
                                      "refusals at most 250 units = (3 - 1) x 50 held by the other "
                                      "instances + 3 x 50 spent or lapsed that the store still "
                                      "counts, never an over-admission"),
            std::string::npos)
      << summarize(*r.config);
  // And /config says the same.
  EXPECT_NE(floodgate::admin::redacted_config_json(*r.config).find(
                R"("lease":{"size":50,"ttl":"5s","early_refusal_bound":250})"),
            std::string::npos)
      << floodgate::admin::redacted_config_json(*r.config);
}

TEST(LoadConfig, ALeaseOnTheMemoryBackendIsAWarning) {
  auto r = load_config_text(leased_config("", "{ size: 50 }"), "lease.yaml", env_of({}));
  ASSERT_TRUE(r.errors.empty()) << errors_of(r);
  bool warned = false;
  for (const auto& w : r.warnings)
    warned |= w.message.find("no effect on the memory backend") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_NE(summarize(*r.config).find("(no effect on the memory backend)"), std::string::npos);
}
