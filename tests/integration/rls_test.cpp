// Envoy's rate limit service (SPEC "Envoy's rate limit service (RLS)") on the real binary,
// called by a real gRPC client: Debian's python3-grpcio with messages compiled at test time
// from rls/envoy/..., which restate the API's own files (rls/rls_peer.py). What Envoy's
// ratelimit filter would send and read: descriptors decided together and all or nothing,
// hits_addend, a descriptor's own limit, unknown domains and descriptors, malformed calls,
// envoyproxy/ratelimit's config files.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include "delay_proxy.hpp"
#include "floodgate_process.hpp"
#include "harness.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

const std::string kRlsPeer =
    "/usr/bin/python3 " FLOODGATE_SOURCE_DIR "/tests/integration/rls/rls_peer.py";

// What rls_peer.py printed for `args` (its one JSON line).
json::object peer(const std::string& args) {
  auto out = command_output(kRlsPeer + " " + args, 60);
  boost::system::error_code ec;
  auto v = json::parse(out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "rls_peer.py printed: " << out;
    return {};
  }
  return v.as_object();
}

// The answer to `n` calls of `request` (JSON, rls_peer.py's REQUEST): the last one, with
// "counts" of each overall code.
json::object rls_call(std::uint16_t port, const std::string& request, int n = 1) {
  return peer("call " + std::to_string(port) + " '" + request + "' " + std::to_string(n));
}

// One call whose message is the bytes `hex`.
json::object rls_raw(std::uint16_t port, const std::string& hex) {
  return peer("raw " + std::to_string(port) + " '" + hex + "'");
}

std::int64_t code_count(const json::object& answer, const char* code) {
  const auto* counts = answer.if_contains("counts");
  if (!counts || !counts->is_object()) return -1;
  const auto* n = counts->as_object().if_contains(code);
  return n ? n->to_number<std::int64_t>() : 0;
}

std::string at_path(const json::value& v, std::initializer_list<std::string_view> path) {
  const json::value* at = &v;
  for (auto p : path) {
    if (at->is_object()) {
      at = at->as_object().if_contains(p);
    } else if (at->is_array()) {
      std::size_t i = std::stoul(std::string(p));
      at = i < at->as_array().size() ? &at->as_array()[i] : nullptr;
    } else {
      at = nullptr;
    }
    if (!at) return "(none)";
  }
  return at->is_string() ? std::string(at->as_string()) : json::serialize(*at);
}

// floodgate serving only Envoy's rate limit service: `rls` is the section's body (domains,
// envoy_config, ...), its listener on a free port; `extra`: more top-level YAML.
// `tls`: the listener's TLS section (`{ certificates: [...] }`), or none (h2c).
class RlsServer {
 public:
  explicit RlsServer(const std::string& rls, const std::string& extra = "",
                     const std::string& tls = "")
      : port_(free_port()), extra_(extra), tls_(tls) {
    path_ = write_temp_file(name(), yaml(rls));
    process_ = start_floodgate(path_);
    wait_listening(port_);
  }
  std::uint16_t port() const { return port_; }
  ChildProcess& process() { return *process_; }
  const std::string& path() const { return path_; }
  // The config file rewritten with `rls` as the section's body (then SIGHUP it).
  void rewrite(const std::string& rls) { write_temp_file(name(), yaml(rls)); }

 private:
  std::string name() const { return "rls-" + std::to_string(port_); }
  std::string yaml(const std::string& rls) const {
    const auto address = "\"127.0.0.1:" + std::to_string(port_) + "\"";
    return "server: { threads: 2 }\n" + extra_ + "rls:\n  listen: [" +
           (tls_.empty() ? address : "{ address: " + address + ", tls: " + tls_ + " }") + "]\n" +
           rls;
  }
  std::uint16_t port_;
  std::string extra_, tls_;
  std::string path_;
  std::unique_ptr<ChildProcess> process_;
};

const std::string kEdgeRules = R"(  domains:
    - domain: edge
      descriptors:
        - match: [ { key: remote_address } ]
          limits:
            - { name: per-ip, algorithm: fixed_window, limit: 3, window: 1h }
        - match: [ { key: tenant, value: acme }, { key: path } ]
          limits:
            - { name: acme-path, algorithm: token_bucket, capacity: 5, refill_rate: 1/h }
        - match: [ { key: plan, value: "gold*" } ]
          limits:
            - { name: gold, algorithm: sliding_window, limit: 2, window: 1m }
)";

TEST(Rls, AnEnvoyCallIsLimitedPerDescriptorValue) {
  RlsServer fg(kEdgeRules);
  const std::string ip1 =
      R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.0.0.1"]]}]})";
  auto a = rls_call(fg.port(), ip1, 5);
  EXPECT_EQ(code_count(a, "OK"), 3) << json::serialize(a);
  EXPECT_EQ(code_count(a, "OVER_LIMIT"), 2) << json::serialize(a);
  EXPECT_EQ(at_path(a, {"statuses", "0", "code"}), "OVER_LIMIT");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "name"}), "per-ip");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "rpu"}), "3");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "unit"}), "HOUR");
  // Another value of the key has a counter of its own.
  const std::string ip2 =
      R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.0.0.2"]]}]})";
  auto b = rls_call(fg.port(), ip2);
  EXPECT_EQ(at_path(b, {"overall"}), "OK") << json::serialize(b);
  EXPECT_EQ(at_path(b, {"statuses", "0", "remaining"}), "2");
}

TEST(Rls, CallsAreCountedLoggedAndLookedUpLikeARoutesRequests) {
  const auto admin = free_port();
  RlsServer fg(kEdgeRules, "admin: { listen: \"127.0.0.1:" + std::to_string(admin) +
                               "\", tokens: { t: \"rls-test-token-0123456789\" } }\n"
                               "log: { access_log: true }\n");
  const std::string ip =
      R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.3.3.3"]]}]})";
  EXPECT_EQ(code_count(rls_call(fg.port(), ip, 2), "OK"), 2);
  auto metrics = get(admin, "/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(
      metric(metrics->body(), "floodgate_requests_total{route=\"rls:edge\",outcome=\"admitted\"}"),
      2u);
  // The admin API names an RLS caller by its descriptor's entries.
  auto key = get(admin, "/keys?route=rls:edge&limit=per-ip&key=descriptor:remote_address=10.3.3.3",
                 "Authorization: Bearer rls-test-token-0123456789\r\n");
  ASSERT_TRUE(key);
  EXPECT_NE(key->body().find("\"remaining\":1"), std::string::npos) << key->body();
  std::string seen;
  auto line = wait_for_line(fg.process(), "\"protocol\":\"rls\"", 5s, seen);
  EXPECT_NE(line.find("\"route\":\"rls:edge\""), std::string::npos) << seen;
  EXPECT_NE(line.find("\"decision\":\"admitted\""), std::string::npos) << line;
}

TEST(Rls, DescriptorsAreDecidedTogetherAndARefusalChargesNothing) {
  RlsServer fg(kEdgeRules);
  // acme's path bucket holds 5, the caller's address 3: the third call of both is refused by
  // the address, and the path's bucket was charged for two calls only.
  const std::string both = R"({"domain":"edge","descriptors":[
      {"entries":[["tenant","acme"],["path","/a"]]},
      {"entries":[["remote_address","10.0.0.9"]]}]})";
  auto a = rls_call(fg.port(), both, 4);
  EXPECT_EQ(code_count(a, "OK"), 3) << json::serialize(a);
  EXPECT_EQ(code_count(a, "OVER_LIMIT"), 1);
  EXPECT_EQ(at_path(a, {"statuses", "0", "code"}), "OK") << json::serialize(a);
  EXPECT_EQ(at_path(a, {"statuses", "1", "code"}), "OVER_LIMIT");
  // A bucket's rate is its refill rate in the shortest unit that holds a whole number of it.
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "rpu"}), "1");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "unit"}), "HOUR");
  const std::string path_only =
      R"({"domain":"edge","descriptors":[{"entries":[["tenant","acme"],["path","/a"]]}]})";
  auto b = rls_call(fg.port(), path_only, 3);
  EXPECT_EQ(code_count(b, "OK"), 2) << json::serialize(b);  // 5 - 3 charged
  EXPECT_EQ(code_count(b, "OVER_LIMIT"), 1);
}

TEST(Rls, HitsAddendIsTheCostAndAPrefixValueMatches) {
  RlsServer fg(kEdgeRules);
  const std::string gold =
      R"({"domain":"edge","hits":2,"descriptors":[{"entries":[["plan","gold-eu"]]}]})";
  auto a = rls_call(fg.port(), gold);
  EXPECT_EQ(at_path(a, {"overall"}), "OK") << json::serialize(a);
  EXPECT_EQ(at_path(a, {"statuses", "0", "remaining"}), "0");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "unit"}), "MINUTE");
  auto b = rls_call(fg.port(), gold);
  EXPECT_EQ(at_path(b, {"overall"}), "OVER_LIMIT") << json::serialize(b);
  // The descriptor's own hits_addend wins over the request's; 0 there means 1, as Envoy sends.
  const std::string silver =
      R"({"domain":"edge","descriptors":[{"entries":[["plan","silver"]],"hits":9}]})";
  auto c = rls_call(fg.port(), silver);
  EXPECT_EQ(at_path(c, {"overall"}), "OK") << json::serialize(c);
  EXPECT_EQ(at_path(c, {"statuses", "0", "limit"}), "(none)");  // no rule: not limited
}

TEST(Rls, UnknownDomainsAndDescriptorsAreNotLimited) {
  RlsServer fg(kEdgeRules);
  auto a = rls_call(
      fg.port(),
      R"({"domain":"nowhere","descriptors":[{"entries":[["remote_address","1.2.3.4"]]}]})", 10);
  EXPECT_EQ(code_count(a, "OK"), 10) << json::serialize(a);
  // A descriptor deeper than any rule (tenant=acme alone) matches nothing.
  auto b = rls_call(fg.port(),
                    R"({"domain":"edge","descriptors":[{"entries":[["tenant","acme"]]}]})", 10);
  EXPECT_EQ(code_count(b, "OK"), 10) << json::serialize(b);
}

TEST(Rls, ADescriptorsOwnLimitIsCountedApartFromTheConfiguredOne) {
  RlsServer fg(kEdgeRules);
  const std::string own =
      R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.1.1.1"]],"limit":[2,"HOUR"]}]})";
  auto a = rls_call(fg.port(), own, 3);
  EXPECT_EQ(code_count(a, "OK"), 2) << json::serialize(a);
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "name"}), "override");
  // The configured per-ip limit of the same address still has all of its 3.
  auto b = rls_call(
      fg.port(), R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.1.1.1"]]}]})",
      4);
  EXPECT_EQ(code_count(b, "OK"), 3) << json::serialize(b);
}

TEST(Rls, MalformedCallsAreInvalidArgumentsAndTheListenerStays) {
  RlsServer fg(kEdgeRules);
  EXPECT_EQ(at_path(rls_raw(fg.port(), "ffffffff"), {"code"}), "INVALID_ARGUMENT");
  EXPECT_EQ(at_path(rls_raw(fg.port(), ""), {"code"}), "INVALID_ARGUMENT");  // no domain
  EXPECT_EQ(at_path(rls_call(fg.port(), R"({"domain":"edge","descriptors":[]})"), {"code"}),
            "INVALID_ARGUMENT");
  EXPECT_EQ(
      at_path(rls_call(fg.port(), R"({"domain":"edge","descriptors":[{"entries":[]}]})"), {"code"}),
      "INVALID_ARGUMENT");
  EXPECT_EQ(
      at_path(rls_call(fg.port(), R"({"domain":"edge","descriptors":[{"entries":[["","x"]]}]})"),
              {"code"}),
      "INVALID_ARGUMENT");
  for (const char* unit : {R"("UNKNOWN")", "37"})  // an override with no unit, or none known
    EXPECT_EQ(
        at_path(
            rls_call(fg.port(),
                     std::string(
                         R"({"domain":"edge","descriptors":[{"entries":[["a","b"]],"limit":[5,)") +
                         unit + "]}]}"),
            {"code"}),
        "INVALID_ARGUMENT")
        << unit;
  auto ok =
      rls_call(fg.port(),
               R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.2.2.2"]]}]})");
  EXPECT_EQ(at_path(ok, {"overall"}), "OK") << json::serialize(ok);
}

// envoyproxy/ratelimit's own format, read as that service reads it.
TEST(Rls, EnvoyRatelimitFilesAreServedAsWritten) {
  auto dir = fs::temp_directory_path() / ("floodgate-rls-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.yaml") << R"(domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
  - key: database
    value: default
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2, name: per-ip }
    descriptors:
      - key: path
        value: /health
        rate_limit: { unlimited: true }
  - key: client
    value: "mobile*"
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: shadowed
    shadow_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: source
    value: batch
    rate_limit: { unit: hour, requests_per_unit: 1, name: batch, replaces: [ { name: per-ip } ] }
)";
  std::ofstream(dir / "README") << "not a config: skipped\n";
  RlsServer fg("  envoy_config: " + dir.string() + "\n");
  // 5 calls against 2 a second: on a slow host (ThreadSanitizer) they may span two windows,
  // which admit at most 2 each, so at least one is refused and at most 4 pass.
  auto a =
      rls_call(fg.port(),
               R"({"domain":"mongo_cps","descriptors":[{"entries":[["database","default"]]}]})", 5);
  EXPECT_GE(code_count(a, "OVER_LIMIT"), 1) << json::serialize(a);
  EXPECT_GE(code_count(a, "OK"), 2) << json::serialize(a);
  EXPECT_LE(code_count(a, "OK"), 4) << json::serialize(a);
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "unit"}), "SECOND");
  // Nested: remote_address and path=/health is unlimited; the address alone is limited.
  auto b = rls_call(
      fg.port(),
      R"({"domain":"mongo_cps","descriptors":[{"entries":[["remote_address","1.1.1.1"],["path","/health"]]}]})",
      5);
  EXPECT_EQ(code_count(b, "OK"), 5) << json::serialize(b);
  EXPECT_EQ(at_path(b, {"statuses", "0", "remaining"}), "4294967295");
  auto c = rls_call(
      fg.port(),
      R"({"domain":"mongo_cps","descriptors":[{"entries":[["remote_address","1.1.1.1"]]}]})", 3);
  EXPECT_EQ(code_count(c, "OK"), 2) << json::serialize(c);
  // A wildcard value; shadow mode answers OK past its limit.
  auto d = rls_call(
      fg.port(), R"({"domain":"mongo_cps","descriptors":[{"entries":[["client","mobile-ios"]]}]})",
      2);
  EXPECT_EQ(code_count(d, "OK"), 1) << json::serialize(d);
  auto e = rls_call(fg.port(),
                    R"({"domain":"mongo_cps","descriptors":[{"entries":[["shadowed","x"]]}]})", 3);
  EXPECT_EQ(code_count(e, "OK"), 3) << json::serialize(e);
  // `replaces`: with source=batch in the call, the per-ip rule of another address is dropped.
  auto f = rls_call(fg.port(), R"({"domain":"mongo_cps","descriptors":[
      {"entries":[["remote_address","2.2.2.2"]]},{"entries":[["source","batch"]]}]})");
  EXPECT_EQ(at_path(f, {"statuses", "0", "limit"}), "(none)") << json::serialize(f);
  EXPECT_EQ(at_path(f, {"statuses", "1", "limit", "name"}), "batch");
  fs::remove_all(dir);
}

// The store section of an instance of 2 on the Redis at `port`.
std::string redis_store(std::uint16_t port) {
  return "store:\n  backend: redis\n  redis: { address: \"127.0.0.1:" + std::to_string(port) +
         "\", timeout: 200ms }\n  key_secret: rls-test-secret-0123456789\n  instances: 2\n";
}

std::string one_rule(const std::string& on_store_error, const std::string& limit) {
  return "  on_store_error: " + on_store_error +
         "\n  domains:\n    - domain: edge\n      descriptors:\n        - match: [ { key: user } "
         "]\n"
         "          limits: [ { name: per-user, algorithm: fixed_window, limit: " +
         limit + ", window: 1h } ]\n";
}

// Until `fg` decides in the store: a call of a descriptor of its own answered OK (with
// fail_closed, UNAVAILABLE until its workers' connections are up).
void wait_for_store(std::uint16_t port) {
  const std::string probe = R"({"domain":"edge","descriptors":[{"entries":[["user","probe"]]}]})";
  EXPECT_TRUE(eventually(
      [&] {
        return at_path(rls_call(port, probe, 4), {"counts", "OK"}) == "4";
      },
      10s));
}

TEST(Rls, TwoInstancesOnOneRedisAdmitExactlyTheLimit) {
  RedisServer redis;
  RlsServer a(one_rule("fail_closed", "10"), redis_store(redis.port()));
  RlsServer b(one_rule("fail_closed", "10"), redis_store(redis.port()));
  wait_for_store(a.port());
  wait_for_store(b.port());
  const std::string alice = R"({"domain":"edge","descriptors":[{"entries":[["user","alice"]]}]})";
  auto from_a = rls_call(a.port(), alice, 7);
  auto from_b = rls_call(b.port(), alice, 7);
  EXPECT_EQ(code_count(from_a, "OK") + code_count(from_b, "OK"), 10)
      << json::serialize(from_a) << json::serialize(from_b);
  EXPECT_EQ(code_count(from_a, "OVER_LIMIT") + code_count(from_b, "OVER_LIMIT"), 4);
  EXPECT_EQ(at_path(from_b, {"statuses", "0", "remaining"}), "0");
}

TEST(Rls, ADeadStoreFollowsOnStoreError) {
  const auto nothing = free_port();  // no Redis there
  RlsServer open(one_rule("fail_open", "1"), redis_store(nothing));
  RlsServer closed(one_rule("fail_closed", "1"), redis_store(nothing));
  RlsServer local(one_rule("local", "4"), redis_store(nothing));
  const std::string bob = R"({"domain":"edge","descriptors":[{"entries":[["user","bob"]]}]})";
  auto o = rls_call(open.port(), bob, 3);
  EXPECT_EQ(code_count(o, "OK"), 3) << json::serialize(o);
  EXPECT_EQ(at_path(o, {"statuses", "0", "limit", "name"}), "per-user");  // no numbers
  auto c = rls_call(closed.port(), bob, 3);
  EXPECT_EQ(code_count(c, "UNAVAILABLE"), 3) << json::serialize(c);
  // `local`: each of the 2 instances decides its share (4 / 2) in its embedded store.
  auto l = rls_call(local.port(), bob, 3);
  EXPECT_EQ(code_count(l, "OK"), 2) << json::serialize(l);
  EXPECT_EQ(code_count(l, "OVER_LIMIT"), 1);
}

TEST(Rls, CheckConfigNamesTheFileLineAndColumnOfABadRatelimitFile) {
  auto dir = fs::temp_directory_path() / ("floodgate-rls-bad-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.yaml") << "domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: "
                                   "fortnight, requests_per_unit: 1 }\n  - key: k\n    rate_limit: "
                                   "{ unit: day, requests_per_unit: 1 }\n";
  auto config = write_temp_file(
      "rls-bad.yaml",
      "server: { threads: 1 }\nrls:\n  listen: [\"127.0.0.1:0\"]\n  envoy_config: " + dir.string() +
          "\n");
  auto out = command_output(
      "sh -c '" + std::string(FLOODGATE_BINARY) + " --check-config " + config + " 2>&1'",
      30);  // diagnostics go to stderr, which command_output() drops
  EXPECT_NE(out.find((dir / "a.yaml").string() + ":4:"), std::string::npos) << out;
  EXPECT_NE(out.find("invalid rate limit unit 'fortnight'"), std::string::npos) << out;
  EXPECT_NE(out.find((dir / "a.yaml").string() + ":5:"), std::string::npos) << out;
  EXPECT_NE(out.find("duplicate descriptor"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(Rls, ATlsListenerServesCallsOverH2ByAlpn) {
  TestPki pki;
  const auto leaf = pki.issue("rls.test", {"rls.test"}, {"127.0.0.1"});
  RlsServer fg(kEdgeRules, "",
               "{ certificates: [ { cert: \"" + leaf.cert + "\", key: \"" + leaf.key + "\" } ] }");
  const std::string call =
      R"({"tls":{"ca":")" + pki.ca_file() +
      R"(","name":"rls.test"},"domain":"edge","descriptors":[{"entries":[["remote_address","10.4.4.4"]]}]})";
  auto a = rls_call(fg.port(), call, 4);
  EXPECT_EQ(code_count(a, "OK"), 3) << json::serialize(a);
  EXPECT_EQ(code_count(a, "OVER_LIMIT"), 1);
  // A client that does not speak TLS gets nothing decided from it.
  auto plain = rls_call(
      fg.port(),
      R"({"timeout":3,"domain":"edge","descriptors":[{"entries":[["remote_address","10.4.4.4"]]}]})");
  const auto code = at_path(plain, {"code"});
  EXPECT_TRUE(code == "UNAVAILABLE" || code == "DEADLINE_EXCEEDED") << json::serialize(plain);
}

TEST(Rls, AReloadChangesTheDomainsAndABadOneChangesNothing) {
  const std::string rules =
      "  domains:\n    - domain: edge\n      descriptors:\n"
      "        - match: [ { key: user } ]\n          limits: [ { name: "
      "per-user, algorithm: fixed_window, limit: LIMIT, window: 1h } ]\n";
  RlsServer fg(substitute(rules, "LIMIT", "2"));
  const std::string carol = R"({"domain":"edge","descriptors":[{"entries":[["user","carol"]]}]})";
  EXPECT_EQ(at_path(rls_call(fg.port(), carol), {"statuses", "0", "limit", "rpu"}), "2");
  fg.rewrite(substitute(rules, "LIMIT", "5"));
  kill(fg.process().pid(), SIGHUP);
  std::string seen;
  EXPECT_NE(wait_for_line(fg.process(), "is now serving", 10s, seen), "") << seen;
  auto after = rls_call(fg.port(), carol);
  EXPECT_EQ(at_path(after, {"statuses", "0", "limit", "rpu"}), "5") << json::serialize(after);
  // A domain whose limit has no unit: rejected as a whole, the running rules stay.
  fg.rewrite(substitute(rules, "LIMIT", "5, window: fortnight"));
  kill(fg.process().pid(), SIGHUP);
  EXPECT_NE(wait_for_line(fg.process(), "reload rejected", 10s, seen), "") << seen;
  auto kept = rls_call(fg.port(), carol);
  EXPECT_EQ(at_path(kept, {"statuses", "0", "limit", "rpu"}), "5") << json::serialize(kept);
}

// Until a client from another process has a connection to `port` open (`ss` lists it).
bool rls_client_connected(std::uint16_t port) {
  return eventually(
      [&] {
        auto out = command_output(
            "ss -Htn state established '( dport = :" + std::to_string(port) + " )'", 5);
        return !out.empty();
      },
      20s);
}

TEST(Rls, SigtermLetsACallInFlightFinishAndExitsZero) {
  RedisServer redis;
  DelayProxy far(redis.port(), 1500ms);  // every store round trip takes 3 s
  const std::string store =
      "store:\n  backend: redis\n  redis: { address: \"127.0.0.1:" + std::to_string(far.port()) +
      "\", timeout: 8s }\n  key_secret: rls-test-secret-0123456789\n";
  RlsServer fg(one_rule("fail_closed", "10"), store);
  const std::string dave = R"({"domain":"edge","descriptors":[{"entries":[["user","dave"]]}]})";
  auto call = std::async(std::launch::async, [&] { return rls_call(fg.port(), dave); });
  ASSERT_TRUE(rls_client_connected(fg.port()));
  std::this_thread::sleep_for(
      500ms);  // the call is sent with the connection: it waits on the store
  const auto exited = fg.process().signal_and_wait(SIGTERM, 20s);
  auto answer = call.get();
  EXPECT_EQ(at_path(answer, {"overall"}), "OK") << json::serialize(answer);
  EXPECT_EQ(at_path(answer, {"statuses", "0", "remaining"}), "9");
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(*exited, 0);
}

TEST(Rls, LeasesOnTwoInstancesNeverAdmitPastTheLimit) {
  RedisServer redis;
  const std::string rules =
      "  on_store_error: fail_closed\n  domains:\n    - domain: edge\n"
      "      descriptors:\n        - match: [ { key: user } ]\n"
      "          limits: [ { name: per-user, algorithm: fixed_window, "
      "limit: 40, window: 1h, lease: { size: 5 } } ]\n";
  RlsServer a(rules, redis_store(redis.port()));
  RlsServer b(rules, redis_store(redis.port()));
  wait_for_store(a.port());
  wait_for_store(b.port());
  const std::string erin = R"({"domain":"edge","descriptors":[{"entries":[["user","erin"]]}]})";
  auto from_a = rls_call(a.port(), erin, 30);
  auto from_b = rls_call(b.port(), erin, 30);
  const auto admitted = code_count(from_a, "OK") + code_count(from_b, "OK");
  // Never more than the limit; at most the early-refusal bound --check-config publishes for 2
  // instances with leases of 5 of a fixed window ((2 - 1) x 5 = 5) fewer.
  EXPECT_LE(admitted, 40) << json::serialize(from_a) << json::serialize(from_b);
  EXPECT_GE(admitted, 40 - 5) << json::serialize(from_a) << json::serialize(from_b);
  EXPECT_EQ(code_count(from_a, "OK") + code_count(from_a, "OVER_LIMIT"), 30);
}

TEST(Rls, AQuotaIsAnsweredUntilTheNextMidnight) {
  RlsServer fg(
      "  domains:\n    - domain: edge\n      descriptors:\n"
      "        - match: [ { key: tenant } ]\n          limits: [ { name: daily, "
      "algorithm: quota, limit: 2, period: day, timezone: UTC } ]\n");
  const std::string acme = R"({"domain":"edge","descriptors":[{"entries":[["tenant","acme"]]}]})";
  auto a = rls_call(fg.port(), acme, 3);
  EXPECT_EQ(code_count(a, "OK"), 2) << json::serialize(a);
  EXPECT_EQ(at_path(a, {"overall"}), "OVER_LIMIT");
  EXPECT_EQ(at_path(a, {"statuses", "0", "limit", "unit"}), "DAY");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const double to_midnight = static_cast<double>(86400 - now % 86400);
  const double reset = std::stod(at_path(a, {"statuses", "0", "reset"}));
  EXPECT_NEAR(reset, to_midnight, 30.0) << json::serialize(a);
}

// The access log's RLS lines replayed under the same config: every call is decided again as
// the listener decided it (floodgate replay --decisions, line by line).
TEST(Rls, ReplayOfTheAccessLogDecidesEachCallAsTheListenerDid) {
  RlsServer fg(kEdgeRules, "log: { access_log: true, replay_fields: auto }\n");
  struct Calls {
    std::string request;
    int n;
  };
  const std::vector<Calls> calls = {
      {R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.5.5.5"]]}]})", 5},
      {R"({"domain":"edge","descriptors":[{"entries":[["tenant","acme"],["path","/a&b=c d"]]},{"entries":[["remote_address","10.5.5.6"]]}]})",
       4},
      {R"({"domain":"edge","hits":2,"descriptors":[{"entries":[["plan","gold-eu"]]}]})", 2},
      {R"({"domain":"edge","descriptors":[{"entries":[["remote_address","10.5.5.7"]],"limit":[2,"HOUR"]}]})",
       3},
      {R"({"domain":"nowhere","descriptors":[{"entries":[["k","v"]]}]})", 1}};
  int total = 0, over = 0;
  for (const auto& c : calls) {
    auto a = rls_call(fg.port(), c.request, c.n);
    total += c.n;
    over += static_cast<int>(code_count(a, "OVER_LIMIT"));
  }
  EXPECT_EQ(over, 2 + 1 + 1 + 1);
  std::string log, seen;
  for (int i = 0; i < total; ++i) {
    auto line = wait_for_line(fg.process(), "\"protocol\":\"rls\"", 5s, seen);
    ASSERT_NE(line, "") << "only " << i << " of " << total << " lines: " << seen;
    EXPECT_NE(line.find("\"rls:0\":"), std::string::npos) << line;
    log += line + "\n";
  }
  const auto log_path = write_temp_file("rls-access-log", log);
  const auto tsv = log_path + ".tsv";
  auto report = command_output(std::string(FLOODGATE_BINARY) + " replay --config " + fg.path() +
                                   " --json --decisions " + tsv + " " + log_path,
                               60);
  boost::system::error_code ec;
  auto r = json::parse(report, ec);
  ASSERT_FALSE(ec) << report;
  EXPECT_EQ(at_path(r, {"candidate", "requests"}), std::to_string(total)) << report;
  EXPECT_EQ(at_path(r, {"candidate", "refused"}), std::to_string(over)) << report;
  // Line by line: refused in the replay exactly where the listener answered OVER_LIMIT.
  std::ifstream decisions(tsv);
  std::istringstream lines(log);
  std::string d, l;
  int compared = 0;
  while (std::getline(decisions, d) && std::getline(lines, l)) {
    const bool live = l.find("\"decision\":\"limited\"") != std::string::npos;
    EXPECT_EQ(d.find("\trefused\t") != std::string::npos, live) << d << "\n" << l;
    ++compared;
  }
  EXPECT_EQ(compared, total);
}

}  // namespace
}  // namespace floodgate::testing
